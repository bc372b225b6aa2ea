"""The bi-attention QA head as a thinc layer: QA Docs' token vectors -> span_qa's scores.

It reads the same (1 + n_tokens, 2) layout as `span_logits` (row 0 "no answer", then a
start and an end score per token), so `span_qa` trains and predicts with either head.
A QA Doc's question and context rows are cut apart and padded here; the question's rows
get score 0 (span_qa masks them out). Docs without a question (ordinary Docs in a
pipeline that mixes tasks) get zeros and no gradient.
"""
from typing import Callable, List, Sequence, Tuple

import numpy as np
import torch
from thinc.api import ArgsKwargs, Model, PyTorchWrapper_v2, torch2xp, xp2torch
from thinc.types import Floats2d
from torch import nn

from ..models.bi_attention import BiAttentionQA


class _Gathered(nn.Module):
    """Pads the question and context rows of a flat token matrix, then runs the head."""

    def __init__(self, head: BiAttentionQA):
        super().__init__()
        self.head = head

    def forward(self, flat, q_index, q_mask, c_index, c_mask):
        padded = torch.cat([flat, flat.new_zeros((1, flat.shape[1]))])  # row -1: padding
        return self.head(padded[q_index], q_mask, padded[c_index], c_mask)


def build_bi_attention(width: int, hidden: int, dropout: float) -> Model[Tuple[List[Floats2d], List[int]], List[Floats2d]]:
    """(per Doc token vectors, its question length) -> per Doc (1 + n_tokens, 2) scores.

    width: the token vectors' width; hidden, dropout: the LSTMs' width and dropout.
    """
    torch_head = PyTorchWrapper_v2(_Gathered(BiAttentionQA(width, hidden, dropout)),
                                   convert_inputs=_inputs, convert_outputs=_outputs)
    return Model("bi_attention", _forward, layers=[torch_head], dims={"nI": width})


def _forward(model: Model, X_q: Tuple[List[Floats2d], List[int]], is_train: bool):
    """The head on the QA Docs among a batch (question length > 0); zeros for the rest."""
    X, q_lens = X_q
    qa = [i for i, q in enumerate(q_lens) if q]
    outputs = [model.ops.alloc2f(len(x) + 1, 2) for x in X]
    if qa:
        Y, bp_Y = model.layers[0](([X[i] for i in qa], [q_lens[i] for i in qa]), is_train)
        for i, y in zip(qa, Y):
            outputs[i] = y

    def backprop(dY: List[Floats2d]) -> List[Floats2d]:
        dX = [model.ops.alloc2f(*x.shape) for x in X]
        if qa:
            for i, d in zip(qa, bp_Y([dY[i] for i in qa])):
                dX[i] = d
        return dX

    return outputs, backprop


def _inputs(model: Model, X_q: Tuple[Sequence[Floats2d], Sequence[int]], is_train: bool):
    X, q_lens = X_q
    device = model.shims[0].device
    lengths = np.asarray([len(x) for x in X])
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    c_lens = lengths - np.asarray(q_lens)  # >= 1: a first segment leaves tokens after it
    n = int(offsets[-1])
    q_index, q_mask = _index(offsets[:-1], np.asarray(q_lens), n)
    c_index, c_mask = _index(offsets[:-1] + np.asarray(q_lens), c_lens, n)
    flat = xp2torch(model.ops.xp.concatenate(list(X)), requires_grad=is_train, device=device)
    as_torch = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
    inputs = ArgsKwargs(args=(flat, as_torch(q_index), as_torch(q_mask), as_torch(c_index), as_torch(c_mask)),
                        kwargs={})

    def reverse(d_inputs: ArgsKwargs) -> List[Floats2d]:
        d = torch2xp(d_inputs.args[0])
        return [d[offsets[i] : offsets[i + 1]] for i in range(len(X))]

    return inputs, reverse


def _index(starts: np.ndarray, counts: np.ndarray, padding: int) -> Tuple[np.ndarray, np.ndarray]:
    """(B, max count) row indices of each Doc's run of rows (padding row where past its end), and the mask."""
    width = int(counts.max())
    steps = np.arange(width)[None, :]
    mask = steps < counts[:, None]
    return np.where(mask, starts[:, None] + steps, padding).astype(np.int64), mask


def _outputs(model: Model, inputs_outputs, is_train: bool) -> Tuple[List[Floats2d], Callable]:
    (X, q_lens), scores = inputs_outputs
    ops = model.ops
    c_lens = [len(x) - q for x, q in zip(X, q_lens)]
    raw = torch2xp(scores)
    outputs = [ops.xp.vstack([raw[b, :1], ops.alloc2f(q, 2), raw[b, 1 : 1 + c]])
               for b, (q, c) in enumerate(zip(q_lens, c_lens))]

    def reverse(dY: List[Floats2d]) -> ArgsKwargs:
        d = ops.alloc3f(*scores.shape)
        for b, (q, c) in enumerate(zip(q_lens, c_lens)):
            d[b, 0] = dY[b][0]
            d[b, 1 : 1 + c] = dY[b][1 + q :]
        return ArgsKwargs(args=(scores,), kwargs={"grad_tensors": xp2torch(d, device=scores.device)})

    return outputs, reverse
