"""int8 inference: a copy of a module whose linear layers multiply in int8.

Weights are quantized once per output row; activations per row (per token) at each call,
over the row's own [min, max] (layer-normed rows are lopsided: against a symmetric scale
this cut the encoder's error from 4.3% to 2.7%). A few input channels of each layer carry
outliers in every token (MiniLM: channel 99 reaches 28 where most channels stay within 2),
and a row's range is then set by them: those channels stay in fp32 (`OUTLIER_CHANNELS`
of them, found by `int8_copy`'s calibration pass on fixed random pieces, so every process
finds the same ones), which took the error of MiniLM's last four layers on 300 WNUT-17
tweets from 3.1% to 1.7%, and raised the entities two trained WNUT-17 NER pipelines share
with fp32 from 98.4% / 98.7% to 99.0% / 99.2%. The other channels still differ in scale
(MiniLM, in the calibration pass: largest |values| from 0.15 to 3.1, up to 12-fold within a
layer): each is divided by a smoothing factor before quantizing and its weight column
multiplied by it (SmoothQuant, Xiao et al. 2023), from the same pass, which raised the
entities four trained pipelines share with fp32 from 98.3-99.6% to 99.2-99.7%. No user data
is needed, and a token's output depends on that token alone (up to the last bits of fp32
products, as in fp32). torch's
`quantize_dynamic` (fbgemm), used before, is faster but takes one 7-bit activation scale per
batch: a doc's entities changed with its batch mates, and only 91-94% of the entities of
trained NER pipelines matched fp32. The products run in `torch._int_mm`; torchao's per-token int8 ran slower
than fp32 in eager mode on a CPU here. The fp32 module stays the one that trains and is saved.

One layer per block stays out of int8 (`KEEP`): it multiplies in `int8_copy`'s `kept_dtype`,
float32 or, where the CPU has bfloat16 instructions, bfloat16 (`CastLinear`).
"""
import copy
from typing import Callable, Dict, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import nn

from .layers.linear import linear as linear_product

# The feed-forward output projection (`layers.feedforward.FeedForward.down`) reads GELU
# outputs, whose long tail int8 holds worst: with it in int8 as well, four trained WNUT-17
# NER pipelines shared 97.1-99.0% of their entities with fp32; kept in fp32, 98.8-99.1%
# (with the outlier channels and smoothing below, two pipelines: 98.5% / 98.3% against
# 99.0% / 99.0%). In bfloat16 it holds them as well as in fp32 (99.2% / 99.2%) at twice the
# speed on a CPU with bf16 products: int8 pipeline on tweets x1.13, prose x1.06
# (bench/results/int8_agreement.md).
KEEP = ("down",)


# Linear layers of one parent that read the same input (attention's query, key and value):
# they share one `RowQuantizer`, so that input is quantized once, not three times.
SHARED_INPUT = ("query", "key", "value")

# Input channels per layer kept in fp32: those whose largest |value| in the calibration pass
# is highest (the error of MiniLM's top four layers: 0 channels 3.07%, 4 1.79%, 8 1.68%).
OUTLIER_CHANNELS = 8

# SmoothQuant's migration strength α: each layer's input channel j is divided by
# s_j = max|x_j|^α / max|W_j|^(1-α) (largest |value| in the calibration pass, and in the weight
# column) before quantizing, and its weight column multiplied by it, which moves part of the
# channels' spread in scale from the activations (quantized per token) to the weights (per
# output row). doc.tensor of 300 WNUT-17 tweets against fp32: α 0 1.25%, 0.3 1.21%, 0.5 1.20%,
# 0.7 1.30%; entities shared with fp32 by four trained NER pipelines: 98.3-99.6% at 0,
# 99.2-99.7% at 0.5 (bench/results/int8_agreement.md).
SMOOTHING = 0.5


class QuantizedRows(NamedTuple):
    """Rows x ≈ step·values + zero, values in [-128, 127] (zero = min + 128·step), but for
    the outlier channels, kept in fp32. `factors` is [zero, 1, outlier values] per row: what
    `Int8Linear.correction` multiplies."""

    values: torch.Tensor
    step: torch.Tensor
    factors: torch.Tensor


