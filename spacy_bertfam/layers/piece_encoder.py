"""The thinc Model that turns Docs into piece-level layer outputs of a torch encoder.

Tokenization, alignment and windowing live inside this Model (not on the pipeline
component), so a copy of the Model, such as the one `nlp.replace_listeners` makes,
works on its own. The piece tokenizer is a model attribute, serialised with it.

Sentence pairs: a Doc whose `doc.spans[FIRST_SEGMENT]` holds one span starting at its
first token is encoded as a pair, that span being segment A (e.g. a question) and the
rest B (its context), for families that have a separator (BERT: [CLS] A [SEP] B [SEP]).
"""
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from spacy.tokens import Doc
from thinc.api import ArgsKwargs, Model, PyTorchShim, torch2xp, xp2torch
from thinc.model import deserialize_attr, serialize_attr
from torch import nn

from ..models.windowed import WindowedEncoder
from ..tokenization import PieceTokenizer
from ..tokenization.alignment import DocPieces, align_tokens
from ..tokenization.windows import WindowPlan, plan_windows
from ..types import DocEncoding

FIRST_SEGMENT = "first_segment"


@serialize_attr.register(PieceTokenizer)
def _serialize_tokenizer(_: PieceTokenizer, value: PieceTokenizer, name: str, model: Model) -> bytes:
    return value.to_json().encode("utf8")


@deserialize_attr.register(PieceTokenizer)
def _deserialize_tokenizer(_: PieceTokenizer, value: bytes, name: str, model: Model) -> PieceTokenizer:
    return PieceTokenizer.from_json(value.decode("utf8"))


def build_piece_encoder(
    encoder: nn.Module,
    *,
    family: str,
    n_layers: int,
    width: int,
    window: int,
    stride: int,
    combine: str,
    prefix: Sequence[str],
    suffix: Sequence[str],
    unknown: str,
    padding_id: int,
    default_pooling: str,
    batch_pieces: int,
    words: str = "text",
    separator: Optional[Sequence[str]] = None,
) -> Model[List[Doc], List[DocEncoding]]:
    """Wrap a torch encoder (called as `encoder(ids, mask)` -> EncoderOutput).

    family: checkpoint family the encoder accepts ("bert", "gpt").
    n_layers: number of layer outputs (embedding output included).
    window, stride, combine: see `tokenization.windows`.
    prefix, suffix: special pieces around every window (e.g. ["[CLS]"], ["[SEP]"]).
    separator: pieces between a sentence pair's segments (["[SEP]"]); None: the
        family does not encode pairs.
    unknown: the piece used for a doc whose tokens yield no piece.
    default_pooling: how listeners pool a token's pieces unless told otherwise.
    batch_pieces: padded positions per encoder call (see `tokenization.windows`).
    words: what the tokenizer sees of each spaCy token: "text", or "space_before"
        (the whitespace before the token, then its text, so that byte-level BPE sees
        " world" as GPT-2 does in running text).

    Training with `attrs["lm_weight"] > 0` (causal families) also computes the mean
    next-piece cross-entropy of the batch, backpropagated with that weight; its
    value is left in `attrs["lm_loss"]` for the component to take.
    """
    n_positions = getattr(encoder.config, "n_positions", window)
    if window > n_positions:
        raise ValueError(
            f"window {window} exceeds the {n_positions} positions of this model; "
            f"set window <= {n_positions}"
        )
    # Checked now rather than at the first batch, so a bad config fails early.
    plan_windows([], window=window, stride=stride, prefix=[0] * len(prefix),
                 suffix=[0] * len(suffix), padding_id=padding_id, combine=combine)
    return Model(
        f"{family}_piece_encoder",
        _forward,
        shims=[PyTorchShim(WindowedEncoder(encoder))],
        dims={"nO": width},
        attrs={
            "family": family,
            "tokenizer": PieceTokenizer(),
            "source": "",
            "n_layers": n_layers,
            "layers": None,
            "window": window,
            "stride": stride,
            "combine": combine,
            "prefix": list(prefix),
            "suffix": list(suffix),
            "separator": None if separator is None else list(separator),
            "unknown": unknown,
            "padding_id": padding_id,
            "default_pooling": default_pooling,
            "batch_pieces": batch_pieces,
            "words": words,
            "lm_weight": 0.0,
            "lm_loss": None,
        },
    )


def torch_encoder(model: Model) -> nn.Module:
    """The wrapped torch encoder (e.g. `BertEncoder`) of a piece-encoder Model."""
    return model.shims[0]._model.encoder


def requested_layers(model: Model) -> List[int]:
    """Layer indices (normalised to 0..n_layers-1) the model computes outputs for."""
    n = model.attrs["n_layers"]
    wanted = model.attrs["layers"]
    return list(range(n)) if wanted is None else sorted({normalise_layer(i, n) for i in wanted})


def normalise_layer(index: int, n_layers: int) -> int:
    """Python-style layer index (-1 = top) -> 0..n_layers-1; IndexError names the range."""
    if not -n_layers <= index < n_layers:
        raise IndexError(
            f"Layer {index} does not exist: this encoder has {n_layers} layer outputs "
            f"(0 = embeddings .. {n_layers - 1}, or -1 .. -{n_layers})"
        )
    return index % n_layers


