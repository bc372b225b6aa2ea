"""GPT's objective: the causal language model (predict every next piece).

Documents are encoded with byte-level BPE, joined with <|endoftext|> between them
and cut into consecutive blocks of `block_size + 1` pieces (inputs and shifted
targets); a block may span a document boundary, as in GPT-2's training.
"""
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..convert import Checkpoint, load_state
from ..errors import ConfigError
from ..models.gpt import GptConfig, GptDecoder
from ..tokenization import PieceTokenizer, byte_bpe_from_files, train_byte_bpe
from ..tokenization.bpe import END_OF_TEXT
from .documents import DocKey, first_texts
from .objective import Batch, Objective
from .stream import ExampleMaker, Numbered

logger = logging.getLogger("spacy_bertfam")


class BlockMaker(ExampleMaker):
    """Documents -> one piece stream -> blocks; the unfinished tail waits for the next document."""

    def __init__(self, tokenizer: PieceTokenizer, length: int, separator: int, chunk_chars: int = 100_000):
        super().__init__()
        self.tokenizer = tokenizer
        self.length = length
        self.separator = separator
        self.chunk_chars = chunk_chars
        self.carry = np.zeros(0, dtype=np.int64)

    def make(self, key: DocKey, text: str) -> List[np.ndarray]:
        """Append this document's pieces and the separator to the stream; the full blocks of `length`
        pieces (the tail waits for the next document)."""
        # Long documents are encoded in chunks cut at line breaks (the tokenizer is
        # fast on many medium strings, slow on one huge one).
        pieces = [ids for ids, _ in self.tokenizer.encode_plain(_chunks(text, self.chunk_chars))]
        stream = np.concatenate([self.carry, *pieces, [self.separator]]).astype(np.int64)
        n = len(stream) // self.length
        self.carry = stream[n * self.length :]
        return list(stream[: n * self.length].reshape(n, self.length))

    def state_dict(self) -> Dict[str, Any]:
        """Pending blocks and the unfinished tail of the piece stream, for resuming."""
        return {**super().state_dict(), "carry": self.carry}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
        super().load_state_dict(state)
        self.carry = state["carry"]


def _chunks(text: str, size: int) -> List[str]:
    out, start = [], 0
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end + 1
        out.append(text[start:end])
        start = end
    return out


@dataclass(kw_only=True)
class GptPretraining(Objective):
    """Causal LM from scratch (byte-level BPE trained on the corpus, or GPT-2's
    vocabulary) or continued from `init`."""

    family = "gpt"
    unit = "pieces"

    init: Optional[Path]
    config: GptConfig
    dropout: float
    block_size: int
    gpt2_vocab: Optional[Path]
    vocab_documents: int
    heldout_examples: int

    def new_model(self, train_documents: Iterator[Tuple[DocKey, str]]) -> nn.Module:
        """A new GptDecoder of `config`'s sizes; GPT-2's vocabulary from `gpt2_vocab`, or a byte-level BPE trained on the corpus."""
        if self.gpt2_vocab is not None:
            tokenizer = byte_bpe_from_files(self.gpt2_vocab / "encoder.json", self.gpt2_vocab / "vocab.bpe")
        else:
            texts = first_texts(train_documents, self.vocab_documents)
            tokenizer = train_byte_bpe(texts, vocab_size=self.config.n_pieces)
            logger.info("Trained a byte-level BPE of %d pieces", tokenizer.n_pieces)
        self.tokenizer = tokenizer
        return GptDecoder(self._with_dropout(replace(self.config, n_pieces=tokenizer.n_pieces)))

    def _with_dropout(self, config: GptConfig) -> GptConfig:
        return replace(config, embedding_dropout=self.dropout, residual_dropout=self.dropout,
                       attention_dropout=self.dropout)

    def from_checkpoint(self, checkpoint: Checkpoint) -> GptDecoder:
        """GptDecoder with the checkpoint's sizes, vocabulary and weights, and this objective's dropout."""
        if checkpoint.tokenizer is None:
            raise ConfigError(f"{checkpoint.source} has no tokenizer")
        if checkpoint.config.n_positions < self.block_size:
            raise ConfigError(f"block_size {self.block_size} exceeds the model's {checkpoint.config.n_positions} positions")
        self.tokenizer = checkpoint.tokenizer
        model = GptDecoder(self._with_dropout(checkpoint.config))
        load_state(model, checkpoint.state, source=checkpoint.source)
        return model

    def maker(self) -> BlockMaker:
        """A BlockMaker of block_size + 1 pieces per block (inputs and shifted targets)."""
        return BlockMaker(self.tokenizer, self.block_size + 1, self.tokenizer.piece_id(END_OF_TEXT))

    def collate(self, examples: List[Numbered]) -> Batch:
        """The blocks stacked; counts predicted pieces (block_size per block) and sequences."""
        blocks = torch.from_numpy(np.stack([block for _, block in examples]))
        return {"blocks": blocks, "counts": {"pieces": float(blocks[:, 1:].numel()), "sequences": float(len(blocks))}}

    def loss(self, model: nn.Module, batch: Batch, totals: Dict[str, float]) -> Tuple[torch.Tensor, Dict[str, float]]:
        """Next-piece cross-entropy summed over the micro-batch / global predicted pieces."""
        blocks = batch["blocks"]
        logits = model.logits(model(blocks[:, :-1]).layers[-1])
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), blocks[:, 1:].reshape(-1), reduction="sum")
        return nll / totals["pieces"], {"nll": float(nll.detach())}

    def report(self, stats: Dict[str, float], totals: Dict[str, float]) -> Dict[str, float]:
        """loss (mean NLL per piece) and ppl."""
        loss = stats["nll"] / totals["pieces"]
        return {"loss": loss, "ppl": float(np.exp(min(loss, 50.0)))}
