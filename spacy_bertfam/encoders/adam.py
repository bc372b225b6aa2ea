"""thinc's Adam step for a torch module's parameters, done in place by torch's fused Adam.

thinc's `PyTorchShim.finish_update` hands every parameter to the optimizer as a NumPy
array, and thinc's CPU Adam runs one thread. Measured on MiniLM's parameters (2 torch
threads): 111 ms a step through thinc against 52 ms with separate torch ops; training the NER
pipeline (bench/compare_peer.py's speed worker, 2 threads, 3 alternating processes):
961 against 932 words/s. torch's fused kernel reads and writes each parameter once
(`torch.optim.adam.adam(fused=True)`: 19 against 72 ms for 32M parameters with one torch op per
pass). The arithmetic is thinc's (`thinc.optimizers.Optimizer.__call__` and its CPU Adam
kernel) up to rounding: its betas, bias corrections, ε and weight decay after the step are
mapped onto torch's parameters (`adam_step`; within 1e-6 of thinc in tests/encoders). The
state is thinc's too: moments and update counts live in the optimizer under the shim's keys,
so the two paths can take turns on the same parameters.
"""
import weakref
from collections import defaultdict
from typing import Dict, List, Tuple

import numpy as np
import torch
from thinc.optimizers import Optimizer
from torch import nn
from torch.optim.adam import adam

# A dense gradient buffer per sparsely updated table (by the parameter's id, while it lives),
# zero outside the rows being applied: a fresh table-sized gradient would cost new pages
# from the system at every step.
_DENSE_BUFFERS: Dict[int, Tuple["weakref.ref[torch.Tensor]", torch.Tensor]] = {}


def _dense_buffer(param: torch.Tensor) -> torch.Tensor:
    owner, buffer = _DENSE_BUFFERS.get(id(param), (None, None))
    if owner is None or owner() is not param:
        key = id(param)
        owner, buffer = weakref.ref(param, lambda _: _DENSE_BUFFERS.pop(key, None)), torch.zeros_like(param.data)
        _DENSE_BUFFERS[key] = (owner, buffer)
    return buffer


def handles(optimizer) -> bool:
    """Whether `adam_step` does what this optimizer would: thinc's plain Adam without
    parameter averages (RAdam, SGD and averaging are left to thinc)."""
    return (isinstance(optimizer, Optimizer) and not optimizer.use_radam and optimizer.averages is None
            and optimizer.b1 > 0.0 and optimizer.b2 > 0.0)


def adam_step(module: nn.Module, optimizer: Optimizer, key_id: int) -> None:
    """Update `module`'s parameters that have a gradient, as `optimizer((key_id, name), w, g)`
    would, and zero their gradients (a sparse one, e.g. of an embedding table, is removed).

    A sparse gradient is applied as the dense one it stands for (zeros in the rows it
    lacks: those rows' moments decay and their weights still move).
    """
    rate, l2, clip = optimizer.learn_rate, optimizer.L2, optimizer.grad_clip
    l2_in_gradient = bool(l2) and not optimizer.L2_is_weight_decay
    by_step: Dict[int, List[List[torch.Tensor]]] = defaultdict(lambda: [[], [], [], [], []])
    spent = []  # (param, dense gradient, rows written into a buffer or None)
    for name, param in module.named_parameters():
        grad = param.grad
        if grad is None or not grad.numel():
            continue
        key = (key_id, name)
        optimizer.nr_update[key] += 1
        weights, rows = param.data, None
        if grad.is_sparse and l2_in_gradient:
            grad = grad.to_dense()  # L2 as a gradient term touches every row
        if grad.is_sparse:
            grad = grad.coalesce()
            rows, grad = grad.indices()[0], grad.values()
        if l2_in_gradient:
            grad.add_(weights, alpha=l2)
        if clip:
            norm = float(torch.linalg.vector_norm(grad))
            if norm >= clip:
                grad.mul_(clip / norm)
        if rows is not None:
            values, grad = grad, _dense_buffer(param)
            grad.index_copy_(0, rows, values)
        if key not in optimizer.mom1:
            optimizer.mom1[key] = np.zeros(weights.numel(), dtype="float32")
            optimizer.mom2[key] = np.zeros(weights.numel(), dtype="float32")
        group = by_step[optimizer.nr_update[key]]
        for items, tensor in zip(group, (weights, grad, torch.from_numpy(optimizer.mom1[key]).view_as(weights),
                                         torch.from_numpy(optimizer.mom2[key]).view_as(weights))):
            items.append(tensor)
        group[4].append(torch.tensor(float(optimizer.nr_update[key] - 1)))  # torch adds the step
        spent.append((param, grad, rows))
    # thinc's kernel takes 1 - beta in float32 (1 - 0.999 is then 0.00099999, not 0.001), and
    # torch's takes 1 - beta from the betas it is given: those betas make the moments thinc's.
    b1, b2 = optimizer.b1, optimizer.b2
    b1_, b2_ = (1.0 - float(np.float32(1.0) - np.float32(b)) for b in (b1, b2))
    # thinc decays after the step, w' = (w - Δ)·k with k = 1 - lr·L2; torch before it, w·(1 - lr'·d) - Δ'.
    k = 1.0 - rate * l2 if l2 and not l2_in_gradient else 1.0
    for step, (weights, grads, mom1, mom2, steps) in by_step.items():
        # thinc's Δ = lr·√(1-b2ᵗ)/(1-b1ᵗ)·m/(√v + ε); torch's Δ' = lr'/(1-b1_ᵗ)·m/(√v/√(1-b2_ᵗ) + ε'):
        # Δ' = k·Δ with ε' = ε/√(1-b2_ᵗ) and lr' below, and then d = (1 - k)/lr'.
        fix2_ = (1.0 - b2_**step) ** 0.5
        lr = rate * k * (1.0 - b2**step) ** 0.5 / (1.0 - b1**step) * (1.0 - b1_**step) / fix2_
        adam(weights, grads, mom1, mom2, [], steps, fused=True, decoupled_weight_decay=True, amsgrad=False,
             beta1=b1_, beta2=b2_, lr=lr, weight_decay=(1.0 - k) / lr if lr else 0.0,
             eps=optimizer.eps / fix2_, maximize=False)
    for param, grad, rows in spent:
        if rows is not None:
            grad.index_fill_(0, rows, 0.0)
        if grad is param.grad:
            grad.zero_()
        else:  # a sparse gradient, applied through a buffer or densified
            param.grad = None
