"""Reading a checkpoint of any supported format: the one entry point of this room."""
from pathlib import Path
from typing import Callable, List, Tuple, Union

from . import bilm_hdf5, hf_bert, hf_gpt, ours
from .checkpoint import Checkpoint
from .errors import CheckpointError

READERS: List[Tuple[Callable[[Path], bool], Callable[[Path], Checkpoint]]] = [
    (ours.detect, ours.read),
    (hf_bert.detect, hf_bert.read),
    (hf_gpt.detect, hf_gpt.read),
    (bilm_hdf5.detect, bilm_hdf5.read),
]


def read_checkpoint(path: Union[str, Path]) -> Checkpoint:
    """Read a checkpoint of any supported format from `path`.

    Supported: our own format, Hugging Face BERT, GPT-2 and GPT-1 directories, and
    bilm-tf ELMo directories (options.json + an HDF5 weight file).
    """
    directory = Path(path)
    if not directory.exists():
        raise CheckpointError(f"Checkpoint not found: {directory}")
    if not directory.is_dir():
        raise CheckpointError(f"A checkpoint is a directory; {directory} is a file")
    for detect, read in READERS:
        if detect(directory):
            return read(directory)
    raise CheckpointError(
        f"{directory} holds no checkpoint that spacy-bertfam can read: expected our own "
        "format (config.json with a 'spacy_bertfam' section) or a Hugging Face BERT, "
        "GPT-2 or GPT-1 directory (config.json with model_type 'bert', 'gpt2' or 'openai-gpt'), "
        "or a bilm-tf ELMo directory (options.json + one .hdf5 weight file)"
    )


