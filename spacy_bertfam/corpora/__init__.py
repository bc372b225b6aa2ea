"""Converters from the task datasets' formats to spaCy's DocBin corpora."""
from .conll import read_conll, read_conll_ner
from .textcat_csv import read_textcat_csv, split_heldout

__all__ = ["read_conll", "read_conll_ner", "read_textcat_csv", "split_heldout"]
