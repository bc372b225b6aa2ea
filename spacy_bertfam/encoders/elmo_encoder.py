"""The thinc Model running ELMo over Docs: one "piece" per token, no windows.

Each Doc (or each of its sentences, when it has sentence boundaries) is wrapped in
<S> ... </S> and read whole by the LSTMs, statelessly, so a text gets the same
vectors whatever batch it is in; a 20,000-token Doc is processed in one pass.
"""
from typing import Callable, List, Optional, Tuple

import numpy as np
import torch
from spacy.tokens import Doc
from thinc.api import ArgsKwargs, Model, torch2xp, xp2torch
from torch import nn

from ..models.elmo import ElmoBiLM
from ..tokenization.characters import batch_char_ids
from ..tokenization.words import first_segment_end
from .contract import CONTRACT, EncodedBatch, EncoderContract, EncoderShim, contract_of
from .outputs import join_gradients, split_outputs


class SentenceEncoder(nn.Module):
    """Runs the biLM on padded sentences and gathers the real tokens' outputs."""

    def __init__(self, encoder: ElmoBiLM):
        super().__init__()
        self.encoder = encoder

    def forward(self, char_ids: torch.Tensor, rows: torch.Tensor, layers: List[int],
                autocast: Optional[torch.dtype] = None) -> List[torch.Tensor]:
        """char_ids: (S, T, C) with markers; rows: (n,) flat (S·T) index of each real token.

        autocast: run the biLM under torch autocast to this dtype; outputs are float32.
        """
        if char_ids.shape[0] == 0:
            width = 2 * self.encoder.config.projection_width
            return [char_ids.new_zeros((0, width), dtype=torch.float32) for _ in layers]
        with torch.autocast(char_ids.device.type, dtype=autocast or torch.float32, enabled=autocast is not None):
            out, _ = self.encoder(char_ids)
        return [out.layers[i].reshape(-1, out.layers[i].shape[-1])[rows].float() for i in layers]


# `nlp.pipe` calls: up to 128 Docs and 16,384 tokens. Each LSTM step multiplies the rows still
# running by its weights: 25 rows (4,096 tokens of 50-300-word paragraphs) ran at 84 GFLOP/s,
# 64-512 rows at 145-159 (2 threads); beyond ~128 rows a step's gates leave the cache.
# Against 4,096 tokens and no Doc bound: tweets x1.15, prose x1.33, same outputs (bench/results/elmo_speed.md).
CALL_TOKENS, CALL_DOCS = 16384, 128


def build_elmo_encoder(encoder: ElmoBiLM) -> Model[List[Doc], EncodedBatch]:
    """Wrap an `ElmoBiLM`; its L + 1 layer outputs are 2 × projection_width wide."""
    config = encoder.config
    width = 2 * config.projection_width
    contract = EncoderContract(family="elmo", n_layers=config.n_layers + 1, width=width, default_pooling="mean",
                               batch_pieces=CALL_TOKENS, max_docs=CALL_DOCS)
    return Model(
        "elmo_encoder",
        _forward,
        shims=[EncoderShim(SentenceEncoder(encoder))],
        dims={"nO": width},
        attrs={CONTRACT: contract, "max_chars": config.max_chars},
    )


def _sentences(doc: Doc) -> List[Tuple[int, int]]:
    """Token ranges read as separate sequences: the sentences, and a sentence pair's two
    segments (a QA Doc's question and context) apart."""
    lead = first_segment_end(doc)
    if len(doc) and doc.has_annotation("SENT_START"):
        spans = [(s.start, s.end) for s in doc.sents]
    else:
        spans = [(0, len(doc))] if len(doc) else []
    if not lead:
        return spans
    return [(0, lead)] + [(max(s, lead), e) for s, e in spans if e > lead]


def _forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[EncodedBatch, Callable]:
    contract = contract_of(model)
    contract.check_initialised()
    spans = [(d, s, e) for d, doc in enumerate(docs) for s, e in _sentences(doc)]
    char_ids = batch_char_ids([[t.text for t in docs[d][s:e]] for d, s, e in spans], model.attrs["max_chars"])
    T = char_ids.shape[1]
    # Flat row of each real token (skipping <S>), in doc order.
    rows = (np.concatenate([k * T + 1 + np.arange(e - s) for k, (_, s, e) in enumerate(spans)])
            if spans else np.zeros(0, dtype=np.int64))
    layer_ids = contract.requested_layers()
    shim: EncoderShim = model.shims[0]
    to_torch = lambda a: xp2torch(a, device=shim.device)  # noqa: E731
    inputs = ArgsKwargs(args=(to_torch(char_ids), to_torch(rows.astype(np.int64)), layer_ids),
                        kwargs={"autocast": shim.use_precision(contract.precision)})
    outputs, backprop_torch = shim(inputs, is_train)
    offsets = np.cumsum([0] + [len(doc) for doc in docs])
    alignments = [(np.ones(len(doc), dtype=np.int64), np.arange(len(doc), dtype=np.int64)) for doc in docs]
    batch = EncodedBatch(split_outputs([torch2xp(o) for o in outputs], layer_ids, offsets, alignments,
                                       own=not is_train))

    def backprop(d_encodings) -> List[Doc]:
        if not len(rows):
            return docs
        grads = join_gradients(model.ops, d_encodings, layer_ids, offsets, contract.width)
        backprop_torch(ArgsKwargs(args=(tuple(outputs),), kwargs={"grad_tensors": [to_torch(g) for g in grads]}))
        return docs

    return batch, backprop
