"""File-level helpers the checkpoint readers share: JSON, weight files, vocabulary checks."""
import json
from pathlib import Path
from typing import Any, Dict, Optional

import torch
from safetensors.torch import load_file

from ..tokenization import PieceTokenizer
from .errors import CheckpointError


def read_json(path: Path) -> Dict[str, Any]:
    """A JSON file's content; invalid JSON raises a CheckpointError naming the file."""
    try:
        return json.loads(path.read_text(encoding="utf8"))
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is not valid JSON: {e}") from None



def read_weights(directory: Path) -> Dict[str, torch.Tensor]:
    """model.safetensors, else pytorch_model.bin (loaded without unpickling code)."""
    if (directory / "model.safetensors").is_file():
        return load_file(str(directory / "model.safetensors"))
    if (directory / "pytorch_model.bin").is_file():
        return torch.load(directory / "pytorch_model.bin", map_location="cpu", weights_only=True)
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
