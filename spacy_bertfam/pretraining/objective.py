"""What the pretraining loop needs from a model family's objective.

The loop (`trainer.py`) is family-neutral: it streams documents, asks the objective
to turn them into examples and batches, and sums the objective's loss over
micro-batches and processes. Losses are *sums* divided by global counts (masked
positions, predicted pieces, sequences) that the loop adds up over the whole global
batch first, so the gradient is the same however the batch is split.
"""
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import torch
from torch import nn

from .documents import DocKey
from .stream import ExampleMaker, Numbered

Batch = Dict[str, Any]  # tensors, plus "counts": Dict[str, float] for the normalisers


class Objective:
    """Base class: one per family (BERT MLM+NSP, GPT causal LM, ELMo biLM)."""

    family: str = ""
    unit: str = "pieces"  # what the speed figure counts

    def initial_model(self, train_documents: Iterator[Tuple[DocKey, str]]) -> nn.Module:
        """The model to start from (fresh, or read from the configured checkpoint);
        may train a vocabulary on `train_documents` first."""
        raise NotImplementedError

    def save(self, model: nn.Module, directory: Path) -> None:
        """Write `model` (and its vocabulary) as a checkpoint in the library's format."""
        raise NotImplementedError

    def load(self, directory: Path) -> nn.Module:
        """The model saved by `save` (restores the vocabulary too)."""
        raise NotImplementedError

    def maker(self) -> ExampleMaker:
        raise NotImplementedError

    def length(self, example: Any) -> int:
        return len(example)

    def collate(self, examples: List[Numbered]) -> Batch:
        raise NotImplementedError

    def loss(self, model: nn.Module, batch: Batch, totals: Dict[str, float]) -> Tuple[torch.Tensor, Dict[str, float]]:
        """This micro-batch's share of the global loss, and summed statistics
        (loss parts, correct predictions) for the log, keyed like `totals`' parts."""
        raise NotImplementedError

    def heldout(self, documents: Iterator[Tuple[DocKey, str]]) -> List[Batch]:
        """Fixed evaluation batches from held-out documents (scored with `loss` and `report`)."""
        raise NotImplementedError

    def report(self, stats: Dict[str, float], totals: Dict[str, float]) -> Dict[str, float]:
        """Readable figures (mean losses, accuracies) from summed stats and counts."""
        raise NotImplementedError
