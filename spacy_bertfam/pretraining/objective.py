"""What the pretraining loop needs from a model family's objective.

The loop (`trainer.py`) is family-neutral: it streams documents, asks the objective
to turn them into examples and batches, and sums the objective's loss over
micro-batches and processes. Losses are *sums* divided by global counts (masked
positions, predicted pieces, sequences) that the loop adds up over the whole global
batch first, so the gradient is the same however the batch is split.
"""
import logging
from itertools import islice
from pathlib import Path
from typing import Any, ClassVar, Dict, Iterator, List, Optional, Tuple

import torch
from torch import nn

from ..convert import Checkpoint, CheckpointError, read_checkpoint, save_checkpoint
from ..errors import ConfigError
from ..tokenization import PieceTokenizer
from .documents import DocKey
from .stream import ExampleMaker, Numbered

logger = logging.getLogger("spacy_bertfam")

Batch = Dict[str, Any]  # tensors, plus "counts": Dict[str, float] for the normalisers
HELDOUT_NUMBERS = 10**15  # held-out examples are numbered (e.g. masked) apart from training's


class Objective:
    """Base class: one per family (BERT MLM+NSP, GPT causal LM, ELMo biLM).

    A family implements `new_model`, `from_checkpoint`, `maker`, `collate`, `loss` and
    `report` (and `length` where an example's size is not its len()). The loop calls
    `initial_model` (fresh runs only), then `load` in every process: the model they
    return comes with the vocabulary that `maker`, `collate` and `save` use, so those
    run after one of them. `maker` turns documents into examples, `collate` numbered
    examples into a batch with counts, `loss` runs on each micro-batch with the counts
    summed over the global batch, and `report` turns summed stats into logged figures.
    """

    family: str = ""
    unit: str = "pieces"  # what the speed figure counts
    heldout_examples: int = 512  # examples in the fixed held-out set
    # Classes the data stream's state holds, allowed when `training_state.pt` is read.
    state_types: ClassVar[Tuple[type, ...]] = ()

    init: Optional[Path] = None  # a checkpoint to continue from; None starts a new model
    tokenizer: Optional[PieceTokenizer] = None

    def initial_model(self, train_documents: Iterator[Tuple[DocKey, str]]) -> nn.Module:
        """The model to start from: read from `init`, or new (its vocabulary
        trained on `train_documents` where the family needs one)."""
        if self.init is None:
            return self.new_model(train_documents)
        checkpoint = read_checkpoint(self.init)
        if checkpoint.family != self.family:
            raise CheckpointError(f"{self.init} is a {checkpoint.family} checkpoint; this objective needs {self.family}")
        logger.info("Continuing pretraining from %s: its sizes and vocabulary are used, not the new-model "
                    "settings of [objective]", self.init)
        return self.from_checkpoint(checkpoint)

    def new_model(self, train_documents: Iterator[Tuple[DocKey, str]]) -> nn.Module:
        """A new model with its pretraining heads; builds its vocabulary (read, or trained on
        `train_documents`) and keeps it for `save`, `maker` and `collate`."""
        raise NotImplementedError

    def from_checkpoint(self, checkpoint: Checkpoint) -> nn.Module:
        """The model (pretraining heads included) holding `checkpoint`'s weights."""
        raise NotImplementedError

    def save(self, model: nn.Module, directory: Path) -> None:
        """Write `model` (and its vocabulary) as a checkpoint in the library's format."""
        save_checkpoint(directory, Checkpoint(self.family, model.config, model.state_dict(), self.tokenizer,
                                              "bertfam-pretrain"))

    def load(self, directory: Path) -> nn.Module:
        """The model saved by `save`."""
        return self.from_checkpoint(read_checkpoint(directory))

    def maker(self) -> ExampleMaker:
        """A fresh ExampleMaker that turns (key, text) documents into this family's examples."""
        raise NotImplementedError

    def length(self, example: Any) -> int:
        """An example's size in the units that [training] batch_pieces counts (default: its len())."""
        return len(example)

    def collate(self, examples: List[Numbered]) -> Batch:
        """A batch of tensors from numbered examples, with `counts` that `loss` divides by once the loop
        has summed them over the global batch; per-example randomness (e.g. masking) comes from the
        example numbers, so every process agrees."""
        raise NotImplementedError

    def loss(self, model: nn.Module, batch: Batch, totals: Dict[str, float]) -> Tuple[torch.Tensor, Dict[str, float]]:
        """This micro-batch's share of the global loss, and summed statistics
        (loss parts, correct predictions) for the log, keyed like `totals`' parts."""
        raise NotImplementedError

    def heldout(self, documents: Iterator[Tuple[DocKey, str]], batch_size: int = 32) -> List[Batch]:
        """Fixed evaluation batches: the first `heldout_examples` examples of the
        held-out documents (scored with `loss` and `report`)."""
        examples = list(islice(self.maker().examples(documents), self.heldout_examples))
        if not examples:
            raise ConfigError(f"The held-out documents give no {self.family} examples: hold out more "
                             "documents ([corpus] heldout_every)")
        numbered = [(HELDOUT_NUMBERS + i, e) for i, e in enumerate(examples)]
        return [self.collate(numbered[i : i + batch_size]) for i in range(0, len(numbered), batch_size)]

    def report(self, stats: Dict[str, float], totals: Dict[str, float]) -> Dict[str, float]:
        """Readable figures (mean losses, accuracies) from summed stats and counts."""
        raise NotImplementedError
