"""Registered functions for pretraining configs (`configs/pretrain_*.cfg`).

[corpus] names the text and how it splits into documents; [objective] the family
and its objective; [training] is a plain block of `TrainingSettings`.
"""
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

import torch
from spacy.util import registry
from torch import nn

from ..errors import ConfigError, as_config_error
from ..models.bert import BertConfig, BertEncoder
from ..models.elmo import ElmoBiLM, ElmoConfig
from ..models.gpt import GptConfig, GptDecoder
from ..pretrained import checkpoint_path
from .bert import BertPretraining
from .bilm import ElmoPretraining
from .causal_lm import GptPretraining
from .documents import DEFAULT_HEADING, DocumentReader, corpus_files


@dataclass
class TextCorpus:
    """Where the pretraining text is and how it splits into documents."""

    files: List[Path]
    split: str
    heading: str
    heldout_every: int
    extra_heldout: Dict[str, List[Path]]

    def reader(self, part: str) -> DocumentReader:
        """A DocumentReader of this corpus for `part` ("train", "heldout" or "all")."""
        return DocumentReader(self.files, split=self.split, heading=self.heading, part=part,
                              heldout_every=self.heldout_every)

    def heldout_readers(self) -> Dict[str, DocumentReader]:
        """Evaluation sets by name: "eval" (the held-out documents) and each extra corpus."""
        extra = {f"eval_{name}": DocumentReader(files, split=self.split, heading=self.heading, part="all")
                 for name, files in self.extra_heldout.items()}
        return {"eval": self.reader("heldout"), **extra}


@registry.misc("spacy-bertfam.TextCorpus.v1")
def text_corpus(path: Union[str, List[str]], split: str = "chapters", heading: Optional[str] = None,
                heldout_every: int = 50, extra_heldout: Dict[str, Union[str, List[str]]] = {}) -> TextCorpus:
    """Plain text (.txt) or JSONL ({"text": ...} per line) files, read lazily.

    path: a file, a directory (searched for .txt/.jsonl) or a list of them.
    split: "chapters" (a line matching `heading` starts a document), "passages"
        (blank lines separate documents) or "lines" (a document per line); JSONL
        records are documents whatever the split.
    heading: regular expression of a chapter heading (null: the default, which knows
        "CHAPTER 1", "CHAPTER XIV", "Genesis 1" and WikiText " = Title = " lines).
    heldout_every: every n-th document is held out for evaluation, never trained on.
    extra_heldout: more evaluation corpora by name (e.g. {"wikitext2": "wiki.test.txt"}),
        evaluated whole beside the held-out documents and logged as eval_<name>_*.
    """
    reader = DocumentReader(corpus_files(path), split=split, heading=heading or DEFAULT_HEADING,
                            heldout_every=heldout_every)
    extra = {name: corpus_files(paths) for name, paths in extra_heldout.items()}
    return TextCorpus(reader.files, reader.split, reader.heading, heldout_every, extra)


def _sized(config_class: Callable[..., Any], model_class: Callable[..., nn.Module], init: Optional[str],
           **sizes: Any) -> Any:
    """The family config of `sizes`. Without `init` (whose checkpoint's sizes count) the model is
    built on torch's meta device (no memory, no arithmetic), so that sizes its modules refuse,
    e.g. a width the heads do not divide, stop the command now as a config error rather than
    after the vocabulary is trained."""
    with as_config_error("objective"):
        config = config_class(**sizes)
        if init is None:
            with torch.device("meta"):
                model_class(config)
    return config


