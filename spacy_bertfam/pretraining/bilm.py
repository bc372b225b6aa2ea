"""ELMo's objective: forward and backward word-level LMs over a character-CNN input.

Words are spaCy tokens (the blank English tokenizer, whitespace tokens dropped), so
pretraining sees the tokens the `elmo_features` component will see; the word stream
is cut into sequences of `sequence_length` words, each wrapped in <S> ... </S>. The
softmax is over the `n_words` most frequent training words (+ <S>, </S>, <UNK>),
saved beside the checkpoint as words.txt; "adaptive" keeps it cheap.
"""
import logging
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import spacy
import torch
from torch import nn

from ..convert import Checkpoint, load_state
from ..errors import ConfigError
from ..models.elmo import ElmoBiLM, ElmoConfig
from ..tokenization.characters import BOS_TOKEN, EOS_TOKEN, batch_char_ids
from .documents import DocKey, first_texts, paragraphs
from .objective import Batch, Objective
from .stream import ExampleMaker, Numbered

logger = logging.getLogger("spacy_bertfam")

UNK = "<UNK>"
WORDS_FILE = "words.txt"


class WordSplitter:
    """Text -> the words the biLM predicts: spaCy's blank English tokens, whitespace tokens dropped."""

    def __init__(self) -> None:
        self.nlp = spacy.blank("en")

    def __call__(self, text: str) -> List[str]:
        return [t.text for doc in self.nlp.pipe(paragraphs(text)) for t in doc if not t.is_space]


def build_vocab(words: Sequence[str], size: int) -> Dict[str, int]:
    """The softmax vocabulary (word -> id): <S>, </S>, <UNK>, then the most frequent `words`,
    `size` in all."""
    vocab = {BOS_TOKEN: 0, EOS_TOKEN: 1, UNK: 2}
    for word, _ in Counter(words).most_common(size - len(vocab)):
        vocab.setdefault(word, len(vocab))
    return vocab


class SequenceMaker(ExampleMaker):
    """Documents -> one word stream -> sequences of `length` words."""

    def __init__(self, length: int):
        super().__init__()
        self.split = WordSplitter()
        self.length = length
        self.carry: List[str] = []

    def make(self, key: DocKey, text: str) -> List[List[str]]:
        """Sequences of `length` words from the word stream; the rest waits for the next document."""
        words = self.carry + self.split(text)
        n = len(words) // self.length
        self.carry = words[n * self.length :]
        return [words[i * self.length : (i + 1) * self.length] for i in range(n)]

    def state_dict(self) -> Dict[str, Any]:
        """Pending sequences and the words carried over, for resuming."""
        return {**super().state_dict(), "carry": list(self.carry)}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
        super().load_state_dict(state)
        self.carry = list(state["carry"])


@dataclass(kw_only=True)
class ElmoPretraining(Objective):
    """The biLM from scratch, or continued from one of our ELMo checkpoints (`init`)."""

    family = "elmo"
    unit = "words"

    init: Optional[Path]
    config: ElmoConfig
    sequence_length: int
    vocab_documents: int
    heldout_examples: int
    vocab: Dict[str, int] = field(default_factory=dict, init=False)  # the softmax words

    def new_model(self, train_documents: Iterator[Tuple[DocKey, str]]) -> nn.Module:
        """A new ElmoBiLM; its softmax: <S>, </S>, <UNK> and the most frequent words of the first `vocab_documents` documents."""
        split = WordSplitter()
        words = [w for text in first_texts(train_documents, self.vocab_documents) for w in split(text)]
        self.vocab = build_vocab(words, self.config.n_words)
        logger.info("Softmax vocabulary: %d words", len(self.vocab))
        return ElmoBiLM(replace(self.config, n_words=len(self.vocab)))

    def save(self, model: nn.Module, directory: Path) -> None:
        """The checkpoint plus words.txt, the softmax vocabulary that continued pretraining needs."""
        super().save(model, directory)
        (directory / WORDS_FILE).write_text("\n".join(self.vocab), encoding="utf8")

    def from_checkpoint(self, checkpoint: Checkpoint) -> nn.Module:
        """ElmoBiLM with the checkpoint's sizes and weights and its words.txt vocabulary; dropout from `config`."""
        words = Path(checkpoint.source) / WORDS_FILE
        if not words.is_file():
            raise ConfigError(f"{checkpoint.source} has no {WORDS_FILE}: only ELMo checkpoints written by "
                             "bertfam-pretrain carry the softmax vocabulary that pretraining continues with")
        self.vocab = {w: i for i, w in enumerate(words.read_text(encoding="utf8").split("\n"))}
        model = ElmoBiLM(replace(checkpoint.config, dropout=self.config.dropout))
        load_state(model, checkpoint.state, source=checkpoint.source)
        return model

    def maker(self) -> SequenceMaker:
        """A SequenceMaker of `sequence_length` words per sequence."""
        return SequenceMaker(self.sequence_length)

    def collate(self, examples: List[Numbered]) -> Batch:
        """Character ids of the <S> words </S> rows, their softmax ids and mask; counts words and predicted positions."""
        seqs = [s for _, s in examples]
        chars = torch.from_numpy(batch_char_ids(seqs, self.config.max_chars))
        rows = [[BOS_TOKEN, *s, EOS_TOKEN] for s in seqs]
        T = chars.shape[1]
        ids = torch.tensor([[self.vocab.get(w, self.vocab[UNK]) for w in r] + [0] * (T - len(r)) for r in rows])
        mask = torch.tensor([[True] * len(r) + [False] * (T - len(r)) for r in rows])
        predicted = float(sum(len(r) - 1 for r in rows))
        return {"chars": chars, "ids": ids, "mask": mask,
                "counts": {"words": float(sum(map(len, seqs))), "predicted": predicted}}

    def loss(self, model: nn.Module, batch: Batch, totals: Dict[str, float]) -> Tuple[torch.Tensor, Dict[str, float]]:
        """Forward + backward word NLL summed over the batch / global predicted positions."""
        out, _ = model(batch["chars"], batch["mask"])
        fwd, bwd = model.lm_loss(out, batch["ids"], batch["mask"])  # means over this batch
        n = batch["counts"]["predicted"]
        stats = {"forward_nll": float(fwd.detach()) * n, "backward_nll": float(bwd.detach()) * n}
        return (fwd + bwd) * n / totals["predicted"], stats

    def report(self, stats: Dict[str, float], totals: Dict[str, float]) -> Dict[str, float]:
        """loss (forward + backward mean NLL), forward_ppl and backward_ppl."""
        fwd, bwd = stats["forward_nll"] / totals["predicted"], stats["backward_nll"] / totals["predicted"]
        return {"loss": fwd + bwd, "forward_ppl": float(np.exp(min(fwd, 50.0))),
                "backward_ppl": float(np.exp(min(bwd, 50.0)))}
