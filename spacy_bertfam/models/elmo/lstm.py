"""bilm-tf's LSTM with a projection, cell and projection clipping, and stacked directions."""
from dataclasses import dataclass
from typing import List, Tuple

import torch
from torch import nn

State = Tuple[torch.Tensor, torch.Tensor]  # (projected output h (B, P), memory c (B, C))
# Time steps whose input projection is computed together: 16, fewer where the batch has
# more than 64 rows (at most 1,024 rows × steps): 16 steps of 291 rows (a read-ahead of
# tweets) are 76 MB of gates, and writing the bias into them took as long as their product.
INPUT_CHUNK, INPUT_CHUNK_ROWS = 16, 1024


class ProjectedLSTMCell(nn.Module):
    """The weights of one LSTM with memory clipped to ±cell_clip and its output projected
    to `projection_width` and clipped to ±projection_clip (Sak et al. 2014); the step
    itself is in `run_directions`, which runs a forward and a backward cell together.

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


def _stacked_weights(forward: ProjectedLSTMCell, backward: ProjectedLSTMCell) -> Tuple[torch.Tensor, ...]:
    """The two cells' weights stacked for `run_directions`: bias (2, 1, 4C), input (2, W, 4C),
    state (2, P, 4C) and projection (2, C, P).

    The memory gate's pre-activation is doubled: one sigmoid covers all four gates, as
    tanh(m) = 2σ(2m) − 1. On a CPU torch's tanh is 3x slower than its sigmoid (AVX2, 32k
    floats: 105 against 32 µs on one thread).
    Made anew on every call (4 ms, 2% of a call on 128 tweets): optimizers update weights
    through `.data`, in place, which neither moves their storage nor counts as a version,
    so a kept copy could not tell that they changed.
    """
    cells = (forward, backward)
    C = forward.cell_width
    device = forward.state_linearity.bias.device
    doubled = torch.ones(4 * C, device=device)
    doubled[2 * C: 3 * C] = 2.0
    return (torch.stack([cell.state_linearity.bias * doubled for cell in cells])[:, None],
            torch.stack([cell.input_linearity.weight.T * doubled for cell in cells]),
            torch.stack([cell.state_linearity.weight.T * doubled for cell in cells]),
            torch.stack([cell.projection.weight.T for cell in cells]))


class _Scratch:
    """Memory for the gates, allocated once per `run_directions` call and reused by every
    chunk and step of it: in float32 prediction only.

    A chunk of 1,024 rows' gates is 16 MB. Allocated anew for each chunk, glibc maps fresh
    pages for it and the kernel zeroes them on first touch: writing the bias into such a
    chunk ran at 3 GB/s (95 ms of a 1 s pass over the WNUT-17 tweets)."""

    def __init__(self, like: torch.Tensor, active: List[int], width: int):
        rows = active[0] if active else 0
        chunk_rows = max(min(INPUT_CHUNK * rows, INPUT_CHUNK_ROWS), rows)
        self.width = width
        self.chunk = like.new_empty(2 * chunk_rows * width)
        self.gates = like.new_empty(2 * rows * width)

    def take(self, memory: torch.Tensor, rows: int) -> torch.Tensor:
        """(2, rows, width) at the start of `memory` (`self.chunk` or `self.gates`)."""
        return memory[: 2 * rows * self.width].view(2, rows, self.width)


def run_directions(forward: ProjectedLSTMCell, backward: ProjectedLSTMCell, x: Tuple[torch.Tensor, torch.Tensor],
                   packing: Packing, state: Tuple[State, State]) -> Tuple[Tuple[torch.Tensor, torch.Tensor],
                                                                         Tuple[State, State]]:
    """Run a forward and a backward cell over their (B, T, W) inputs, rows laid out as
    `packing` says; each row's final state is the one after its own last (backward: first)
    token, and padding outputs are zero.

    The two directions step together, as one batched product per step with their weights
    stacked: half the operator calls of running them in turn, which is most of what a step
    over a few dozen rows costs.
    """
    B, T, W = x[0].shape
    C = forward.cell_width
    index = packing.reverse[..., None]
    # The backward cell reads each row's real steps in reverse (padding stays put); time-major.
    inputs = torch.stack([x[0], x[1].gather(1, index.expand_as(x[1]))]).transpose(1, 2)  # (2, T, B, W)
    bias, input_weight, state_weight, projection = _stacked_weights(forward, backward)
    h = torch.stack([state[0][0], state[1][0]])
    c = torch.stack([state[0][1], state[1][1]])
    ended: List[State] = []  # rows whose last step has passed, last rows first
    outputs = []
    chunk_start = chunk_end = 0
    # Products into `out=` neither backpropagate nor take autocast's dtype: plain prediction only.
    plain = not torch.is_grad_enabled() and not torch.is_autocast_enabled(x[0].device.type)
    scratch = _Scratch(x[0], packing.active, 4 * C) if plain else None
    for t, n in enumerate(packing.active):
        if t == chunk_end:
            # The input's share of the next steps' gates (and the state bias), for the rows
            # running at the chunk's start, in one product: chunk by chunk it stays in cache
            # for the steps that read it (all steps at once: 1.5x slower on prose).
            # Unbound into steps, and gates split rather than sliced: in the backward pass
            # these join their pieces' gradients in one op, where a slice writes its gradient
            # into zeros the size of what it was cut from (a whole chunk, every step).
            k = min(INPUT_CHUNK, max(1, INPUT_CHUNK_ROWS // n), len(packing.active) - t)
            chunk_start, chunk_end = t, t + k
            chunk = torch.baddbmm(bias, inputs[:, t: t + k, :n].reshape(2, k * n, W), input_weight,
                                  out=scratch.take(scratch.chunk, k * n) if scratch else None)
            chunk_steps = chunk.view(2, k, n, 4 * C).unbind(1)
        if n < h.shape[1]:  # rows are sorted longest first: those from n on have ended
            ended.append((h[:, n:], c[:, n:]))
            h, c = h[:, :n], c[:, :n]
        gates = torch.baddbmm(chunk_steps[t - chunk_start][:, :n], h, state_weight,
                              out=scratch.take(scratch.gates, n) if scratch else None)
        input_gate, forget_gate, memory, output_gate = gates.sigmoid_().split(C, dim=-1)
        # c = f·c + i·tanh(m) = f·c − i + 2·i·σ(2m), and o·tanh(c) = 2·o·σ(2c) − o.
        c = torch.addcmul(torch.addcmul(-input_gate, forget_gate, c), input_gate, memory, value=2)
        c = c.clamp_(-forward.cell_clip, forward.cell_clip)
        output = torch.addcmul(-output_gate, output_gate, (2 * c).sigmoid_(), value=2)
        h = torch.bmm(output, projection).clamp_(-forward.projection_clip, forward.projection_clip)
        outputs.append(h)
    if ended:
        h = torch.cat([h] + [rows[0] for rows in reversed(ended)], dim=1)
        c = torch.cat([c] + [rows[1] for rows in reversed(ended)], dim=1)
    width = h.shape[-1]
    steps = torch.cat(outputs, dim=1) if outputs else None
    out = []
    for d in range(2):
        rows = x[0].new_zeros(B * T, width)
        if steps is not None:
            rows = rows.index_copy(0, packing.packed, steps[d].to(rows.dtype))
        out.append(rows.view(B, T, width))
    return (out[0], out[1].gather(1, index.expand_as(out[1]))), ((h[0], c[0]), (h[1], c[1]))
