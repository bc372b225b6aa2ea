"""Highway layers (Srivastava et al. 2015), as ELMo's character encoder uses them."""
import torch
from torch import nn


class Highway(nn.Module):
    """y = (1 − g) · x + g · relu(W_t x + b_t), with the gate g = sigmoid(W_c x + b_c).

    This is bilm-tf's convention (g gates the transformed part), so its `W_carry`
    and `W_transform` load without sign flips.

    width (int): input and output width.
    n_layers (int): layers applied in sequence.
    """

    def __init__(self, *, width: int, n_layers: int):
        super().__init__()
        self.transforms = nn.ModuleList(nn.Linear(width, width) for _ in range(n_layers))
        self.gates = nn.ModuleList(nn.Linear(width, width) for _ in range(n_layers))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's Linear initialisation, with gates that start close to carrying the
        input through (a negative gate bias)."""
        for transform, gate in zip(self.transforms, self.gates):
            transform.reset_parameters()
            gate.reset_parameters()
            nn.init.constant_(gate.bias, -2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (..., width) -> (..., width)."""
        for transform, gate in zip(self.transforms, self.gates):
            g = torch.sigmoid(gate(x))
            x = (1 - g) * x + g * torch.relu(transform(x))
        return x
