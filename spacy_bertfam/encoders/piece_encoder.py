"""The thinc Model that turns Docs into piece-level layer outputs of a torch transformer.

Tokenization, alignment and windowing live inside this Model (not on the pipeline
component), so a copy of the Model, such as the one `nlp.replace_listeners` makes,
works on its own. The piece tokenizer is part of the encoder's contract, serialised
with the Model.
"""
from dataclasses import asdict, dataclass
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import srsly
from spacy.tokens import Doc
from thinc.api import ArgsKwargs, Model, torch2xp, xp2torch
from thinc.model import deserialize_attr, serialize_attr
from torch import nn

from ..errors import ConfigError
from ..models.windowed import WindowedEncoder
from ..processes import return_freed_memory, trim_freed_memory
from ..tokenization import PieceTokenizer
from ..tokenization.alignment import DocPieces, align_tokens
from ..tokenization.windows import WindowPlan, plan_windows
from ..tokenization.words import first_segment_end, token_words
from .contract import CONTRACT, EncodedBatch, EncoderContract, EncoderShim, contract_of
from .outputs import join_gradients, split_outputs

LAYOUT = "layout"


@dataclass(frozen=True)
class PieceLayout:
    """How a family lays Docs out as piece windows (fixed by its architecture).

    window, stride, combine: see `tokenization.windows`.
    prefix, suffix: special pieces around every window (e.g. ["[CLS]"], ["[SEP]"]).
    separator: pieces between a sentence pair's segments (["[SEP]"]), or None.
    unknown: the piece used for a doc whose tokens yield no piece.
    padding_id: id of the padding piece.
    words: what the tokenizer sees of each token (see `tokenization.words.token_words`).
    """

    window: int
    stride: int
    combine: str
    prefix: Tuple[str, ...]
    suffix: Tuple[str, ...]
    separator: Optional[Tuple[str, ...]]
    unknown: str
    padding_id: int
    words: str = "text"


@serialize_attr.register(PieceLayout)
def _serialize_layout(_: PieceLayout, value: PieceLayout, name: str, model: Model) -> bytes:
    return srsly.msgpack_dumps(asdict(value))


@deserialize_attr.register(PieceLayout)
def _deserialize_layout(_: PieceLayout, value: bytes, name: str, model: Model) -> PieceLayout:
    data = srsly.msgpack_loads(value)
    sep = data.pop("separator")
    return PieceLayout(**{**data, "prefix": tuple(data["prefix"]), "suffix": tuple(data["suffix"]),
                          "separator": None if sep is None else tuple(sep)})


def build_piece_encoder(
    encoder: nn.Module,
    layout: PieceLayout,
    *,
    family: str,
    n_layers: int,
    width: int,
    default_pooling: str,
    batch_pieces: int,
) -> Model[List[Doc], EncodedBatch]:
    """Wrap a torch encoder (run by `models.windowed.WindowedEncoder`, which says how it
    is called) as a Model from Docs to their stored layer outputs.

    family: checkpoint family the encoder accepts ("bert", "gpt").
    n_layers: number of layer outputs (embedding output included).
    default_pooling: how listeners pool a token's pieces unless told otherwise.
    batch_pieces: padded positions per encoder call (see `tokenization.windows`).

    With an LM weight requested in the contract (causal families), training also
    computes the batch's mean next-piece cross-entropy, returned in `EncodedBatch.lm_loss`
    and backpropagated with that weight.
    """
    n_positions = getattr(encoder.config, "n_positions", layout.window)
    if layout.window > n_positions:
        raise ConfigError(
            f"window {layout.window} exceeds the {n_positions} positions of this model; "
            f"set window <= {n_positions}"
        )
    if batch_pieces < 1:
        raise ConfigError(f"batch_pieces must be >= 1 (padded positions per encoder call; the default is 4096), "
                          f"got {batch_pieces}")
    # Checked now rather than at the first batch, so a bad config fails early.
    plan_windows([], window=layout.window, stride=layout.stride, prefix=[0] * len(layout.prefix),
                 suffix=[0] * len(layout.suffix), padding_id=layout.padding_id, combine=layout.combine)
    contract = EncoderContract(family=family, n_layers=n_layers, width=width, default_pooling=default_pooling,
                               pairs=layout.separator is not None, tokenizer=PieceTokenizer(), batch_pieces=batch_pieces)
    return Model(
        f"{family}_piece_encoder",
        _forward,
        shims=[EncoderShim(WindowedEncoder(encoder))],
        dims={"nO": width},
        attrs={CONTRACT: contract, LAYOUT: layout},
    )


def piece_layout(model: Model) -> PieceLayout:
    """The window layout of a piece-encoder Model (BERT, GPT)."""
    return model.attrs[LAYOUT]


