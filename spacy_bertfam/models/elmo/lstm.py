"""bilm-tf's LSTM with a projection, cell and projection clipping, and stacked directions."""
from typing import List, Optional, Tuple

import torch
from torch import nn

State = Tuple[torch.Tensor, torch.Tensor]  # (projected output h (B, P), memory c (B, C))


class ProjectedLSTMCell(nn.Module):
    """One LSTM step: gates from [x; h], memory clipped to ±cell_clip, output projected
    to `projection_width` and clipped to ±projection_clip (Sak et al. 2014).

    Gate order in our weights: input, forget, memory (candidate), output.
    """

    def __init__(self, input_width: int, cell_width: int, projection_width: int,
                 cell_clip: float, projection_clip: float):
        super().__init__()
        self.cell_width = cell_width
        self.input_linearity = nn.Linear(input_width, 4 * cell_width, bias=False)
        self.state_linearity = nn.Linear(projection_width, 4 * cell_width)
        self.projection = nn.Linear(cell_width, projection_width, bias=False)
        self.cell_clip = cell_clip
        self.projection_clip = projection_clip

    def forward(self, x: torch.Tensor, state: State) -> State:
        """One step: x (B, input_width) and state (h (B, P), c (B, C)) -> the new (h, c)."""
        return self.step(self.input_linearity(x), state)

    def step(self, projected_x: torch.Tensor, state: State) -> State:
        """One step from the input's share of the gates, `input_linearity(x)`, precomputed."""
        h, c = state
        gates = projected_x + self.state_linearity(h)
        i, f, g, o = gates.split(self.cell_width, dim=-1)
        c = torch.sigmoid(i) * torch.tanh(g) + torch.sigmoid(f) * c
        c = c.clamp(-self.cell_clip, self.cell_clip)
        h = self.projection(torch.sigmoid(o) * torch.tanh(c))
        return h.clamp(-self.projection_clip, self.projection_clip), c


def run_direction(cell: ProjectedLSTMCell, x: torch.Tensor, mask: torch.Tensor, state: State,
                  reverse: bool) -> Tuple[torch.Tensor, State]:
    """Run one cell over (B, T, W) inputs; padded steps leave a row's state unchanged,
    so each row's final state is the one after its own last (or, reversed, first) token."""
    B, T, _ = x.shape
    outputs: List[Optional[torch.Tensor]] = [None] * T
    h, c = state
    # One matrix product for all steps; unbind once (indexing a step at a time would
    # make autograd build a full-size zero gradient per step).
    projected = cell.input_linearity(x).unbind(1)
    keeps = mask[..., None].unbind(1)
    steps = range(T - 1, -1, -1) if reverse else range(T)
    for t in steps:
        new_h, new_c = cell.step(projected[t], (h, c))
        keep = keeps[t]
        h = torch.where(keep, new_h, h)
        c = torch.where(keep, new_c, c)
        outputs[t] = new_h * keep
    return torch.stack(outputs, dim=1), (h, c)
