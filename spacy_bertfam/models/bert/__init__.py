"""BERT: config, encoder and pretraining heads."""
from .config import BertConfig
from .encoder import BertEncoder
from .heads import PRETRAINING_HEADS, BertForPretraining, MaskedLMHead, NextSentenceHead

__all__ = ["PRETRAINING_HEADS", "BertConfig", "BertEncoder", "BertForPretraining", "MaskedLMHead", "NextSentenceHead"]
