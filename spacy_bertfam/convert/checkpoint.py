"""What every checkpoint reader returns, and loading it into our modules with every name checked.

Readers (`readers.read_checkpoint`): our own format (`ours.py`), Hugging Face BERT
(`hf_bert.py`) and GPT-2/GPT-1 (`hf_gpt.py`) directories, bilm-tf ELMo (`bilm_hdf5.py`).
Each returns a `Checkpoint`, so components load any of them through one loader.
"""
import logging
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch import nn

from ..tokenization import PieceTokenizer
from .errors import CheckpointError

logger = logging.getLogger("spacy_bertfam")


@dataclass
class Checkpoint:
    """What every checkpoint reader returns.

    family: "bert", "gpt" or "elmo".
    config: the family's config dataclass.
    state: parameters under our names (heads included when the checkpoint has them).
    tokenizer: the piece tokenizer, or None for families that read characters.
    source: where it came from, for messages.
    """

    family: str
    config: Any
    state: Dict[str, torch.Tensor]
    tokenizer: Optional[PieceTokenizer]
    source: str


def load_state(
    module: nn.Module,
    state: Dict[str, torch.Tensor],
    *,
    source: str,
    optional: Sequence[str] = (),
) -> None:
    """Copy `state` into `module`, checking every name and shape.

    optional: name prefixes (e.g. the pretraining heads) that may be absent on either
        side: absent from the checkpoint, they keep their fresh initialisation and a
        warning names them; absent from the module, the checkpoint's tensors go unused.
    Raises CheckpointError naming missing keys, unexpected keys and shape mismatches.
    """
    target = module.state_dict()
    is_optional = lambda key: any(key.startswith(p) for p in optional)  # noqa: E731
    missing = [k for k in target if k not in state and not is_optional(k)]
    fresh = sorted({_prefix(k, optional) for k in target if k not in state and is_optional(k)})
    unexpected = [k for k in state if k not in target and not is_optional(k)]
    problems = []
    if missing:
        problems.append(f"missing key(s) {_short(missing)}")
    if unexpected:
        problems.append(f"unexpected key(s) {_short(unexpected)}")
    for key, tensor in state.items():
        if key in target and tuple(tensor.shape) != tuple(target[key].shape):
            problems.append(
                f"shape mismatch for '{key}': checkpoint {tuple(tensor.shape)}, "
                f"model {tuple(target[key].shape)}"
            )
    if problems:
        raise CheckpointError(f"{source}: " + "; ".join(problems))
    with torch.no_grad():
        for key, tensor in state.items():
            if key in target:
                target[key].copy_(tensor.to(target[key].dtype))
    if fresh:
        logger.warning(
            "%s has no weights for %s: freshly initialised", source, ", ".join(fresh)
        )


def _prefix(key: str, prefixes: Sequence[str]) -> str:
    return next(p for p in prefixes if key.startswith(p)).rstrip(".")


def _short(keys: List[str], most: int = 10) -> str:
    shown = ", ".join(repr(k) for k in sorted(keys)[:most])
    return shown + (f" ... ({len(keys) - most} more)" if len(keys) > most else "")
