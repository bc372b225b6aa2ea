"""thinc's Adam step for a torch module's parameters, done in place with torch ops.

thinc's `PyTorchShim.finish_update` hands every parameter to the optimizer as a NumPy
array, and thinc's CPU Adam runs one thread. Measured on MiniLM's parameters (2 torch
threads): 111 ms a step through thinc against 52 ms here; training the NER
pipeline (bench/compare_peer.py's speed worker, 2 threads, 3 alternating processes):
961 against 932 words/s. The arithmetic is thinc's (`thinc.optimizers.Optimizer.__call__` and its CPU Adam kernel),
and so is the state: moments and update counts live in the optimizer under the shim's
keys, so the two paths can take turns on the same parameters.
"""
import numpy as np
import torch
from thinc.optimizers import Optimizer
from torch import nn

_ROWS_AT_ONCE = 2048


def handles(optimizer) -> bool:
    """Whether `adam_step` does what this optimizer would: thinc's plain Adam without
    parameter averages (RAdam, SGD and averaging are left to thinc)."""
    return (isinstance(optimizer, Optimizer) and not optimizer.use_radam and optimizer.averages is None
            and optimizer.b1 > 0.0 and optimizer.b2 > 0.0)


def adam_step(module: nn.Module, optimizer: Optimizer, key_id: int) -> None:
    """Update `module`'s parameters that have a gradient, as `optimizer((key_id, name), w, g)`
    would, and zero their gradients (a sparse one, e.g. of an embedding table, is removed).

    A sparse gradient is applied as the dense one it stands for (zeros in the rows it
    lacks: those rows' moments decay and their weights still move), without making it.
    """
    b1, b2, eps = optimizer.b1, optimizer.b2, optimizer.eps
    # thinc's kernel takes 1 - beta in float32 (1 - 0.999 is then 0.00099999, not 0.001).
    one_minus_b1, one_minus_b2 = (float(np.float32(1.0) - np.float32(b)) for b in (b1, b2))
    rate, l2, clip = optimizer.learn_rate, optimizer.L2, optimizer.grad_clip
    for name, param in module.named_parameters():
        grad = param.grad
        if grad is None or not grad.numel():
            continue
        key = (key_id, name)
        optimizer.nr_update[key] += 1
        step = optimizer.nr_update[key]
        weights = param.data
        if grad.is_sparse and l2 and not optimizer.L2_is_weight_decay:
            grad = grad.to_dense()  # L2 as a gradient term touches every row
        rows = None
        if grad.is_sparse:
            grad = grad.coalesce()
            rows, grad = grad.indices()[0], grad.values()
        if l2 and not optimizer.L2_is_weight_decay:
            grad.add_(weights, alpha=l2)
        if clip:
            norm = float(torch.linalg.vector_norm(grad))
            if norm >= clip:
                grad.mul_(clip / norm)
        if key not in optimizer.mom1:
            optimizer.mom1[key] = np.zeros(weights.numel(), dtype="float32")
            optimizer.mom2[key] = np.zeros(weights.numel(), dtype="float32")
        mom1 = torch.from_numpy(optimizer.mom1[key]).view_as(weights)
        mom2 = torch.from_numpy(optimizer.mom2[key]).view_as(weights)
        step_size = -rate * (1.0 - b2**step) ** 0.5 / (1.0 - b1**step)
        if rows is None:
            mom1.lerp_(grad, one_minus_b1)  # b1 · m + (1 - b1) · g
            mom2.mul_(b2).addcmul_(grad, grad, value=one_minus_b2)
            # The gradient is spent once the moments have it: its memory holds sqrt(m2) + eps.
            weights.addcdiv_(mom1, torch.sqrt(mom2, out=grad).add_(eps), value=step_size)
        else:
            mom1.mul_(b1).index_add_(0, rows, grad, alpha=one_minus_b1)
            mom2.mul_(b2).index_add_(0, rows, grad * grad, alpha=one_minus_b2)
            for start in range(0, len(weights), _ROWS_AT_ONCE):  # no table-sized temporary
                block = slice(start, start + _ROWS_AT_ONCE)
                weights[block].addcdiv_(mom1[block], torch.sqrt(mom2[block]).add_(eps), value=step_size)
        if l2 and optimizer.L2_is_weight_decay:
            weights.mul_(1.0 - rate * l2)
        if grad is param.grad:
            grad.zero_()
        else:  # a sparse gradient, applied from its rows or densified
            param.grad = None
