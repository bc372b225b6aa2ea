"""File-level helpers the checkpoint readers share: JSON, weight files, vocabulary checks."""
import json
import pickle
from pathlib import Path
from typing import Any, Dict, Optional

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from ..tokenization import PieceTokenizer
from .errors import CheckpointError


def read_json(path: Path) -> Dict[str, Any]:
    """A JSON file's content; invalid JSON raises a CheckpointError naming the file."""
    try:
        return json.loads(path.read_text(encoding="utf8"))
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is not valid JSON: {e}") from None



def read_safetensors(path: Path) -> Dict[str, torch.Tensor]:
    """A safetensors file; a damaged one is a CheckpointError naming it."""
    try:
        return load_file(str(path))
    except (SafetensorError, OSError) as e:
        raise CheckpointError(f"{path} is not a readable safetensors file ({e}); it may be truncated: "
                              "copy or download it again") from None


def read_torch_weights(path: Path) -> Dict[str, torch.Tensor]:
    """A `pytorch_model.bin`, read with torch's weights-only unpickler: a file that holds
    anything but tensors (e.g. code that would run on loading) is refused."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[0]
        raise CheckpointError(
            f"{path} holds more than tensors, and unpickling it could run code: refused ({first}). "
            "Convert trusted weights to model.safetensors, or use another checkpoint"
        ) from None
    except (RuntimeError, EOFError, OSError) as e:
        raise CheckpointError(f"{path} is not a readable PyTorch weight file ({e}); it may be truncated") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path} does not hold a state dict of tensors")
    return state


def read_weights(directory: Path) -> Dict[str, torch.Tensor]:
    """model.safetensors, else pytorch_model.bin (loaded without unpickling code)."""
    if (directory / "model.safetensors").is_file():
        return read_safetensors(directory / "model.safetensors")
    if (directory / "pytorch_model.bin").is_file():
        return read_torch_weights(directory / "pytorch_model.bin")
    raise CheckpointError(
        f"{directory}: missing weights: expected model.safetensors or pytorch_model.bin"
    )


def check_vocabulary(source: str, n_pieces: int, embeddings: Optional[torch.Tensor], tokenizer: PieceTokenizer) -> None:
    """config.json's vocabulary size, the embedding matrix and the tokenizer must agree."""
    if embeddings is not None and embeddings.shape[0] != n_pieces:
        raise CheckpointError(
            f"{source}: config.json says vocab_size {n_pieces} but the embedding "
            f"matrix has {embeddings.shape[0]} rows"
        )
    if tokenizer.n_pieces != n_pieces:
        raise CheckpointError(
            f"{source}: the tokenizer has {tokenizer.n_pieces} pieces but the embedding "
            f"matrix has {n_pieces} rows"
        )
