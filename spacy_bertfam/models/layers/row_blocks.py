"""Linear layers that multiply in row blocks of a few fixed sizes, for bfloat16 prediction.

torch multiplies bfloat16 matrices on a CPU through oneDNN, and keeps a compiled product per
input shape: ~0.56 MB each here, up to about 1,024 shapes (with oneDNN's primitive cache
off, still ~0.24 MB: not only that cache). A stream of batches with ever new numbers of
positions grew a process by ~400 MB (the shipped NER pipeline with precision "bf16", 1M
tokens: glibc's blocks in use 521 -> 913 MB). Run in blocks of `BLOCK` rows and the rest
padded to a multiple of `STEP` (a few rows to a power of two), a layer's products come in at
most 39 shapes, whatever the batch.
"""
import torch
import torch.nn.functional as F
from torch import nn

BLOCK = 2048
STEP = 64


def padded_rows(n: int) -> int:
    """The rows a product over n <= BLOCK rows runs with: n rounded up to a multiple of STEP,
    or below STEP to a power of two."""
    return -(-n // STEP) * STEP if n > STEP // 2 else 1 << max(n - 1, 0).bit_length()


class RowBlockedLinear(nn.Linear):
    """`nn.Linear` whose products run in the bounded set of shapes above: blocks of BLOCK
    rows, the rest padded with zero rows (the same values: every row goes through the same
    kernel)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        n = rows.shape[0]
        full = n - n % BLOCK
        if full == n:
            if n == BLOCK or n == 0:
                return F.linear(x, self.weight, self.bias)
            out = rows.new_empty((n, self.out_features))
        else:
            padded = rows.new_zeros((full + padded_rows(n - full), rows.shape[1]))
            padded[:n] = rows
            rows = padded
            out = rows.new_empty((rows.shape[0], self.out_features))
        for start in range(0, full, BLOCK):
            torch.addmm(self.bias, rows[start : start + BLOCK], self.weight.t(), out=out[start : start + BLOCK])
        if full < rows.shape[0]:
            torch.addmm(self.bias, rows[full:], self.weight.t(), out=out[full:])
        return out[:n].view(*x.shape[:-1], self.out_features)


def block_rows(module: nn.Module) -> nn.Module:
    """`module`, its `nn.Linear` layers turned into `RowBlockedLinear` in place (same
    parameters: only the class changes)."""
    for layer in module.modules():
        if type(layer) is nn.Linear:
            layer.__class__ = RowBlockedLinear
    return module
