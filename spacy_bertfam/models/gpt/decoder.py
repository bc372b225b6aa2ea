"""GPT-1 and GPT-2 as one causal transformer decoder.

GPT-1: Radford et al. 2018, "Improving Language Understanding by Generative
Pre-Training" (post-LN blocks). GPT-2: Radford et al. 2019, "Language Models are
Unsupervised Multitask Learners" (pre-LN blocks and a final LayerNorm).

Layer outputs: layer 0 is the embedding output, layer i the output of block i; in
GPT-2 the top layer is taken after the final LayerNorm (what the LM head reads and
what Hugging Face reports as its last hidden state), so layers[-1] is comparable
across implementations.
"""
from dataclasses import dataclass
from typing import List, Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..layers import Packing, TransformerBlock
from ..layers.attention import KVCache
from ..layers.dropout import Dropout
from ..layers.init import init_normal
from ..layers.linear import linear
from ..output import EncoderOutput
from .config import GptConfig


@dataclass
class DecoderOutput(EncoderOutput):
    """EncoderOutput plus the key/value cache of every block (for incremental decoding)."""

    cache: Optional[List[KVCache]] = None


def positions_from_mask(mask: torch.Tensor, past: int = 0) -> torch.Tensor:
    """Position ids that skip padding: cumulative mask − 1 (left padding stays right).

    mask: (B, T_total) 1 for real pieces, covering the cached past and the new pieces;
    returns the positions of the last T_total − past columns.
    """
    positions = mask.long().cumsum(-1) - 1
    return positions.clamp(min=0)[:, past:]


class GptDecoder(nn.Module):
    """Token + position embeddings, N causal blocks, final LayerNorm for GPT-2, tied LM head."""

    def __init__(self, config: GptConfig):
        super().__init__()
        self.config = config
        self.pieces = nn.Embedding(config.n_pieces, config.hidden_width)
        self.positions = nn.Embedding(config.n_positions, config.hidden_width)
        self.dropout = Dropout(config.embedding_dropout)
        self.layers = nn.ModuleList(
            TransformerBlock(
                width=config.hidden_width,
                n_heads=config.n_heads,
                inner_width=config.intermediate_width,
                activation=config.activation,
                dropout=config.residual_dropout,
                attention_dropout=config.attention_dropout,
                layer_norm_eps=config.layer_norm_eps,
                pre_norm=config.pre_norm,
            )
            for _ in range(config.n_layers)
        )
        self.final_norm = (
            nn.LayerNorm(config.hidden_width, eps=config.layer_norm_eps) if config.pre_norm else None
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2's initialisation: normal(0, 0.02), zero biases, unit LayerNorms."""
        self.apply(init_normal)

    def forward(
        self,
        piece_ids: torch.Tensor,
        attention_mask: Optional[torch.Tensor] = None,
        position_ids: Optional[torch.Tensor] = None,
        cache: Optional[List[KVCache]] = None,
        piece_vectors: Optional[torch.Tensor] = None,
        packing: Optional[Packing] = None,
    ) -> DecoderOutput:
        """Decode a batch.

        piece_ids: (B, T) new pieces.
        attention_mask: (B, T_past + T), 1 for real pieces (padding may be on either
            side); default all real.
        position_ids: (B, T); default derived from the mask (cumulative mask − 1).
        cache: per block (keys, values) of the T_past earlier pieces.
        piece_vectors: (B, T, width) `embed_pieces(piece_ids)`, when a caller that runs
            several batches in one backward pass looked them up once for all of them.
        packing: the real positions of `attention_mask` (`Packing.of`), without a cache:
            the blocks then run on those rows alone, and the layers are (n, width).
        """
        B, T = piece_ids.shape
        past = 0 if cache is None else cache[0].length
        if packing is not None and cache is not None:
            raise ValueError("packing is for whole sequences; incremental decoding with a cache takes padded batches")
        if past + T > self.config.n_positions:
            raise ValueError(
                f"{past + T} pieces exceed the {self.config.n_positions} positions of this "
                "model; use windows or a shorter context"
            )
        if attention_mask is None:
            attention_mask = torch.ones(B, past + T, dtype=torch.long, device=piece_ids.device)
        if position_ids is None:
            position_ids = positions_from_mask(attention_mask, past)
        keys = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T_kv)
        # A padding query may see no key at all; let every query see itself so that
        # attention never normalises over an empty set (its output is ignored anyway).
        itself = torch.eye(T, past + T, dtype=torch.bool, device=piece_ids.device).roll(past, dims=1)
        attend = keys | itself
        pieces = self.pieces(piece_ids) if piece_vectors is None else piece_vectors
        x = self.dropout(pieces + self.positions(position_ids))
        if packing is not None:
            x = packing.unpad(x)
        layers = [x]
        new_cache: List[KVCache] = []
        for i, block in enumerate(self.layers):
            x, kv = block(x, attend, causal=True, cache=None if cache is None else cache[i], packing=packing)
            new_cache.append(kv)
            layers.append(x)
        if self.final_norm is not None:
            layers[-1] = self.final_norm(layers[-1])
        return DecoderOutput(layers=layers, cache=new_cache, packing=packing)

    def embed_pieces(self, piece_ids: torch.Tensor, sparse: bool = False) -> torch.Tensor:
        """(B, T) ids -> (B, T, width) piece embeddings (before positions); `sparse`: the
        table's gradient holds only the looked-up rows (see `WindowedEncoder`)."""
        return F.embedding(piece_ids, self.pieces.weight, sparse=sparse)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """LM head tied to the piece embeddings: (..., width) -> (..., n_pieces)."""
        return linear(hidden, self.pieces.weight)