def _forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[EncodedBatch, Callable]:
    contract = contract_of(model)
    contract.check_initialised()
    layout = piece_layout(model)
    tokenizer = contract.tokenizer
    pieces = align_tokens(tokenizer, [token_words(doc, layout.words) for doc in docs],
                          unk_id=tokenizer.piece_id(layout.unknown),
                          first_segments=[first_segment_end(doc) for doc in docs])
    sequences, starts, leads = _sequences(contract, docs, pieces)
    plan = plan_windows(
        sequences,
        window=layout.window,
        stride=layout.stride,
        prefix=[tokenizer.piece_id(p) for p in layout.prefix],
        suffix=[tokenizer.piece_id(p) for p in layout.suffix],
        padding_id=layout.padding_id,
        combine=layout.combine,
        batch_pieces=contract.batch_pieces,
        leads=leads,
        separator=[tokenizer.piece_id(p) for p in layout.separator or ()],
    )
    offsets = plan.doc_offsets[starts]  # a Doc's sequences are consecutive rows
    layer_ids = contract.requested_layers()
    lm_weight = contract.lm_weight if is_train else 0.0
    lm = _lm_targets(sequences, plan.doc_offsets) if lm_weight > 0 else None
    if lm is not None:
        layer_ids = sorted(set(layer_ids) | {contract.n_layers - 1})  # the LM reads the top
    shim: EncoderShim = model.shims[0]
    # A training batch of more than two encoder calls' positions (e.g. one Doc of 50,000
    # pieces, which spaCy's word-counting batchers see as a few words) recomputes each
    # call's activations in the backward pass, so its memory stays that of one call.
    recompute = is_train and len(plan.chunks) > 1 and _positions(plan) > 2 * contract.batch_pieces
    if recompute:
        return_freed_memory()
    inputs = _torch_inputs(plan, layer_ids, shim.device, lm, recompute)
    inputs.kwargs["autocast"] = shim.use_precision(contract.precision, bf16_weights=True)
    if not is_train and contract.trim_memory:
        # Freed pages go back to the system after every chunk of a call of several: glibc
        # places a chunk's arrays anywhere in its heap, not where the previous chunk's were
        # freed, so the pages touched over a call added up. 1M streamed tokens
        # (bench/stream_memory.py --shuffle): peak RSS 758 / 811 MB against 1,020 / 1,036
        # (drop_outputs / kept), the 100k-token windows' peaks +2.7% / +2.9%; words/s
        # x0.91-0.96. Only between (not after) chunks lifted the peaks to 850 / 893 MB. A
        # call of one chunk (nlp(text) on a short text) is not trimmed: 5.6-6.5% per Doc.
        inputs.kwargs["after_chunk"] = trim_freed_memory
    shim.use_compile(contract.torch_compile)
    outputs, backprop_torch = shim(inputs, is_train)
    outputs = list(outputs)
    lm_loss = outputs.pop() if lm is not None else None
    alignments = [(p.token_lengths, p.token_pieces) for p in pieces]
    batch = EncodedBatch(split_outputs([torch2xp(t) for t in outputs], layer_ids, offsets, alignments,
                                       own=not is_train),
                         lm_loss=None if lm_loss is None else float(lm_loss.detach()))

    def backprop(d_encodings: List[Dict[int, object]]) -> List[Doc]:
        if plan.ids.shape[0] == 0:
            return docs  # no piece in the batch: nothing reached the encoder
        grads = join_gradients(model.ops, d_encodings, layer_ids, offsets, contract.width)
        grads_torch = [xp2torch(g, device=shim.device) for g in grads]
        tensors = list(outputs)
        if lm_loss is not None:
            tensors.append(lm_loss)
            grads_torch.append(lm_loss.new_tensor(lm_weight))
        backprop_torch(ArgsKwargs(args=(tuple(tensors),), kwargs={"grad_tensors": grads_torch}))
        return docs

    return batch, backprop


def _sequences(contract: EncoderContract, docs: List[Doc], pieces: List[DocPieces]
               ) -> Tuple[List[np.ndarray], np.ndarray, List[int]]:
    """The piece sequences to window, the index of each Doc's first one (plus the total),
    and each sequence's lead (segment A's pieces, 0 for none).

    A sentence pair (a Doc with a first segment) is one sequence with a lead where the
    family has a separator (BERT's [CLS] A [SEP] B [SEP]); where it has none (GPT), A and B
    are encoded as two sequences of their own, which is what a head that attends from one
    to the other (BiAttentionQA) reads.
    """
    sequences, starts, leads = [], [], []
    for doc, doc_pieces in zip(docs, pieces):
        starts.append(len(sequences))
        n_tokens = first_segment_end(doc)
        lead = int(doc_pieces.token_pieces[: int(doc_pieces.token_lengths[:n_tokens].sum())].max()) + 1 \
            if n_tokens else 0
        if lead and not contract.pairs:
            sequences += [doc_pieces.ids[:lead], doc_pieces.ids[lead:]]
            leads += [0, 0]
        else:
            sequences.append(doc_pieces.ids)
            leads.append(lead)
    starts.append(len(sequences))
    return sequences, np.asarray(starts, dtype=np.int64), leads


def _lm_targets(sequences: List[np.ndarray], offsets: np.ndarray) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """Output rows whose hidden state predicts a next piece of the same sequence, and that
    piece's id (a pair's two segments are two sequences when the family has no separator)."""
    rows, targets = [], []
    for k, ids in enumerate(sequences):
        if len(ids) > 1:
            rows.append(offsets[k] + np.arange(len(ids) - 1))
            targets.append(ids[1:])
    if not rows:
        return None
    return np.concatenate(rows).astype(np.int64), np.concatenate(targets).astype(np.int64)


def _positions(plan: WindowPlan) -> int:
    """Padded positions over all encoder calls of the plan."""
    return sum(len(windows) * length for windows, length in plan.chunks)


def _torch_inputs(plan: WindowPlan, layer_ids: List[int], device, lm=None, recompute: bool = False) -> ArgsKwargs:
    to_torch = lambda a: xp2torch(a, device=device)  # noqa: E731
    kwargs = {"recompute": recompute}
    if lm is not None:
        kwargs.update(lm_rows=to_torch(lm[0]), lm_targets=to_torch(lm[1]))
    if plan.type_ids.any():
        kwargs["type_ids"] = to_torch(plan.type_ids)
    return ArgsKwargs(
        args=(
            to_torch(plan.ids),
            to_torch(plan.mask),
            [(to_torch(windows), length) for windows, length in plan.chunks],
            to_torch(plan.source),
            to_torch(plan.target),
            to_torch(plan.weight),
            plan.n_out,
            layer_ids,
        ),
        kwargs=kwargs,
    )
