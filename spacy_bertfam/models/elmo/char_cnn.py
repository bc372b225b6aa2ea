"""ELMo's context-free token representation: character CNN, highway layers, projection."""
import math
from typing import List, Tuple

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
        # The representation is context-free: each distinct word of the batch (and the
        # padding) is computed once; most tokens of a batch repeat an earlier one.
        words, inverse = unique_rows(char_ids.reshape(B * T, C))
        # A word's columns after its last change of id all hold one id (character padding),
        # so the windows lying wholly in them are alike: each word is convolved up to that
        # point plus the widest filter's width, which leaves every max what it was over all
        # max_chars columns, and words of similar length are convolved together.
        changes = words != words[:, -1:]
        ends = torch.where(changes.any(1), C - changes.flip(1).int().argmax(1), 0)
        order = torch.argsort(ends, stable=True)
        widest = max(width for width, _ in self.config.filters)
        pooled = []
        for group in torch.split(order, _group_sizes(ends[order], GROUP_ENDS)):
            x = self.chars(words[group, : min(C, int(ends[group[-1]]) + widest)])  # (n, columns, char_width)
            # amax, not max: torch's CPU max over a middle dim also finds the indices, and
            # ran 15x slower (112 ms of a 1.47 s `elmo_features` pass over 1,009 tweets).
            pooled.append(torch.cat([self.activation(_convolve(conv, x).amax(dim=1)) for conv in self.convolutions],
                                    dim=-1))
        vectors = self.projection(self.highway(torch.cat(pooled)))
        return vectors[torch.argsort(order)[inverse]].reshape(B, T, -1)  # argsort: each word's row in `order`


# Upper ends (in columns, word markers included) of the groups of words convolved together.
GROUP_ENDS = (8, 12, 16, 24)


def _group_sizes(sorted_ends: torch.Tensor, bounds: Tuple[int, ...]) -> List[int]:
    """Sizes of the runs of `sorted_ends` at most each bound, then the rest; empty runs left out."""
    cuts = torch.bucketize(sorted_ends, torch.tensor(bounds, device=sorted_ends.device))
    return [n for n in torch.bincount(cuts, minlength=len(bounds) + 1).tolist() if n]


def _convolve(conv: nn.Conv1d, x: torch.Tensor) -> torch.Tensor:
    """conv over (N, C, char_width) characters -> (N, C - width + 1, filters), as one
    matrix product over all windows: with 16 input channels, oneDNN's convolution ran
    at a few GFLOP/s on CPU and took a third of `elmo_features`' time."""
    width = conv.kernel_size[0]
    windows = x.unfold(1, width, 1)  # (N, C - width + 1, char_width, width)
    return torch.nn.functional.linear(windows.flatten(2), conv.weight.flatten(1), conv.bias)


def unique_rows(rows: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """`torch.unique(rows, dim=0, return_inverse=True)` for rows of small non-negative ints
    (character ids): the same rows in the same (lexicographic) order, from 1-D uniques. On a
    CPU torch's unique over rows compares rows a pair at a time (a tenth of `elmo_features`'
    time on tweets). Columns are packed a few to an int64 (first most significant), and each
    row's key is refined pack by pack: (key, pack) pairs numbered in sorted order keep the
    keys in the rows' lexicographic order."""
    n, width = rows.shape
    rows = rows.long()
    base = int(rows.max()) + 1 if rows.numel() else 1
    per_pack = max(1, int(62 / math.log2(base))) if base > 1 else width  # base ** per_pack < 2 ** 62
    key = torch.zeros(n, dtype=torch.long, device=rows.device)
    for start in range(0, width, per_pack):
        columns = rows[:, start: start + per_pack]
        powers = base ** torch.arange(columns.shape[1] - 1, -1, -1, device=rows.device)
        pack = torch.unique((columns * powers).sum(1), return_inverse=True)[1]
        key = pack if start == 0 else torch.unique(key * n + pack, return_inverse=True)[1]
    first = torch.zeros(int(key.max()) + 1 if n else 0, dtype=torch.long, device=rows.device)
    first.scatter_(0, key, torch.arange(n, device=rows.device))  # any row of each key: they are equal
    return rows[first], key