@registry.misc("spacy-bertfam.BertPretraining.v1")
def bert_pretraining(
    init: Optional[str] = None,
    vocab: Optional[str] = None,
    n_pieces: int = 8000,
    hidden_width: int = 256,
    n_layers: int = 4,
    n_heads: int = 4,
    intermediate_width: int = 1024,
    n_positions: int = 512,
    dropout: float = 0.1,
    max_length: int = 128,
    short_seq_prob: float = 0.1,
    mask_rate: float = 0.15,
    whole_word: bool = False,
    pool_size: int = 50,
    lowercase: Optional[bool] = None,
    vocab_documents: int = 100000,
    heldout_instances: int = 512,
    seed: int = 0,
) -> BertPretraining:
    """BERT masked LM (15%; 80/10/10) + next-sentence prediction (50/50).

    init: a BERT checkpoint (ours or Hugging Face) to continue pretraining from, or a
        packaged model's name ("all-MiniLM-L6-v2"); its sizes and vocabulary then
        replace n_pieces ... n_positions and lowercase.
    vocab: a vocabulary for a new model (tokenizer.json, WordPiece vocab.txt, or a
        directory holding one) instead of training one: training a vocabulary with
        `tokenizers` is not bit-reproducible, a given one is.
    n_pieces: size of the WordPiece vocabulary trained for a new model.
    dropout: hidden and attention dropout (0.1 in the paper).
    max_length: pieces per instance, [CLS] A [SEP] B [SEP] included.
    short_seq_prob: chance that a document's instances aim at a random shorter length.
    whole_word: mask all pieces of a word together.
    pool_size: recent documents that NotNext segments are drawn from.
    lowercase: null: a trained vocabulary is uncased, a given one is used as its files say;
        true/false: the casing, which a given vocabulary's files must not contradict.
    vocab_documents: documents read to train the vocabulary.
    heldout_instances: held-out instances evaluated at every evaluation.
    """
    config = _sized(BertConfig, BertEncoder, init, n_pieces=n_pieces, hidden_width=hidden_width, n_layers=n_layers,
                    n_heads=n_heads, intermediate_width=intermediate_width, n_positions=n_positions)
    if max_length > n_positions:
        raise ConfigError(f"[objective] max_length {max_length} exceeds n_positions {n_positions}")
    return BertPretraining(init=checkpoint_path(init) if init else None, vocab=Path(vocab) if vocab else None,
                           config=config, dropout=dropout, max_length=max_length,
                           short_seq_prob=short_seq_prob, mask_rate=mask_rate, whole_word=whole_word,
                           pool_size=pool_size, lowercase=lowercase, vocab_documents=vocab_documents,
                           heldout_examples=heldout_instances, seed=seed)


@registry.misc("spacy-bertfam.GptPretraining.v1")
def gpt_pretraining(
    init: Optional[str] = None,
    gpt2_vocab: Optional[str] = None,
    n_pieces: int = 8000,
    hidden_width: int = 256,
    n_layers: int = 4,
    n_heads: int = 4,
    intermediate_width: int = 1024,
    n_positions: int = 256,
    dropout: float = 0.0,
    block_size: int = 128,
    vocab_documents: int = 100000,
    heldout_blocks: int = 200,
) -> GptPretraining:
    """GPT's causal LM, from scratch or continued from `init` (ours or GPT-2/GPT-1 layout).

    gpt2_vocab: a folder with GPT-2's encoder.json + vocab.bpe; null trains a
        byte-level BPE of n_pieces on the corpus (ignored with init).
    block_size: pieces of context per training sequence.
    """
    config = _sized(GptConfig, GptDecoder, init, n_pieces=n_pieces, hidden_width=hidden_width, n_layers=n_layers,
                    n_heads=n_heads, intermediate_width=intermediate_width, n_positions=n_positions)
    if block_size > n_positions:
        raise ConfigError(f"[objective] block_size {block_size} exceeds n_positions {n_positions}")
    return GptPretraining(init=checkpoint_path(init) if init else None, config=config, dropout=dropout, block_size=block_size,
                          gpt2_vocab=Path(gpt2_vocab) if gpt2_vocab else None, vocab_documents=vocab_documents,
                          heldout_examples=heldout_blocks)


@registry.misc("spacy-bertfam.ElmoPretraining.v1")
def elmo_pretraining(
    init: Optional[str] = None,
    n_words: int = 20000,
    softmax: str = "adaptive",
    char_width: int = 16,
    filters: List[List[int]] = [[1, 32], [2, 32], [3, 64], [4, 128]],
    n_highway: int = 1,
    cell_width: int = 512,
    projection_width: int = 128,
    n_layers: int = 2,
    dropout: float = 0.1,
    sequence_length: int = 20,
    vocab_documents: int = 100000,
    heldout_sequences: int = 640,
) -> ElmoPretraining:
    """ELMo's biLM (forward + backward LM over a character CNN), from scratch or from `init`.

    n_words: softmax vocabulary (most frequent training words + <S>, </S>, <UNK>).
    char_width, filters ([width, count] pairs), n_highway: the character CNN.
    softmax: "adaptive" (cheap for large vocabularies) or "full".
    sequence_length: words per training sequence (between <S> and </S>).
    """
    config = _sized(ElmoConfig, ElmoBiLM, init, char_width=char_width, filters=[tuple(f) for f in filters],
                    n_highway=n_highway, cell_width=cell_width, projection_width=projection_width,
                    n_layers=n_layers, n_words=n_words, softmax=softmax, dropout=dropout)
    return ElmoPretraining(init=checkpoint_path(init) if init else None, config=config, sequence_length=sequence_length,
                           vocab_documents=vocab_documents, heldout_examples=heldout_sequences)