class RowQuantizer:
    """Quantizes each row over its own [min, max], the `outliers` channels left out (kept in
    fp32) and the others divided by their `smoothing` factors. Shared by `readers` linear
    layers, it keeps a quantized input until each of them has read it (or another input comes)."""

    def __init__(self, readers: int = 1, outliers: Optional[torch.Tensor] = None,
                 smoothing: Optional[torch.Tensor] = None):
        if outliers is not None and smoothing is None:
            raise ValueError("RowQuantizer: outlier channels need smoothing factors (ones for none)")
        self.readers = readers
        self.outliers = outliers
        self.smoothing = smoothing
        # What each channel is multiplied by before quantizing, in one pass over the rows:
        # 1/smoothing, and 0 for the outliers (their weights are 0 in the int8 product; rows
        # of normed activations straddle 0, so this leaves the range to the other channels).
        self.multiplier = None if smoothing is None else smoothing.reciprocal()
        if outliers is not None:
            self.multiplier[outliers] = 0.0
        self._last: Optional[Tuple[torch.Tensor, int, QuantizedRows, int]] = None

    def __call__(self, x: torch.Tensor) -> QuantizedRows:
        if self._last is not None and self._last[0] is x and self._last[1] == x._version:
            quantized, unread = self._last[2], self._last[3]
        else:
            quantized, unread = _quantize_rows(x, self.outliers, self.multiplier), self.readers
        self._last = (x, x._version, quantized, unread - 1) if unread > 1 else None
        return quantized


def _quantize_rows(x: torch.Tensor, outliers: Optional[torch.Tensor] = None,
                   multiplier: Optional[torch.Tensor] = None) -> QuantizedRows:
    rows = x.reshape(-1, x.shape[-1]).float()
    kept = None if outliers is None else rows.index_select(1, outliers)
    rows = rows * multiplier if multiplier is not None else rows.clone()  # a copy to work in below
    low, high = torch.aminmax(rows, dim=-1, keepdim=True)
    # 254.5 steps, not 255: values then end at 126.5, which float error cannot round past 127.
    step = (high - low).clamp_min_(1e-12).div_(254.5)
    # (x - min) / step is exact enough however far the row lies from 0; x - z would not be.
    values = rows.sub_(low).div_(step).sub_(128).round_().to(torch.int8)
    zero = low.add_(step, alpha=128)
    factors = [zero, torch.ones_like(zero)] + ([] if kept is None else [kept])
    return QuantizedRows(values, step, torch.cat(factors, dim=1))


class CastLinear(nn.Module):
    """A linear layer for prediction that multiplies in `dtype` (its weights stored so) and
    returns float32, as `Int8Linear` does: what `int8_copy` makes of a kept layer."""

    def __init__(self, linear: nn.Linear, dtype: torch.dtype):
        super().__init__()
        self.register_buffer("weight", linear.weight.detach().to(dtype).clone())
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().to(dtype).clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear_product(x.to(self.weight.dtype), self.weight, self.bias).float()


class Int8Linear(nn.Module):
    """`nn.Linear` for prediction with int8 weights (a scale per output row) and int8
    activations (a scale and offset per row of the input), accumulated in int32.

    A row x is stored as x ≈ s·q + z with q in [-128, 127], so x·Wᵀ ≈ s·(q·Wqᵀ)·w + z·Σ_k(Wq)·w
    (w: the weights' scales): the offset's share is an outer product with the weights' row sums.
    With the quantizer's smoothing factors σ, x/σ is quantized against weights whose columns
    are multiplied by σ: the same product. The quantizer's outlier channels are 0 in the int8
    weights and multiply their own fp32 columns. The offsets, the outliers and the bias are added by one small product,
    [z, 1, x_outliers] · `correction`, so the output is read and written once for all three.
    """

    def __init__(self, linear: nn.Linear, quantizer: Optional[RowQuantizer] = None):
        super().__init__()
        self.quantizer = quantizer or RowQuantizer()
        original = linear.weight.detach().float()
        smoothing, outliers = self.quantizer.smoothing, self.quantizer.outliers
        weight = original if smoothing is None else original * smoothing
        outlier_weight = None if outliers is None else original[:, outliers].t()
        if outliers is not None:
            weight = weight.index_fill(1, outliers, 0.0)
        scale = weight.abs().amax(dim=1).clamp_min(1e-12) / 127
        quantized = torch.round(weight / scale[:, None])
        self.out_features = weight.shape[0]
        # Stored as (out, in) and read transposed: `_int_mm` takes it as (in, out).
        self.register_buffer("weight", quantized.to(torch.int8))
        self.register_buffer("scale", scale)
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().float().clone())
        bias = torch.zeros(self.out_features) if self.bias is None else self.bias
        rows = [quantized.sum(dim=1) * scale, bias] + ([] if outlier_weight is None else [outlier_weight])
        self.register_buffer("correction", torch.cat([r.reshape(-1, self.out_features) for r in rows]))  # · factors

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = self.quantizer(x)
        out = torch._int_mm(rows.values, self.weight.t()).to(torch.float32)
        out.mul_(rows.step).mul_(self.scale).addmm_(rows.factors, self.correction)
        return out.reshape(*x.shape[:-1], self.out_features)


