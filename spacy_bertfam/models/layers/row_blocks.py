"""Linear layers that multiply in row blocks of a few fixed sizes, for bfloat16 prediction.

torch multiplies bfloat16 matrices on a CPU through oneDNN, and keeps a compiled product per
input shape: ~0.56 MB each here, up to about 1,024 shapes (with oneDNN's primitive cache
off, still ~0.24 MB: not only that cache). A stream of batches with ever new numbers of
positions grew a process by ~400 MB (the shipped NER pipeline with precision "bf16", 1M
tokens: glibc's blocks in use 521 -> 913 MB). Run in blocks of `BLOCK` rows, a multiple of
`STEP` and fewer than `STEP` padded to a power of two, a layer's products come in at most 40
shapes, whatever the batch.
"""
import torch
import torch.nn.functional as F
from torch import nn

BLOCK = 2048
STEP = 64


def _parts(n: int):
    """(start, rows, padded rows) of the products over n rows: blocks of BLOCK, then the
    largest multiple of STEP left, then the rest (< STEP) padded to a power of two."""
    full, rest = n - n % BLOCK, n % BLOCK
    parts = [(start, BLOCK, BLOCK) for start in range(0, full, BLOCK)]
    if rest >= STEP:
        parts.append((full, rest - rest % STEP, rest - rest % STEP))
    if rest % STEP:
        parts.append((n - rest % STEP, rest % STEP, 1 << (rest % STEP - 1).bit_length()))
    return parts


class RowBlockedLinear(nn.Linear):
    """`nn.Linear` whose products run in the bounded set of shapes above (the same values:
    every row goes through the same kernel)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        parts = _parts(rows.shape[0])
        if len(parts) == 1 and parts[0][1] == parts[0][2]:
            return F.linear(x, self.weight, self.bias)
        out = rows.new_empty((rows.shape[0], self.out_features))
        for start, n, padded in parts:
            if n == padded:
                torch.addmm(self.bias, rows[start : start + n], self.weight.t(), out=out[start : start + n])
            else:
                block = rows.new_zeros((padded, rows.shape[1]))
                block[:n] = rows[start : start + n]
                out[start : start + n] = F.linear(block, self.weight, self.bias)[:n]
        return out.view(*x.shape[:-1], self.out_features)


def block_rows(module: nn.Module) -> nn.Module:
    """`module`, its `nn.Linear` layers turned into `RowBlockedLinear` in place (same
    parameters: only the class changes)."""
    for layer in module.modules():
        if type(layer) is nn.Linear:
            layer.__class__ = RowBlockedLinear
    return module
