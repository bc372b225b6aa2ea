"""int8 inference: a copy of a module whose linear layers are dynamically quantized.

Dynamic quantization (int8 weights per output row, activations quantized per batch on
the fly) needs no calibration data, so any encoder can run it; it is for prediction on
a CPU only. The fp32 module stays the one that trains and is saved.
"""
import copy
import warnings
from typing import Sequence

import torch
from torch import nn
from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

# The feed-forward output projection (`layers.feedforward.FeedForward.down`) reads GELU
# outputs, whose long tail one per-batch activation scale cannot hold: with it in int8,
# the shipped Banking77 pipeline lost 1.1 points of accuracy; kept in fp32, none.
KEEP_FP32 = ("down",)


def int8_copy(module: nn.Module, keep_fp32: Sequence[str] = KEEP_FP32) -> nn.Module:
    """An eval-mode copy of `module` with its nn.Linear layers quantized to int8, except
    those whose attribute name is in `keep_fp32`."""
    names = {name for name, sub in module.named_modules()
             if isinstance(sub, nn.Linear) and name.rsplit(".", 1)[-1] not in keep_fp32}
    with warnings.catch_warnings():
        # torch marks its quantized tensor types deprecated in favour of torchao; the
        # eager dynamic path is still the CPU one that needs no extra dependency.
        warnings.simplefilter("ignore", (DeprecationWarning, UserWarning, FutureWarning))
        return quantize_dynamic(copy.deepcopy(module).eval(), {n: per_channel_dynamic_qconfig for n in names},
                                dtype=torch.qint8)
