"""Position-wise feed-forward layer shared by the transformer families."""
import torch
from torch import nn

from .activations import get_activation
from .linear import Linear


class FeedForward(nn.Module):
    """Two linear maps with an activation between them (Vaswani et al. 2017, §3.3).

    width (int): model width (input and output).
    inner_width (int): hidden width, 4 × width in BERT and GPT.
    activation (str): name from `models.layers.activations` ("gelu", "gelu_tanh", ...).
    """

    def __init__(self, *, width: int, inner_width: int, activation: str = "gelu"):
        super().__init__()
        self.up = Linear(width, inner_width)
        self.down = Linear(inner_width, width)
        self.activation = get_activation(activation)
        self.activation_in_place = get_activation(activation, in_place=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, T, width) -> (B, T, width). Without autograd the activation overwrites the
        hidden state (its backward would need the input)."""
        hidden = self.up(x)
        if torch.is_grad_enabled():
            return self.down(self.activation(hidden))
        return self.down(self.activation_in_place(hidden))
