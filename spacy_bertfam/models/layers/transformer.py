"""One transformer block covering post-LN (BERT, GPT-1) and pre-LN (GPT-2) layouts."""
from typing import Optional, Tuple

import torch
from torch import nn

from .attention import KVCache, SelfAttention
from .dropout import Dropout
from .feedforward import FeedForward
from .packing import Packing


class TransformerBlock(nn.Module):
    """Self-attention and feed-forward sublayers with residual connections.

    With `pre_norm=False` (BERT, GPT-1) each sublayer is `norm(x + dropout(f(x)))`;
    with `pre_norm=True` (GPT-2) it is `x + dropout(f(norm(x)))`. The norm modules
    keep the same names either way, so checkpoints of both layouts map onto them.

    width (int), n_heads (int), inner_width (int), activation (str): see the sublayers.
    dropout (float): dropout on each sublayer's output.
    attention_dropout (float): dropout on attention probabilities.
    layer_norm_eps (float): epsilon of both layer norms.
    pre_norm (bool): True puts the norms before the sublayers.
    """

    def __init__(
        self,
        *,
        width: int,
        n_heads: int,
        inner_width: int,
        activation: str,
        dropout: float,
        attention_dropout: float,
        layer_norm_eps: float,
        pre_norm: bool = False,
    ):
        super().__init__()
        self.pre_norm = pre_norm
        self.attention = SelfAttention(
            width=width, n_heads=n_heads, dropout=attention_dropout
        )
        self.attention_norm = nn.LayerNorm(width, eps=layer_norm_eps)
        self.ffn = FeedForward(width=width, inner_width=inner_width, activation=activation)
        self.ffn_norm = nn.LayerNorm(width, eps=layer_norm_eps)
        self.dropout = Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        attend: Optional[torch.Tensor] = None,
        *,
        causal: bool = False,
        cache: Optional[KVCache] = None,
        packing: Optional[Packing] = None,
    ) -> Tuple[torch.Tensor, KVCache]:
        """x: (B, T, width) -> (B, T, width), plus the attention's key/value cache; with
        `packing`, x and the output are (n, width), the batch's real positions."""
        if self.pre_norm:
            a, cache = self.attention(self.attention_norm(x), attend, causal=causal, cache=cache, packing=packing)
            x = x + self.dropout(a)
            return x + self.dropout(self.ffn(self.ffn_norm(x))), cache
        a, cache = self.attention(x, attend, causal=causal, cache=cache, packing=packing)
        x = self.attention_norm(x + self.dropout(a))
        return self.ffn_norm(x + self.dropout(self.ffn(x))), cache
