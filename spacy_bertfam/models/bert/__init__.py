"""BERT: config, encoder and pretraining heads."""
from .config import BertConfig
from .encoder import BertEncoder
from .heads import BertForPretraining, MaskedLMHead, NextSentenceHead

__all__ = ["BertConfig", "BertEncoder", "BertForPretraining", "MaskedLMHead", "NextSentenceHead"]
