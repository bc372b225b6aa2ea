"""bilm-tf's LSTM with a projection, cell and projection clipping, and stacked directions."""
from dataclasses import dataclass
from typing import List, Tuple

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


@dataclass
class Packing:
    """Right-padded rows, sorted longest first, as `run_direction` steps through them: at
    each step only the rows still running (a prefix of the batch) are computed, so a
    batch costs its real tokens, not its rows times the longest.

    active: per time step, how many rows are still running.
    reverse: (B, T) per-row time index that reverses each row's real steps in place
        (padding stays put): the backward direction reads its input through it.
    packed: (sum(active),) the flat (B·T) position of each step's output rows, time-major.
    """

    active: List[int]
    reverse: torch.Tensor
    packed: torch.Tensor

    @classmethod
    def of(cls, lengths: torch.Tensor, T: int) -> "Packing":
        """lengths: (B,) real steps per row, non-increasing."""
        steps = torch.arange(T, device=lengths.device)
        reverse = torch.where(steps < lengths[:, None], lengths[:, None] - 1 - steps, steps)
        running = steps[:, None] < lengths[None, :]  # (T, B)
        active = [n for n in running.sum(1).tolist() if n]
        t, row = torch.nonzero(running, as_tuple=True)  # time-major, rows in order
        return cls(active, reverse, row * T + t)


def run_direction(cell: ProjectedLSTMCell, x: torch.Tensor, packing: Packing, state: State,
                  reverse: bool) -> Tuple[torch.Tensor, State]:
    """Run one cell over (B, T, W) inputs whose rows are laid out as `packing` says;
    each row's final state is the one after its own last (or, reversed, first) token,
    and padding outputs are zero."""
    B, T, _ = x.shape
    index = packing.reverse[..., None]
    if reverse:
        x = x.gather(1, index.expand_as(x))
    h, c = state
    # One matrix product for all steps, unbound once (indexing a step at a time would
    # make autograd build a full-size zero gradient per step).
    projected = cell.input_linearity(x).unbind(1)
    outputs = []
    for t, n in enumerate(packing.active):
        new_h, new_c = cell.step(projected[t][:n], (h[:n], c[:n]))
        # Rows that have ended keep their state; no in-place writes, so autograd can
        # keep every step's inputs.
        h = new_h if n == B else torch.cat([new_h, h[n:]])
        c = new_c if n == B else torch.cat([new_c, c[n:]])
        outputs.append(new_h)
    width = h.shape[-1]
    out = x.new_zeros(B * T, width)
    if outputs:
        out = out.index_copy(0, packing.packed, torch.cat(outputs).to(out.dtype))
    out = out.view(B, T, width)
    if reverse:
        out = out.gather(1, index.expand_as(out))
    return out, (h, c)
