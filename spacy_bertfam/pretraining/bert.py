"""BERT's pretraining objective: masked LM + next-sentence prediction (Devlin et al. 2018).

Documents are split into sentences by spaCy's rule-based `sentencizer`, sentences
into WordPiece pieces; `nsp.document_instances` pairs them and `masking` corrupts
each instance when it is batched, from a seed derived from the instance's number in
the stream (dynamic masking that every process of a distributed run agrees on).
Loss = mean MLM cross-entropy over the selected positions + mean NSP cross-entropy.
"""
import logging
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Deque, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import spacy
import torch
import torch.nn.functional as F
from torch import nn

from ..convert import Checkpoint, load_state
from ..errors import ConfigError
from ..models.bert import PRETRAINING_HEADS, BertConfig, BertForPretraining
from ..tokenization import PieceTokenizer, load_tokenizer, train_wordpiece
from .documents import DocKey, first_texts, paragraphs
from .masking import MaskingScheme
from .nsp import Instance, Sentence, document_instances
from .objective import Batch, Objective
from .stream import ExampleMaker, Numbered

logger = logging.getLogger("spacy_bertfam")



class SentenceSplitter:
    """Text -> sentences of pieces, with spaCy's rule-based sentencizer."""

    def __init__(self, tokenizer: PieceTokenizer):
        self.nlp = spacy.blank("en")
        self.nlp.add_pipe("sentencizer")
        self.tokenizer = tokenizer

    def __call__(self, text: str) -> List[Sentence]:
        sentences = [s.text for doc in self.nlp.pipe(paragraphs(text)) for s in doc.sents if s.text.strip()]
        encoded = self.tokenizer.encode_plain(sentences)
        return [Sentence(ids.astype(np.int32), starts) for ids, starts in encoded if len(ids)]


class InstanceMaker(ExampleMaker):
    """Documents -> NSP instances; keeps the last `pool_size` documents for NotNext, which is
    never drawn from the document itself (a small corpus's pool holds its earlier epoch)."""

    def __init__(self, splitter: SentenceSplitter, *, seed: int, pool_size: int, max_length: int,
                 short_seq_prob: float, cls_id: int, sep_id: int):
        super().__init__()
        self.split = splitter
        self.seed = seed
        self.settings = dict(max_length=max_length, short_seq_prob=short_seq_prob, cls_id=cls_id, sep_id=sep_id)
        self.pool: Deque[Tuple[int, List[Sentence]]] = deque(maxlen=pool_size)  # (document index, sentences)
        self.waiting: List[Tuple[DocKey, List[Sentence]]] = []

    def make(self, key: DocKey, text: str) -> List[Instance]:
        """This document's NSP instances, NotNext segments drawn from the pool; the very first document
        waits for a second one."""
        doc = self.split(text)
        if not doc:
            return []
        if not self.pool:  # the very first document waits for another to draw NotNext from
            self.pool.append((key[1], doc))
            self.waiting.append((key, doc))
            return []
        out = []
        for waiting_key, waiting_doc in self.waiting:
            out += self._instances(waiting_key, waiting_doc, [(key[1], doc)])
        self.waiting = []
        out += self._instances(key, doc, self.pool)
        self.pool.append((key[1], doc))
        return out

    def _instances(self, key: DocKey, doc: List[Sentence], pool: Sequence[Tuple[int, List[Sentence]]]
                   ) -> List[Instance]:
        others = [other for index, other in pool if index != key[1]]
        if not others:
            raise ConfigError(
                "Next-sentence prediction draws its NotNext segments from other documents, but the "
                "training corpus has one document only: give it more (e.g. the text corpus's "
                "split = \"passages\" instead of \"chapters\")"
            )
        rng = np.random.default_rng([self.seed, 1, *key])
        return document_instances(doc, others, rng, **self.settings)

    def state_dict(self) -> Dict[str, Any]:
        """Pending instances, the document pool and the waiting document, for resuming."""
        return {**super().state_dict(), "pool": list(self.pool), "waiting": list(self.waiting)}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
        if any(not isinstance(entry, tuple) for entry in state["pool"]):
            raise ConfigError("This pretraining state was saved by an earlier version of spacy-bertfam, "
                             "whose NSP pool did not record documents: start the pretraining again")
        super().load_state_dict(state)
        self.pool = deque(state["pool"], maxlen=self.pool.maxlen)
        self.waiting = list(state["waiting"])


