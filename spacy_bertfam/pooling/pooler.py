"""From an encoder's stored layer outputs to one vector per token: pool, then combine layers.

Combinations (when more than one layer is chosen):
- "scalar_mix": ELMo's task-specific γ · Σ_k softmax(s)_k · h_k (Peters et al. 2018,
  eq. 1), with s and γ learned per listener;
- "concat": BERT's feature-based concatenation (e.g. of the last four layers,
  Devlin et al. 2018, Table 7), width × k;
- "mean": the plain average.
"""
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

from thinc.api import Model
from thinc.types import Floats1d, Floats2d

from ..encoders.contract import DocEncoding, EncoderContract
from ..errors import ConfigError
from .pieces import check_pooling, pool_pieces, pooled_width

COMBINES = ("scalar_mix", "concat", "mean")


def build_pooler(
    *, width: int, pooling: Optional[str], layers: Sequence[int], combine: str
) -> Model[List[DocEncoding], List[Floats2d]]:
    """Pool and combine the chosen layers of `DocEncoding`s into token vectors.

    pooling: "mean" | "first" | "last" | "first_last" (twice the width), or None for the upstream family's default
        (set by `link_pooler` when the listener is linked to its encoder).
    layers: layer indices, Python style (-1 = top).
    """
    if pooling is not None:
        check_pooling(pooling)
    if combine not in COMBINES:
        raise ConfigError(f"Unknown combine '{combine}'; expected one of {COMBINES}")
    if not layers:
        raise ConfigError("A listener needs at least one layer (e.g. layers = [-1])")
    model = Model(
        "encoder_pooler",
        _forward,
        init=_init,
        dims={"nO": width},
        attrs={"pooling": pooling, "layers": list(layers), "combine": combine,
               "layer_ids": None, "resolved_pooling": pooling},
    )
    if combine == "scalar_mix" and len(layers) > 1:
        model.set_param("mix_weights", model.ops.alloc1f(len(layers)))
        model.set_param("gamma", model.ops.asarray1f([1.0]))
    return model


def link_pooler(pooler: Model, contract: EncoderContract, *, where: str) -> None:
    """Resolve layer indices and pooling against the upstream encoder; check the width."""
    layers = [contract.layer_index(i) for i in pooler.attrs["layers"]]
    pooling = pooler.attrs["pooling"] or contract.default_pooling
    expected = pooled_width(pooling, contract.width)
    if pooler.attrs["combine"] == "concat" and len(layers) > 1:
        expected *= len(layers)
    if pooler.get_dim("nO") != expected:
        raise ConfigError(
            f"{where}: width {pooler.get_dim('nO')} does not match the encoder's output: "
            f"{len(layers)} layer(s) of width {contract.width} with pooling '{pooling}' and combine "
            f"'{pooler.attrs['combine']}' give {expected}; set width = {expected}"
        )
    pooler.attrs["layer_ids"] = layers
    pooler.attrs["resolved_pooling"] = pooling


def pooler_layers(pooler: Model) -> List[int]:
    """The normalised layer indices the pooler reads (after `link_pooler`)."""
    layers = pooler.attrs["layer_ids"]
    if layers is None:
        raise ValueError("The listener is not linked to an encoder yet")
    return list(layers)


def pooler_input_width(pooler: Model) -> int:
    """Width of each layer the pooler reads."""
    return _layer_width(pooler) // pooled_width(pooler.attrs["resolved_pooling"], 1)


def _layer_width(pooler: Model) -> int:
    """Width of one pooled layer before layers are combined."""
    k = len(pooler.attrs["layers"])
    return pooler.get_dim("nO") // (k if pooler.attrs["combine"] == "concat" else 1)


def _init(model: Model, X=None, Y=None) -> None:
    if model.has_param("mix_weights"):
        model.set_param("mix_weights", model.ops.alloc1f(len(model.attrs["layers"])))
        model.set_param("gamma", model.ops.asarray1f([1.0]))


