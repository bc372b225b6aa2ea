"""ELMo: character CNN + biLSTM language model."""
from .bilm import BiState, ElmoBiLM
from .config import ElmoConfig

__all__ = ["BiState", "ElmoBiLM", "ElmoConfig"]
