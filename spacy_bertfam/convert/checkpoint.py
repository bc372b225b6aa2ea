"""The library's one checkpoint format, and loading any checkpoint into our modules.

Our format is a directory:
    config.json        {"spacy_bertfam": {"format": 1, "family": "bert"}, "model": {...}}
    model.safetensors  parameters under our own names
    tokenizer.json     the `tokenizers` file (WordPiece / BPE), when the family has one
    training_state.pt  optional, for resuming pretraining

Every reader (ours, Hugging Face BERT, later GPT and bilm-tf ELMo) returns a
`Checkpoint`, so components load any of them through one loader.
"""
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from ..tokenization import PieceTokenizer
from .errors import CheckpointError

logger = logging.getLogger("spacy_bertfam")

FORMAT_VERSION = 1


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


def _config_classes() -> Dict[str, Any]:
    from ..models.bert import BertConfig
    from ..models.elmo import ElmoConfig
    from ..models.gpt import GptConfig

    return {"bert": BertConfig, "gpt": GptConfig, "elmo": ElmoConfig}


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


def is_our_checkpoint(directory: Path) -> bool:
    config = directory / "config.json"
    return config.is_file() and "spacy_bertfam" in read_json(config)


def read_our_checkpoint(directory: Path) -> Checkpoint:
    meta = read_json(directory / "config.json")
    info = meta["spacy_bertfam"]
    if info.get("format") != FORMAT_VERSION:
        raise CheckpointError(
            f"{directory}: checkpoint format {info.get('format')} is not supported "
            f"(this version reads format {FORMAT_VERSION})"
        )
    family = info.get("family")
    classes = _config_classes()
    if family not in classes:
        raise CheckpointError(
            f"{directory}: unknown model family '{family}'; expected one of {sorted(classes)}"
        )
    config = _build_config(classes[family], meta.get("model", {}), directory)
    weights = directory / "model.safetensors"
    if not weights.is_file():
        raise CheckpointError(f"{directory}: missing weights file model.safetensors")
    tokenizer_file = directory / "tokenizer.json"
    tokenizer = PieceTokenizer.from_file(str(tokenizer_file)) if tokenizer_file.is_file() else None
    return Checkpoint(family, config, load_file(str(weights)), tokenizer, str(directory))


def read_checkpoint(path: Union[str, Path]) -> Checkpoint:
    """Read a checkpoint of any supported format from `path`.

    Supported: our own format, Hugging Face BERT, GPT-2 and GPT-1 directories, and
    bilm-tf ELMo directories (options.json + an HDF5 weight file).
    """
    from . import bilm_hdf5, hf_bert, hf_gpt

    directory = Path(path)
    if not directory.exists():
        raise CheckpointError(f"Checkpoint not found: {directory}")
    readers: List[Tuple[Callable[[Path], bool], Callable[[Path], Checkpoint]]] = [
        (is_our_checkpoint, read_our_checkpoint),
        (hf_bert.detect, hf_bert.read),
        (hf_gpt.detect, hf_gpt.read),
        (bilm_hdf5.detect, bilm_hdf5.read),
    ]
    if not directory.is_dir():
        raise CheckpointError(f"A checkpoint is a directory; {directory} is a file")
    for detect, read in readers:
        if detect(directory):
            return read(directory)
    raise CheckpointError(
        f"{directory} holds no checkpoint that spacy-bertfam can read: expected our own "
        "format (config.json with a 'spacy_bertfam' section) or a Hugging Face BERT, "
        "GPT-2 or GPT-1 directory (config.json with model_type 'bert', 'gpt2' or 'openai-gpt'), "
        "or a bilm-tf ELMo directory (options.json + one .hdf5 weight file)"
    )


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


def read_json(path: Path) -> Dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf8"))
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is not valid JSON: {e}") from None


def _build_config(cls: Any, data: Dict[str, Any], source: Path) -> Any:
    try:
        return cls.from_dict(data)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{source}: bad model configuration: {e}") from None


def _prefix(key: str, prefixes: Sequence[str]) -> str:
    return next(p for p in prefixes if key.startswith(p)).rstrip(".")


def _short(keys: List[str], most: int = 10) -> str:
    shown = ", ".join(repr(k) for k in sorted(keys)[:most])
    return shown + (f" ... ({len(keys) - most} more)" if len(keys) > most else "")