def int8_copy(module: nn.Module, keep: Sequence[str] = KEEP, kept_dtype: torch.dtype = torch.float32,
              calibrate: Optional[Callable[[nn.Module], object]] = None) -> nn.Module:
    """An eval-mode copy of `module` with its nn.Linear layers replaced by `Int8Linear`,
    except those whose attribute name is in `keep`, which multiply in `kept_dtype` (a
    `CastLinear` unless that is float32). `calibrate(module)` runs `module`
    on inputs the caller chooses: each quantized layer's `OUTLIER_CHANNELS` input channels of
    largest |value| in that pass stay in fp32, and the others get smoothing factors from it
    (without it, neither)."""
    ranges = _input_ranges(module, keep, calibrate) if calibrate is not None else {}
    quantized = copy.deepcopy(module)
    for path, parent in list(quantized.named_modules()):
        if kept_dtype != torch.float32:
            for name, child in list(parent.named_children()):
                if isinstance(child, nn.Linear) and name in keep:
                    setattr(parent, name, CastLinear(child, kept_dtype))
        linears = {name: child for name, child in parent.named_children()
                   if isinstance(child, nn.Linear) and name not in keep}
        shared = [name for name in linears if name in SHARED_INPUT]
        groups = [[name] for name in linears if len(shared) < 2 or name not in shared]
        for group in groups + ([shared] if len(shared) > 1 else []):
            largest = ranges.get(f"{path}.{group[0]}" if path else group[0])
            quantizer = RowQuantizer(len(group), *_outliers_and_smoothing(largest, [linears[n] for n in group]))
            for name in group:
                setattr(parent, name, Int8Linear(linears[name], quantizer))
    return quantized.eval()


def _outliers_and_smoothing(largest: Optional[torch.Tensor], linears: Sequence[nn.Linear]
                            ) -> Tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
    """The outlier channels and smoothing factors of linear layers that read one input whose
    channels' largest |value| in the calibration pass is `largest` (None: not calibrated)."""
    if largest is None:
        return None, None
    # A layer of few inputs keeps none: there 8 channels would be a large share of the product.
    enough = largest.numel() >= 8 * OUTLIER_CHANNELS
    outliers = largest.topk(OUTLIER_CHANNELS).indices.sort().values if enough else None
    if not SMOOTHING:
        return outliers, torch.ones_like(largest)
    weight = torch.stack([linear.weight.detach().float().abs().amax(0) for linear in linears]).amax(0)
    return outliers, largest.clamp_min(1e-5).pow(SMOOTHING) / weight.clamp_min(1e-5).pow(1 - SMOOTHING)


def _input_ranges(module: nn.Module, keep: Sequence[str],
                  calibrate: Callable[[nn.Module], object]) -> Dict[str, torch.Tensor]:
    """The largest |value| of each input channel of each linear layer to quantize, by its path,
    while `calibrate(module)` runs (in eval mode, without gradients)."""
    largest: Dict[str, torch.Tensor] = {}

    def record(path: str):
        def hook(_, inputs):
            x = inputs[0].detach().reshape(-1, inputs[0].shape[-1]).abs().amax(0).float()
            largest[path] = x if path not in largest else torch.maximum(largest[path], x)
        return hook

    hooks = [child.register_forward_pre_hook(record(path)) for path, child in module.named_modules()
             if isinstance(child, nn.Linear) and path.rsplit(".", 1)[-1] not in keep]
    training = module.training
    try:
        module.eval()
        with torch.no_grad():
            calibrate(module)
    finally:
        module.train(training)
        for hook in hooks:
            hook.remove()
    return largest
