"""ELMo's context-free token representation: character CNN, highway layers, projection."""
import torch
from torch import nn

from ..layers.highway import Highway
from .config import ElmoConfig


class CharCNN(nn.Module):
    """(B, T, max_chars) character ids -> (B, T, projection_width) token vectors.

    Each convolution is max-pooled over the whole (padded) word and then passed
    through the activation, as in bilm-tf.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.config = config
        self.chars = nn.Embedding(config.n_characters, config.char_width, padding_idx=0)
        self.convolutions = nn.ModuleList(
            nn.Conv1d(config.char_width, n, kernel_size=width) for width, n in config.filters
        )
        total = sum(n for _, n in config.filters)
        self.highway = Highway(width=total, n_layers=config.n_highway)
        self.projection = nn.Linear(total, config.projection_width)
        self.activation = torch.relu if config.activation == "relu" else torch.tanh

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        """char_ids: (B, T, max_chars), 0 = padding -> (B, T, projection_width)."""
        B, T, C = char_ids.shape
        x = self.chars(char_ids.reshape(B * T, C)).transpose(1, 2)  # (B·T, char_width, C)
        pooled = [self.activation(conv(x).max(dim=-1).values) for conv in self.convolutions]
        return self.projection(self.highway(torch.cat(pooled, dim=-1))).reshape(B, T, -1)