def _forward(model: Model, encodings: List[DocEncoding], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    ops = model.ops
    xp = ops.xp
    layers = pooler_layers(model)
    pooling = model.attrs["resolved_pooling"]
    # Batch every doc's pieces into one array per layer (token indices shifted).
    piece_counts = [enc.n_pieces for enc in encodings]
    token_counts = [len(enc.token_lengths) for enc in encodings]
    offsets = [sum(piece_counts[:i]) for i in range(len(piece_counts))]
    token_pieces = _concat1i(ops, [ops.asarray1i(e.token_pieces) + o for e, o in zip(encodings, offsets)])
    token_lengths = _concat1i(ops, [ops.asarray1i(e.token_lengths) for e in encodings])
    pool_backprops = []

    def pool_layers() -> Iterator[Floats2d]:  # one layer at a time, so _combine can consume it
        for layer in layers:
            pieces = _stack([_get_layer(enc, layer) for enc in encodings], ops, pooler_input_width(model))
            p, bp = pool_pieces(ops, pieces, token_pieces, token_lengths, pooling)
            pool_backprops.append(bp)
            yield p

    combined, backprop_combine = _combine(model, pool_layers(), len(layers))
    outputs = _split(combined, token_counts)

    def backprop(d_outputs: List[Floats2d]) -> List[dict]:
        d_combined = xp.concatenate(d_outputs) if d_outputs else ops.alloc2f(0, combined.shape[1])
        d_pooled = backprop_combine(d_combined)
        d_layers: dict = {}
        for layer, bp, d in zip(layers, pool_backprops, d_pooled):  # a layer listed twice gets both shares
            d_layer = bp(d)
            d_layers[layer] = d_layers[layer] + d_layer if layer in d_layers else d_layer
        return [
            {layer: d[off : off + n] for layer, d in d_layers.items()}
            for off, n in zip(offsets, piece_counts)
        ]

    return outputs, backprop


def _get_layer(enc: DocEncoding, layer: int) -> Floats2d:
    if layer not in enc.layers:
        raise ValueError(
            f"Layer {layer} was not stored by the encoder (stored: {sorted(enc.layers)}); "
            "was the listener linked to this encoder when the docs were processed?"
        )
    return enc.layers[layer]


def _concat1i(ops, arrays):
    return ops.xp.concatenate(arrays) if arrays else ops.alloc1i(0)


def _stack(arrays: List[Floats2d], ops, width: int) -> Floats2d:
    if not arrays:
        return ops.alloc2f(0, width)
    return ops.xp.concatenate(arrays) if len(arrays) > 1 else arrays[0]


def _split(X: Floats2d, counts: List[int]) -> List[Floats2d]:
    out, start = [], 0
    for n in counts:
        out.append(X[start : start + n])
        start += n
    return out


def _combine(model: Model, pooled: Iterator[Floats2d], k: int
             ) -> Tuple[Floats2d, Callable[[Floats2d], List[Floats2d]]]:
    """Combine k pooled layers; the backprop returns one gradient per layer.

    Concat and mean consume the layers one by one, so only the result and one pooled
    layer exist at a time (a batch's prediction memory is that of its output).
    """
    xp = model.ops.xp
    combine = model.attrs["combine"]
    if k == 1:
        return next(pooled), lambda d: [d]
    if combine == "concat":
        width = _layer_width(model)
        Y = None
        for i, p in enumerate(pooled):
            if Y is None:
                Y = model.ops.alloc2f(p.shape[0], k * width, zeros=False)
            Y[:, i * width : (i + 1) * width] = p
        return Y, lambda d: [d[:, i * width : (i + 1) * width] for i in range(k)]
    if combine == "mean":
        total = next(pooled)  # pool_pieces returns a new array: safe to add into
        for p in pooled:
            total += p
        total /= k
        return total, lambda d: [d / k] * k
    pooled = list(pooled)
    s: Floats1d = model.get_param("mix_weights")
    gamma = float(model.get_param("gamma")[0])
    e = xp.exp(s - s.max())
    w = e / e.sum()
    mixed = sum(float(w[i]) * pooled[i] for i in range(k))
    Y = gamma * mixed

    def backprop_mix(d: Floats2d) -> List[Floats2d]:
        # dL/dγ = <mixed, d>; g_k = γ <h_k, d>; dL/ds_k = w_k (g_k − Σ_j w_j g_j).
        g = xp.asarray([gamma * float((h * d).sum()) for h in pooled], dtype="f")
        model.inc_grad("gamma", xp.asarray([float((mixed * d).sum())], dtype="f"))
        model.inc_grad("mix_weights", w * (g - float((w * g).sum())))
        return [(gamma * float(w[i])) * d for i in range(k)]

    return Y, backprop_mix
