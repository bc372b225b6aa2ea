"""int8 inference: a copy of a module whose linear layers are dynamically quantized.

Dynamic quantization (weights int8 per output channel, activations quantized per batch
on the fly) needs no calibration data, so any encoder can run it; it is for prediction
on a CPU only. The fp32 module stays the one that trains and is saved.
"""
import copy
import warnings

import torch
from torch import nn
from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig, quantize_dynamic


def int8_copy(module: nn.Module, per_channel: bool = True) -> nn.Module:
    """An eval-mode copy of `module` with every nn.Linear quantized to int8 (fbgemm/x86).

    per_channel: one scale per output row rather than per matrix; it keeps the small
    rows of a matrix from losing their precision to its largest one.
    """
    qconfig = per_channel_dynamic_qconfig if per_channel else default_dynamic_qconfig
    with warnings.catch_warnings():
        # torch marks its quantized tensor types deprecated in favour of torchao; the
        # eager dynamic path is still the CPU one that needs no extra dependency.
        warnings.simplefilter("ignore", (DeprecationWarning, UserWarning, FutureWarning))
        quantized = quantize_dynamic(copy.deepcopy(module).eval(), {nn.Linear: qconfig}, dtype=torch.qint8)
    return quantized
