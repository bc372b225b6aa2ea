"""Multi-head self-attention shared by the BERT and GPT families."""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from .dropout import dropout
from .linear import Linear
from .packing import Packing


class KVCache:
    """Keys and values of the positions decoded so far, (B, nh, T, hs) each.

    They live in buffers with spare positions, doubled when full, so that a decoding step
    writes its own position instead of copying the whole past again (which `torch.cat`
    would, at every step of every block). A cache is extended in place: `extend` returns
    a cache over the same buffers, so branching from one cache (e.g. beam search) needs
    `clone()` first. With autograd recording, it concatenates instead of writing in place.
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, length: Optional[int] = None):
        """keys, values: buffers whose first `length` positions (default all) are filled."""
        self._keys, self._values = keys, values
        self.length = keys.shape[2] if length is None else length

    @property
    def keys(self) -> torch.Tensor:
        return self._keys[:, :, : self.length]

    @property
    def values(self) -> torch.Tensor:
        return self._values[:, :, : self.length]

    def clone(self) -> "KVCache":
        return KVCache(self.keys.clone(), self.values.clone())

    def extend(self, keys: torch.Tensor, values: torch.Tensor) -> "KVCache":
        """The cache with `keys` and `values` (B, nh, T_new, hs) appended after its positions."""
        if torch.is_grad_enabled() and (keys.requires_grad or self._keys.requires_grad):
            return KVCache(torch.cat([self.keys, keys], dim=2), torch.cat([self.values, values], dim=2))
        end = self.length + keys.shape[2]
        buffers = (self._keys, self._values)
        if end > self._keys.shape[2]:
            buffers = tuple(self._grown(buffer, max(end, 2 * self._keys.shape[2])) for buffer in buffers)
        for buffer, new in zip(buffers, (keys, values)):
            buffer[:, :, self.length: end] = new
        return KVCache(*buffers, length=end)

    def _grown(self, buffer: torch.Tensor, capacity: int) -> torch.Tensor:
        B, nh, _, hs = buffer.shape
        new = buffer.new_empty(B, nh, capacity, hs)
        new[:, :, : self.length] = buffer[:, :, : self.length]
        return new


class SelfAttention(nn.Module):
    """Multi-head scaled dot-product self-attention (Vaswani et al. 2017).

    Query, key and value keep separate projections because both BERT and GPT
    checkpoints can be mapped onto them without re-packing at load time.

    width (int): model width; must be divisible by `n_heads`.
    n_heads (int): number of attention heads.
    dropout (float): dropout on the attention probabilities.
    """

    def __init__(self, *, width: int, n_heads: int, dropout: float = 0.0):
        super().__init__()
        if width % n_heads != 0:
            raise ValueError(
                f"The width ({width}) must be divisible by the number of attention "
                f"heads ({n_heads})"
            )
        self.n_heads = n_heads
        self.dropout = dropout
        self.query = Linear(width, width)
        self.key = Linear(width, width)
        self.value = Linear(width, width)
        self.output = Linear(width, width)

    def forward(
        self,
        x: torch.Tensor,
        attend: Optional[torch.Tensor] = None,
        *,
        causal: bool = False,
        cache: Optional[KVCache] = None,
        packing: Optional[Packing] = None,
    ) -> Tuple[torch.Tensor, KVCache]:
        """Attend over `x` of shape (B, T, W), or (n, W) real positions of such a batch
        with `packing` (the output has the shape of `x`).

        attend: boolean (B, 1, T_q or 1, T_kv); True means the key may be attended to.
        causal: add the left-to-right constraint (combined with `attend`).
        cache: keys and values of earlier positions (B, nh, T_past, hs) for
            incremental decoding; the updated cache is returned.
        """
        B, T, W = x.shape if packing is None else (packing.batch, packing.length, x.shape[-1])
        hs = W // self.n_heads
        # (B, T, W) -> (B, nh, T, hs)
        q, k, v = (
            (proj(x) if packing is None else packing.pad(proj(x))).view(B, T, self.n_heads, hs).transpose(1, 2)
            for proj in (self.query, self.key, self.value)
        )
        cache = KVCache(k, v) if cache is None else cache.extend(k, v)
        k, v = cache.keys, cache.values
        mask = attend
        if causal:
            T_kv = k.shape[2]
            # Query i (absolute position T_kv - T + i) may see keys 0 .. its position.
            tri = torch.ones(T, T_kv, dtype=torch.bool, device=x.device).tril(T_kv - T)
            mask = tri if mask is None else mask & tri
        if self.training and self.dropout > 0.0 and x.device.type == "cpu":
            y = attend_with_dropout(q, k, v, mask, self.dropout)
        else:
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0
            )
        y = y.transpose(1, 2).reshape(B, T, W)
        return self.output(y if packing is None else packing.unpad(y)), cache


def attend_with_dropout(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attend: Optional[torch.Tensor], p: float
) -> torch.Tensor:
    """softmax(q·kᵀ/√d, masked) · v with dropout on the probabilities: what
    `F.scaled_dot_product_attention` computes on a CPU when it drops out (it has no fused
    kernel for that), with `layers.dropout`'s cheaper masks instead of `bernoulli_`.

    attend: boolean, broadcastable to (B, nh, T_q, T_kv); True means the key may be
    attended to. A fully masked row attends uniformly instead of giving NaN.
    """
    scores = torch.matmul(q * q.shape[-1] ** -0.5, k.transpose(-2, -1))
    if attend is not None:
        scores.add_(torch.zeros(attend.shape, dtype=scores.dtype, device=scores.device).masked_fill_(
            ~attend, torch.finfo(scores.dtype).min))
    probs = scores.softmax(-1, dtype=torch.promote_types(scores.dtype, torch.float32)).to(v.dtype)
    return torch.matmul(dropout(probs, p), v)
