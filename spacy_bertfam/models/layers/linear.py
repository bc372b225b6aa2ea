"""Linear layers that predict through oneDNN on a CPU, in a bounded set of shapes.

torch's `F.linear` multiplies float32 matrices on a CPU with its BLAS (MKL), bfloat16 ones
with oneDNN. On an AMD EPYC with AVX-512 (2 threads) MKL ran 149 GFLOP/s on 2,048² products
and oneDNN 197: MiniLM's projections over 4,096 rows ran 1.1-1.3× faster through oneDNN, a
single row (GPT decoding) 1.5-2.5×. oneDNN compiles a product per input shape and keeps it
(~0.56 MB and ~0.85 ms each here, up to about 1,024 shapes: a stream of batches with ever new
row counts grew a process by ~400 MB), so the rows are padded to a bounded set of counts
(`padded_rows`); a caller that can choose such counts itself (`Packing.of` with `rows_to`)
saves the copy. Under autograd, on a GPU, inside `torch.compile`, for other dtypes and with
torch's oneDNN switched off (`torch.backends.mkldnn.enabled = False`, e.g. on a CPU where the
BLAS is the faster): F.linear.
"""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

BLOCK = 4096  # the most rows of one product; more run in blocks
_ONEDNN = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
_DTYPES = (torch.float32, torch.bfloat16)


def padded_rows(n: int) -> int:
    """The rows a product over n <= BLOCK rows runs with: below 33 the next power of two, up
    to 2,048 the next multiple of 64, above it of 128 (54 counts in all)."""
    if n <= 32:
        return 1 << max(n - 1, 0).bit_length()
    step = 64 if n <= 2048 else 128
    return -(-n // step) * step


def products_through_onednn(device: torch.device) -> bool:
    """Whether `linear` multiplies float32 and bfloat16 rows on `device` through oneDNN now: on a
    CPU, without autograd, outside `torch.compile`, with torch's oneDNN switched on."""
    return (_ONEDNN and device.type == "cpu" and torch.backends.mkldnn.enabled and not torch.is_grad_enabled()
            and not torch.compiler.is_compiling())


def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """`F.linear(x, weight, bias)`, through oneDNN in padded row counts where that applies
    (see the module docstring)."""
    if not products_through_onednn(x.device) or x.dtype not in _DTYPES or weight.dtype != x.dtype:
        return F.linear(x, weight, bias)
    rows = x.reshape(-1, x.shape[-1])
    n = rows.shape[0]
    if n == 0:
        return F.linear(x, weight, bias)
    parts = [_padded_product(rows[start : start + BLOCK], weight, bias) for start in range(0, n, BLOCK)]
    out = parts[0] if len(parts) == 1 else torch.cat(parts)
    return out.view(*x.shape[:-1], weight.shape[0])


def _padded_product(rows: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
    n = rows.shape[0]
    size = padded_rows(n)
    if size != n or not rows.is_contiguous():
        padded = rows.new_empty((size, rows.shape[1]))
        padded[:n] = rows
        padded[n:].zero_()
        rows = padded
    return torch.ops.mkldnn._linear_pointwise(rows, weight, bias, "none", [], "")[:n]


class Linear(nn.Linear):
    """`nn.Linear` whose prediction on a CPU goes through `linear` (same parameters and
    state dict keys)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)
