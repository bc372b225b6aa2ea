"""Tokenization: pieces with offsets, vocabularies, alignment to spaCy tokens."""
from .bpe import byte_bpe_from_files, gpt1_bpe_from_files, load_bpe, train_byte_bpe
from .pieces import Encoded, PieceTokenizer
from .wordpiece import load_tokenizer, load_wordpiece, train_wordpiece, wordpiece_from_vocab

__all__ = [
    "byte_bpe_from_files", "gpt1_bpe_from_files", "load_bpe", "train_byte_bpe", "Encoded", "PieceTokenizer",
    "load_tokenizer", "load_wordpiece", "train_wordpiece", "wordpiece_from_vocab",
]
