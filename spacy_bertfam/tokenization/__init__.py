"""Tokenization: pieces with offsets, vocabularies, alignment to spaCy tokens."""
from .pieces import Encoded, PieceTokenizer
from .wordpiece import load_wordpiece, train_wordpiece, wordpiece_from_vocab

__all__ = ["Encoded", "PieceTokenizer", "load_wordpiece", "train_wordpiece", "wordpiece_from_vocab"]
