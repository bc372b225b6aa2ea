"""The BERT encoder (Devlin et al. 2018, https://arxiv.org/abs/1810.04805)."""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..layers import Packing, TransformerBlock
from ..layers.dropout import Dropout
from ..layers.init import init_normal
from ..output import EncoderOutput
from .config import BertConfig


class BertEmbeddings(nn.Module):
    """Sum of piece, segment and learned position embeddings, then LayerNorm and dropout."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.pieces = nn.Embedding(config.n_pieces, config.hidden_width)
        self.positions = nn.Embedding(config.n_positions, config.hidden_width)
        self.types = nn.Embedding(config.n_types, config.hidden_width)
        self.norm = nn.LayerNorm(config.hidden_width, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout)

    def forward(
        self, piece_ids: torch.Tensor, type_ids: torch.Tensor, positions: torch.Tensor,
        piece_vectors: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """All inputs (B, T) int64 -> (B, T, width); piece_vectors: the pieces' embeddings
        when the caller looked them up already (see `BertEncoder.forward`)."""
        pieces = self.pieces(piece_ids) if piece_vectors is None else piece_vectors
        return self.dropout(self.norm(pieces + self.types(type_ids) + self.positions(positions)))


class BertEncoder(nn.Module):
    """Embeddings, N post-LN transformer blocks and the tanh pooler on [CLS]."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.layers = nn.ModuleList(
            TransformerBlock(
                width=config.hidden_width,
                n_heads=config.n_heads,
                inner_width=config.intermediate_width,
                activation=config.activation,
                dropout=config.hidden_dropout,
                attention_dropout=config.attention_dropout,
                layer_norm_eps=config.layer_norm_eps,
                pre_norm=False,
            )
            for _ in range(config.n_layers)
        )
        self.pooler = nn.Linear(config.hidden_width, config.hidden_width)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Fresh random weights (BERT's initialisation), e.g. to train from scratch."""
        self.apply(init_normal)

    def forward(
        self,
        piece_ids: torch.Tensor,
        attention_mask: Optional[torch.Tensor] = None,
        type_ids: Optional[torch.Tensor] = None,
        piece_vectors: Optional[torch.Tensor] = None,
        packing: Optional[Packing] = None,
    ) -> EncoderOutput:
        """Encode a batch.

        piece_ids: (B, T) piece ids, [CLS] ... [SEP] [PAD]...
        attention_mask: (B, T) bool or 0/1; True/1 marks a real piece. Default: all real.
        type_ids: (B, T) segment ids; default all 0.
        piece_vectors: (B, T, width) `embed_pieces(piece_ids)`, when a caller that runs
            several batches in one backward pass looked them up once for all of them.
        packing: the real positions of `attention_mask` (`Packing.of`): the blocks then
            run on those rows alone, and the layers are (n, width) (see `EncoderOutput`).
        """
        B, T = piece_ids.shape
        if T > self.config.n_positions:
            raise ValueError(
                f"Sequence of {T} pieces exceeds the {self.config.n_positions} positions "
                "of this model; encode long inputs in windows"
            )
        if type_ids is None:
            type_ids = torch.zeros_like(piece_ids)
        positions = torch.arange(T, device=piece_ids.device).expand(B, T)
        attend = None
        if attention_mask is not None:
            # (B, T) -> (B, 1, 1, T): every query may see every real key.
            attend = attention_mask.bool()[:, None, None, :]
        x = self.embeddings(piece_ids, type_ids, positions, piece_vectors)
        if packing is not None:
            x = packing.unpad(x)
        layers = [x]
        for block in self.layers:
            x, _ = block(x, attend, packing=packing)
            layers.append(x)
        first = x[:, 0] if packing is None else x[packing.index(torch.arange(B, device=x.device) * T)]
        return EncoderOutput(layers=layers, pooled=torch.tanh(self.pooler(first)), packing=packing)

    def embed_pieces(self, piece_ids: torch.Tensor, sparse: bool = False) -> torch.Tensor:
        """(B, T) ids -> (B, T, width) piece embeddings (before positions and segments);
        `sparse`: the table's gradient holds only the looked-up rows (see `WindowedEncoder`)."""
        return F.embedding(piece_ids, self.embeddings.pieces.weight, sparse=sparse)
