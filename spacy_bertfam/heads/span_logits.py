"""Start/end scores of answer spans over token vectors, plus a "no answer" row.

Row 0 of a doc's output scores "no answer" (SQuAD v2): it comes from the doc's mean
token vector, since listeners hand over tokens, not BERT's [CLS] vector. Rows 1..n
score each token as the answer's start (column 0) and end (column 1), as BERT's
SQuAD head does (Devlin et al. 2018, §4.2-4.3).
"""
from typing import Callable, List, Optional, Tuple

import numpy as np
from thinc.api import Model
from thinc.types import Floats2d


def build_span_logits(nI: Optional[int] = None) -> Model[List[Floats2d], List[Floats2d]]:
    """Per doc, (n_tokens, nI) token vectors -> (1 + n_tokens, 2) start/end scores.

    Row 0 ("no answer") is an affine map of the doc's mean token vector (W_null, b_null); rows
    1..n an affine map of each token (W, b). Weights start as normal(0, 0.02), biases at 0.
    nI (Optional[int]): input width; None infers it from the data at initialisation.
    """
    return Model("span_logits", _forward, init=_init, dims={"nI": nI},
                 params={"W": None, "b": None, "W_null": None, "b_null": None})


def _init(model: Model, X: Optional[List[Floats2d]] = None, Y=None) -> None:
    if X is not None and X:
        model.set_dim("nI", X[0].shape[1])
    nI = model.get_dim("nI")
    # BERT's initialisation (normal, std 0.02): with a zero start, the encoder gets
    # almost no gradient until the head has grown, which cost accuracy on SQuAD.
    for name in ("W", "W_null"):
        model.set_param(name, model.ops.asarray2f(np.random.normal(0.0, 0.02, (2, nI))))
    for name in ("b", "b_null"):
        model.set_param(name, model.ops.alloc1f(2))


def _forward(model: Model, docs: List[Floats2d], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    W, b, W_null, b_null = (model.get_param(n) for n in ("W", "b", "W_null", "b_null"))
    xp = model.ops.xp
    means = [X.mean(axis=0) if len(X) else model.ops.alloc1f(W.shape[1]) for X in docs]
    outputs = [xp.vstack([m @ W_null.T + b_null, X @ W.T + b]) for X, m in zip(docs, means)]

    def backprop(d_outputs: List[Floats2d]) -> List[Floats2d]:
        d_docs = []
        for X, m, dY in zip(docs, means, d_outputs):
            d_null, d_tokens = dY[0], dY[1:]
            model.inc_grad("W", d_tokens.T @ X)
            model.inc_grad("b", d_tokens.sum(axis=0))
            model.inc_grad("W_null", xp.outer(d_null, m))
            model.inc_grad("b_null", d_null)
            dX = d_tokens @ W
            if len(X):
                dX = dX + (d_null @ W_null) / len(X)
            d_docs.append(dX)
        return d_docs

    return outputs, backprop
