"""BERT's pretraining heads: masked LM and next-sentence prediction (paper §3.1)."""
from typing import Tuple

import torch
from torch import nn

from ..layers import get_activation
from ..layers.init import init_normal
from ..output import EncoderOutput
from .config import BertConfig
from .encoder import BertEncoder


class MaskedLMHead(nn.Module):
    """Dense + activation + LayerNorm, then a decoder tied to the piece embeddings.

    The decoder has no weight of its own (it reuses the embedding matrix) but keeps
    its own output bias, as in the released checkpoints.
    """

    def __init__(self, config: BertConfig, piece_embeddings: nn.Embedding):
        super().__init__()
        self.dense = nn.Linear(config.hidden_width, config.hidden_width)
        self.activation = get_activation(config.activation)
        self.norm = nn.LayerNorm(config.hidden_width, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.n_pieces))
        # Held in a tuple so the tied matrix is not registered (and saved) twice.
        self._tied = (piece_embeddings,)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden: (..., width) -> logits (..., n_pieces)."""
        h = self.norm(self.activation(self.dense(hidden)))
        return h @ self._tied[0].weight.T + self.bias


class NextSentenceHead(nn.Module):
    """Pooled [CLS] vector -> IsNext (0) / NotNext (1) logits."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.classifier = nn.Linear(config.hidden_width, 2)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        """pooled: (B, width) -> (B, 2)."""
        return self.classifier(pooled)


# State-dict prefixes of the pretraining heads: a feature encoder may lack them.
PRETRAINING_HEADS = ("mlm_head.", "nsp_head.")


class BertForPretraining(BertEncoder):
    """The encoder plus both pretraining heads, with the parameter names of the
    encoder alone, so one state dict serves both (heads under `mlm_head.`/`nsp_head.`).
    """

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.mlm_head = MaskedLMHead(config, self.embeddings.pieces)
        self.nsp_head = NextSentenceHead(config)
        self.mlm_head.apply(init_normal)
        self.nsp_head.apply(init_normal)

    def heads(self, out: EncoderOutput) -> Tuple[torch.Tensor, torch.Tensor]:
        """MLM logits (B, T, n_pieces) and NSP logits (B, 2) of an encoder output."""
        return self.mlm_head(out.last_hidden), self.nsp_head(out.pooled)
