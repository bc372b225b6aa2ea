"""The library's own checkpoint format.

A directory:
    config.json        {"spacy_bertfam": {"format": 1, "family": "bert"}, "model": {...}}
    model.safetensors  parameters under our own names
    tokenizer.json     the `tokenizers` file (WordPiece / BPE), when the family has one
    training_state.pt  optional, for resuming pretraining
"""
import json
from pathlib import Path
from typing import Any, Dict, Optional, Union

from safetensors.torch import save_file

from ..models.bert import BertConfig
from ..models.elmo import ElmoConfig
from ..models.gpt import GptConfig
from ..tokenization import PieceTokenizer
from .checkpoint import Checkpoint
from .errors import CheckpointError
from .files import read_json, read_safetensors

FORMAT_VERSION = 1
CONFIG_CLASSES: Dict[str, Any] = {"bert": BertConfig, "gpt": GptConfig, "elmo": ElmoConfig}
PIECE_FAMILIES = ("bert", "gpt")  # families with a piece vocabulary (ELMo reads characters)


def save_checkpoint(directory: Union[str, Path], checkpoint: Checkpoint) -> Path:
    """Write `checkpoint` in our format; returns the directory."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    meta = {
        "spacy_bertfam": {"format": FORMAT_VERSION, "family": checkpoint.family},
        "model": checkpoint.config.to_dict(),
    }
    (directory / "config.json").write_text(json.dumps(meta, indent=2), encoding="utf8")
    save_file({k: v.detach().contiguous().cpu() for k, v in checkpoint.state.items()},
              str(directory / "model.safetensors"))
    if checkpoint.tokenizer is not None:
        checkpoint.tokenizer.save(str(directory / "tokenizer.json"))
    return directory


def detect(directory: Path) -> bool:
    """Whether `directory` holds a checkpoint in our format."""
    config = directory / "config.json"
    return config.is_file() and "spacy_bertfam" in read_json(config)


def read(directory: Path) -> Checkpoint:
    """Read a checkpoint in our format."""
    meta = read_json(directory / "config.json")
    info = meta["spacy_bertfam"]
    if info.get("format") != FORMAT_VERSION:
        raise CheckpointError(
            f"{directory}: checkpoint format {info.get('format')} is not supported "
            f"(this version reads format {FORMAT_VERSION})"
        )
    family = info.get("family")
    if family not in CONFIG_CLASSES:
        raise CheckpointError(
            f"{directory}: unknown model family '{family}'; expected one of {sorted(CONFIG_CLASSES)}"
        )
    config = _build_config(CONFIG_CLASSES[family], meta.get("model", {}), directory)
    weights = directory / "model.safetensors"
    if not weights.is_file():
        raise CheckpointError(f"{directory}: missing weights file model.safetensors")
    tokenizer = _read_tokenizer(directory / "tokenizer.json", family)
    return Checkpoint(family, config, read_safetensors(weights), tokenizer, str(directory))


def _build_config(cls: Any, data: Dict[str, Any], source: Path) -> Any:
    try:
        return cls.from_dict(data)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{source}: bad model configuration: {e}") from None




def _read_tokenizer(path: Path, family: str) -> Optional[PieceTokenizer]:
    """The checkpoint's tokenizer; piece families (BERT, GPT) must have one."""
    if family in PIECE_FAMILIES and not path.is_file():
        raise CheckpointError(f"{path.parent}: missing tokenizer file tokenizer.json (a {family} checkpoint needs one)")
    if not path.is_file():
        return None
    try:
        return PieceTokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises its own untyped errors
        raise CheckpointError(f"{path} is not a readable tokenizer file: {e}") from None