def _forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[DocEncoding], Callable]:
    tokenizer: PieceTokenizer = model.attrs["tokenizer"]
    if not tokenizer.is_loaded:
        raise ValueError(
            f"The {model.attrs['family']} encoder was never initialised: load weights with "
            "an encoder_loader under [initialize.components.<name>] (for example "
            "spacy-bertfam.CheckpointLoader.v1), or ask for random initialisation there"
        )
    pieces = align_tokens(
        tokenizer, [token_words(doc, model.attrs["words"]) for doc in docs],
        unk_id=tokenizer.piece_id(model.attrs["unknown"]),
    )
    plan = plan_windows(
        [p.ids for p in pieces],
        window=model.attrs["window"],
        stride=model.attrs["stride"],
        prefix=[tokenizer.piece_id(p) for p in model.attrs["prefix"]],
        suffix=[tokenizer.piece_id(p) for p in model.attrs["suffix"]],
        padding_id=model.attrs["padding_id"],
        combine=model.attrs["combine"],
        batch_pieces=model.attrs["batch_pieces"],
        leads=_first_segments(model, docs, pieces),
        separator=[tokenizer.piece_id(p) for p in model.attrs.get("separator") or []],
    )
    layer_ids = requested_layers(model)
    lm_weight = model.attrs["lm_weight"] if is_train else 0.0
    lm = _lm_targets(pieces, plan) if lm_weight > 0 else None
    if lm is not None:
        layer_ids = sorted(set(layer_ids) | {model.attrs["n_layers"] - 1})  # the LM reads the top
    shim: PyTorchShim = model.shims[0]
    inputs = _torch_inputs(plan, layer_ids, shim.device, lm)
    outputs, backprop_torch = shim(inputs, is_train)
    outputs = list(outputs)
    lm_loss = outputs.pop() if lm is not None else None
    model.attrs["lm_loss"] = float(lm_loss.detach()) if lm_loss is not None else None
    arrays = [torch2xp(t) for t in outputs]
    encodings = _split(arrays, layer_ids, plan, pieces)

    def backprop(d_encodings: List[Dict[int, Any]]) -> List[Doc]:
        if plan.ids.shape[0] == 0:
            return docs  # no piece in the batch: nothing reached the encoder
        grads = []
        for out, layer in zip(outputs, layer_ids):
            parts = [d.get(layer) for d in d_encodings]
            grads.append(_concat_grads(model, parts, plan, out.shape[-1]))
        grads_torch = [xp2torch(g, device=shim.device) for g in grads]
        tensors = list(outputs)
        if lm_loss is not None:
            tensors.append(lm_loss)
            grads_torch.append(lm_loss.new_tensor(lm_weight))
        backprop_torch(ArgsKwargs(args=(tuple(tensors),), kwargs={"grad_tensors": grads_torch}))
        return docs

    return encodings, backprop


def token_words(doc: Doc, mode: str) -> List[str]:
    """What the tokenizer sees of each token: "text", or "space_before" (see build_piece_encoder)."""
    if mode == "text":
        return [t.text for t in doc]
    # The whitespace before each token is the previous token's trailing whitespace.
    return [(doc[t.i - 1].whitespace_ if t.i else "") + t.text for t in doc]


def _first_segments(model: Model, docs: List[Doc], pieces: List[DocPieces]) -> List[int]:
    """Pieces in each doc's segment A (0 for a doc that is not a pair)."""
    leads = []
    for doc, doc_pieces in zip(docs, pieces):
        group = doc.spans.get(FIRST_SEGMENT) if doc.spans else None
        if not group:
            leads.append(0)
            continue
        if model.attrs.get("separator") is None:
            raise ValueError(f"{model.attrs['family']} encoders do not encode sentence pairs, but a Doc has "
                             f"doc.spans['{FIRST_SEGMENT}']")
        if len(group) != 1 or group[0].start != 0 or group[0].end >= len(doc):
            raise ValueError(
                f"doc.spans['{FIRST_SEGMENT}'] must hold one span that starts at the first token and "
                f"leaves tokens after it (the second segment); got {[(s.start, s.end) for s in group]} "
                f"in a Doc of {len(doc)} tokens"
            )
        n_token_pieces = int(doc_pieces.token_lengths[: group[0].end].sum())
        leads.append(int(doc_pieces.token_pieces[:n_token_pieces].max()) + 1)
    return leads


def _lm_targets(pieces: List[DocPieces], plan: WindowPlan) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """Output rows whose hidden state predicts a next piece, and that piece's id."""
    rows, targets = [], []
    for d, doc_pieces in enumerate(pieces):
        n = doc_pieces.n_pieces
        if n > 1:
            rows.append(plan.doc_offsets[d] + np.arange(n - 1))
            targets.append(doc_pieces.ids[1:])
    if not rows:
        return None
    return np.concatenate(rows).astype(np.int64), np.concatenate(targets).astype(np.int64)


def _torch_inputs(plan: WindowPlan, layer_ids: List[int], device, lm=None) -> ArgsKwargs:
    to_torch = lambda a: xp2torch(a, device=device)  # noqa: E731
    kwargs = {} if lm is None else {"lm_rows": to_torch(lm[0]), "lm_targets": to_torch(lm[1])}
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


def _split(arrays, layer_ids: List[int], plan: WindowPlan, pieces: List[DocPieces]) -> List[DocEncoding]:
    out = []
    for d, doc_pieces in enumerate(pieces):
        start, end = int(plan.doc_offsets[d]), int(plan.doc_offsets[d + 1])
        out.append(
            DocEncoding(
                layers={layer: arr[start:end] for layer, arr in zip(layer_ids, arrays)},
                token_lengths=doc_pieces.token_lengths,
                token_pieces=doc_pieces.token_pieces,
            )
        )
    return out


def _concat_grads(model: Model, parts: List[Optional[Any]], plan: WindowPlan, width: int):
    """One (n_out, width) gradient from per-doc gradients; missing ones count as zero."""
    grad = model.ops.alloc2f(plan.n_out, width)
    for d, part in enumerate(parts):
        if part is not None:
            grad[int(plan.doc_offsets[d]) : int(plan.doc_offsets[d + 1])] += part
    return grad
