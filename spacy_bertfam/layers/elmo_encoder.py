"""The thinc Model running ELMo over Docs: one "piece" per token, no windows.

Each Doc (or each of its sentences, when it has sentence boundaries) is wrapped in
<S> ... </S> and read whole by the LSTMs, statelessly, so a text gets the same
vectors whatever batch it is in; a 20,000-token Doc is processed in one pass.
"""
from typing import Callable, List, Tuple

import numpy as np
import torch
from spacy.tokens import Doc
from thinc.api import ArgsKwargs, Model, PyTorchShim, torch2xp, xp2torch
from torch import nn

from ..models.elmo import ElmoBiLM
from ..tokenization.characters import batch_char_ids
from ..types import DocEncoding


class SentenceEncoder(nn.Module):
    """Runs the biLM on padded sentences and gathers the real tokens' outputs."""

    def __init__(self, encoder: ElmoBiLM):
        super().__init__()
        self.encoder = encoder

    def forward(self, char_ids: torch.Tensor, rows: torch.Tensor, layers: List[int]) -> List[torch.Tensor]:
        """char_ids: (S, T, C) with markers; rows: (n,) flat (S·T) index of each real token."""
        if char_ids.shape[0] == 0:
            width = 2 * self.encoder.config.projection_width
            return [char_ids.new_zeros((0, width), dtype=torch.float32) for _ in layers]
        out, _ = self.encoder(char_ids)
        return [out.layers[i].reshape(-1, out.layers[i].shape[-1])[rows] for i in layers]


def build_elmo_encoder(encoder: ElmoBiLM) -> Model[List[Doc], List[DocEncoding]]:
    config = encoder.config
    return Model(
        "elmo_encoder",
        _forward,
        shims=[PyTorchShim(SentenceEncoder(encoder))],
        dims={"nO": 2 * config.projection_width},
        attrs={"family": "elmo", "source": "", "n_layers": config.n_layers + 1, "layers": None,
               "default_pooling": "mean", "max_chars": config.max_chars},
    )


def _sentences(doc: Doc) -> List[Tuple[int, int]]:
    if len(doc) and doc.has_annotation("SENT_START"):
        return [(s.start, s.end) for s in doc.sents]
    return [(0, len(doc))] if len(doc) else []


def _forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[DocEncoding], Callable]:
    if not model.attrs["source"]:
        raise ValueError("The ELMo encoder was never initialised: load weights with an encoder_loader "
                         "under [initialize.components.<name>], or ask for random initialisation there")
    spans = [(d, s, e) for d, doc in enumerate(docs) for s, e in _sentences(doc)]
    words = [[t.text for t in docs[d][s:e]] for d, s, e in spans]
    char_ids = batch_char_ids(words, model.attrs["max_chars"])
    T = char_ids.shape[1]
    # Flat row of each real token (skipping <S>), in doc order.
    rows = np.concatenate([k * T + 1 + np.arange(e - s) for k, (_, s, e) in enumerate(spans)]) if spans else np.zeros(0, dtype=np.int64)
    n_layers = model.attrs["n_layers"]
    layer_ids = list(range(n_layers)) if model.attrs["layers"] is None else sorted(set(model.attrs["layers"]))
    shim: PyTorchShim = model.shims[0]
    to_torch = lambda a: xp2torch(a, device=shim.device)  # noqa: E731
    outputs, backprop_torch = shim(ArgsKwargs(args=(to_torch(char_ids), to_torch(rows.astype(np.int64)), layer_ids),
                                              kwargs={}), is_train)
    arrays = [torch2xp(o) for o in outputs]
    offsets = np.cumsum([0] + [len(doc) for doc in docs])
    encodings = [
        DocEncoding(layers={l: a[offsets[d] : offsets[d + 1]] for l, a in zip(layer_ids, arrays)},
                    token_lengths=np.ones(len(doc), dtype=np.int64), token_pieces=np.arange(len(doc)))
        for d, doc in enumerate(docs)
    ]

    def backprop(d_encodings) -> List[Doc]:
        if not len(rows):
            return docs
        grads = []
        for layer, out in zip(layer_ids, outputs):
            grad = model.ops.alloc2f(*out.shape)
            for d, g in enumerate(d_encodings):
                if g.get(layer) is not None:
                    grad[offsets[d] : offsets[d + 1]] += g[layer]
            grads.append(to_torch(grad))
        backprop_torch(ArgsKwargs(args=(tuple(outputs),), kwargs={"grad_tensors": grads}))
        return docs

    return encodings, backprop
