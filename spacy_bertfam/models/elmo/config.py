"""ELMo hyper-parameters (Peters et al. 2018; bilm-tf's options.json)."""
from dataclasses import dataclass, field
from typing import List, Tuple

from ..config import DictConfig


@dataclass
class ElmoConfig(DictConfig):
    """A character-CNN + biLSTM language model. Defaults: a small model for a 2-core CPU
    (the original ELMo is filters up to 1024 wide, cell 4096, projection 512).

    n_characters (int): character vocabulary (262: bytes, markers, padding, +1 mask).
    char_width (int): character embedding width (16).
    max_chars (int): characters per token (50).
    filters (List[Tuple[int, int]]): (width, number of filters) convolutions.
    n_highway (int): highway layers after the convolutions.
    activation (str): "relu" or "tanh" after max-pooling the convolutions.
    cell_width (int): LSTM memory cells.
    projection_width (int): LSTM output (and token representation) width.
    n_layers (int): LSTM layers per direction.
    cell_clip (float), projection_clip (float): clipping of memory and outputs (3).
    skip_connections (bool): residual connections from layer 1 upward.
    n_words (int): word vocabulary of the LM softmax (0: no softmax).
    softmax (str): "full", or "adaptive" (Grave et al. 2017) for large vocabularies.
    dropout (float): dropout between layers when training.
    """

    n_characters: int = 262
    char_width: int = 16
    max_chars: int = 50
    filters: List[Tuple[int, int]] = field(default_factory=lambda: [(1, 32), (2, 32), (3, 64), (4, 128)])
    n_highway: int = 1
    activation: str = "relu"
    cell_width: int = 512
    projection_width: int = 128
    n_layers: int = 2
    cell_clip: float = 3.0
    projection_clip: float = 3.0
    skip_connections: bool = True
    n_words: int = 0
    softmax: str = "full"
    dropout: float = 0.1

    def __post_init__(self) -> None:
        self.filters = [tuple(f) for f in self.filters]  # JSON gives lists
        if self.activation not in ("relu", "tanh"):
            raise ValueError(f"activation must be 'relu' or 'tanh', got '{self.activation}'")
        if self.softmax not in ("full", "adaptive"):
            raise ValueError(f"softmax must be 'full' or 'adaptive', got '{self.softmax}'")
