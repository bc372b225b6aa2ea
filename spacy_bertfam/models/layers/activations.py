"""Activation functions by name, so configs can say which one a checkpoint used."""
from typing import Callable, Dict

import torch
import torch.nn.functional as F


# BERT uses the exact (erf) GELU; GPT-1/GPT-2 use the tanh approximation. The two
# differ by up to ~5e-4, which is enough to break numerical parity with a checkpoint.
# Named module-level functions, not lambdas or torch.ops handles: a module holding one must
# pickle (spaCy's n_process pickles the pipeline where processes are spawned, not forked).
def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


# The same functions, overwriting their input: for prediction, where the input is a fresh
# intermediate nobody else reads (a feed-forward layer's 4x-wide hidden state), this saves
# allocating and writing a second one (the feed-forward 5.5% faster on 2 threads here).
#
# Torch runs the exact GELU of a contiguous float tensor through oneDNN, whose primitive
# cache keeps one primitive (~23 KB) per input shape, up to 1,024 of them: a stream whose
# batches keep bringing new sizes grew by ~20 MB of cache over 1M tokens. Split so, oneDNN
# sees row counts that are multiples of this or below it: a few hundred shapes at most at
# our chunk sizes, met early. Every row goes through the same kernel, so the values are
# those of one call over the whole tensor.
_GELU_ROWS = 64


def _gelu_(x: torch.Tensor) -> torch.Tensor:
    if not x.is_contiguous() or x.dim() == 0:
        return torch.ops.aten.gelu_(x)
    rows = x.view(-1, x.shape[-1])
    cut = rows.shape[0] - rows.shape[0] % _GELU_ROWS
    for part in (rows[:cut], rows[cut:]):
        if part.shape[0]:
            torch.ops.aten.gelu_(part)
    return x


def _gelu_tanh_(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.gelu_(x, approximate="tanh")


def _silu_(x: torch.Tensor) -> torch.Tensor:
    return F.silu(x, inplace=True)


_ACTIVATIONS: Dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": F.gelu,
    "gelu_tanh": _gelu_tanh,
    "relu": F.relu,
    "silu": F.silu,
}
_IN_PLACE: Dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": _gelu_,
    "gelu_tanh": _gelu_tanh_,
    "relu": torch.relu_,
    "silu": _silu_,
}


def get_activation(name: str, in_place: bool = False) -> Callable[[torch.Tensor], torch.Tensor]:
    """Return the activation called `name` (`in_place`: the variant that overwrites its
    input); raise a ValueError listing the known ones."""
    try:
        return (_IN_PLACE if in_place else _ACTIVATIONS)[name]
    except KeyError:
        raise ValueError(
            f"Unknown activation '{name}'; expected one of {sorted(_ACTIVATIONS)}"
        ) from None