@dataclass(kw_only=True)
class BertPretraining(Objective):
    """MLM + NSP from scratch (new WordPiece vocabulary) or continued from `init`.

    init: a BERT checkpoint (ours or Hugging Face) to continue pretraining; its
        sizes and vocabulary are used, and missing MLM/NSP heads are created fresh
        (logged). None: a new model with `config`, vocabulary trained on the corpus.
    vocab: a vocabulary for a new model (`tokenizer.json`, WordPiece `vocab.txt` or a
        directory of either); None trains one of `config.n_pieces` on the corpus.
    config: model sizes for a new model (its n_pieces is the vocabulary size to train).
    dropout: hidden and attention dropout during pretraining (0.1 in the paper).
    """

    family = "bert"
    unit = "pieces"
    state_types = (Instance, Sentence)  # instances waiting in the stream

    init: Optional[Path]
    vocab: Optional[Path]
    config: BertConfig
    dropout: float
    max_length: int
    short_seq_prob: float
    mask_rate: float
    whole_word: bool
    pool_size: int
    lowercase: Optional[bool]
    vocab_documents: int
    heldout_examples: int
    seed: int

    # -- model -------------------------------------------------------------
    def new_model(self, train_documents: Iterator[Tuple[DocKey, str]]) -> nn.Module:
        """A new BertForPretraining of `config`'s sizes; WordPiece vocabulary from `vocab` or trained on the corpus."""
        if self.vocab is not None:
            tokenizer = load_tokenizer(self.vocab, lowercase=self.lowercase)
        else:
            texts = first_texts(train_documents, self.vocab_documents)
            tokenizer = train_wordpiece(texts, vocab_size=self.config.n_pieces,
                                        lowercase=self.lowercase is not False)
            logger.info("Trained a WordPiece vocabulary of %d pieces", tokenizer.n_pieces)
        self._use(tokenizer)
        config = replace(self.config, n_pieces=tokenizer.n_pieces, hidden_dropout=self.dropout,
                         attention_dropout=self.dropout)
        return BertForPretraining(config)

    def from_checkpoint(self, checkpoint: Checkpoint) -> BertForPretraining:
        """BertForPretraining with the checkpoint's sizes, vocabulary and weights; missing MLM/NSP heads start fresh."""
        if checkpoint.tokenizer is None:
            raise ConfigError(f"{checkpoint.source} has no tokenizer")
        self._use(checkpoint.tokenizer)
        config = replace(checkpoint.config, hidden_dropout=self.dropout, attention_dropout=self.dropout)
        if config.n_positions < self.max_length:
            raise ConfigError(f"max_length {self.max_length} exceeds the model's {config.n_positions} positions")
        model = BertForPretraining(config)
        load_state(model, checkpoint.state, source=checkpoint.source, optional=PRETRAINING_HEADS)
        return model

    def _use(self, tokenizer: PieceTokenizer) -> None:
        self.tokenizer = tokenizer
        self.ids = {p: tokenizer.piece_id(p) for p in ("[CLS]", "[SEP]", "[MASK]", "[PAD]")}
        self.scheme = MaskingScheme(self.ids["[MASK]"], tokenizer.special_ids(), tokenizer.n_pieces,
                                    rate=self.mask_rate, whole_word=self.whole_word)

    # -- data --------------------------------------------------------------
    def maker(self) -> InstanceMaker:
        """An InstanceMaker: documents -> sentences (spaCy's sentencizer) -> NSP instances."""
        return InstanceMaker(SentenceSplitter(self.tokenizer), seed=self.seed, pool_size=self.pool_size,
                             max_length=self.max_length, short_seq_prob=self.short_seq_prob,
                             cls_id=self.ids["[CLS]"], sep_id=self.ids["[SEP]"])

    def collate(self, examples: List[Numbered]) -> Batch:
        """Padded instances, masked with seeds from their numbers; MLM labels (-100: unselected), NSP labels (1: NotNext)."""
        B, T = len(examples), max(len(e) for _, e in examples)
        ids = np.full((B, T), self.ids["[PAD]"], dtype=np.int64)
        labels = np.full((B, T), -100, dtype=np.int64)
        types = np.zeros((B, T), dtype=np.int64)
        mask = np.zeros((B, T), dtype=bool)
        for row, (number, inst) in enumerate(examples):
            corrupted, selected = self.scheme(inst.ids, inst.word_start, np.random.default_rng([self.seed, 2, number]))
            n = len(inst)
            ids[row, :n] = corrupted
            labels[row, :n][selected] = inst.ids[selected]
            types[row, inst.n_first:n] = 1
            mask[row, :n] = True
        next_labels = np.asarray([0 if inst.is_next else 1 for _, inst in examples])
        return {
            "ids": torch.from_numpy(ids), "types": torch.from_numpy(types), "mask": torch.from_numpy(mask),
            "labels": torch.from_numpy(labels), "next": torch.from_numpy(next_labels),
            "counts": {"masked": float((labels >= 0).sum()), "sequences": float(B), "pieces": float(mask.sum())},
        }

    # -- loss --------------------------------------------------------------
    def loss(self, model: nn.Module, batch: Batch, totals: Dict[str, float]) -> Tuple[torch.Tensor, Dict[str, float]]:
        """MLM cross-entropy / global masked positions + NSP cross-entropy / global sequences."""
        out = model(batch["ids"], batch["mask"], batch["types"])
        selected = batch["labels"] >= 0
        # The MLM head runs on the selected positions only, as the reference does.
        logits = model.mlm_head(out.last_hidden[selected])
        targets = batch["labels"][selected]
        mlm = F.cross_entropy(logits, targets, reduction="sum")
        nsp_logits = model.nsp_head(out.pooled)
        nsp = F.cross_entropy(nsp_logits, batch["next"], reduction="sum")
        loss = mlm / max(totals["masked"], 1.0) + nsp / totals["sequences"]
        stats = {
            "mlm_loss": float(mlm.detach()), "nsp_loss": float(nsp.detach()),
            "mlm_correct": float((logits.argmax(-1) == targets).sum()),
            "nsp_correct": float((nsp_logits.argmax(-1) == batch["next"]).sum()),
        }
        return loss, stats

    def report(self, stats: Dict[str, float], totals: Dict[str, float]) -> Dict[str, float]:
        """loss, mlm_loss, mlm_ppl, mlm_acc (per masked position) and nsp_loss, nsp_acc (per sequence)."""
        masked, sequences = max(totals["masked"], 1.0), totals["sequences"]
        mlm = stats["mlm_loss"] / masked
        return {"loss": mlm + stats["nsp_loss"] / sequences, "mlm_loss": mlm,
                "mlm_ppl": float(np.exp(min(mlm, 50.0))), "mlm_acc": stats["mlm_correct"] / masked,
                "nsp_loss": stats["nsp_loss"] / sequences, "nsp_acc": stats["nsp_correct"] / sequences}
