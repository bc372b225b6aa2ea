"""Activation functions by name, so configs can say which one a checkpoint used."""
from typing import Callable, Dict

import torch
import torch.nn.functional as F

# BERT uses the exact (erf) GELU; GPT-1/GPT-2 use the tanh approximation. The two
# differ by up to ~5e-4, which is enough to break numerical parity with a checkpoint.
_ACTIVATIONS: Dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
}


def get_activation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """Return the activation called `name`; raise a ValueError listing the known ones."""
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(
            f"Unknown activation '{name}'; expected one of {sorted(_ACTIVATIONS)}"
        ) from None
