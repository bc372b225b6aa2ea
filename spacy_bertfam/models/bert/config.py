"""BERT hyper-parameters, with the defaults of BERT-base (Devlin et al. 2018)."""
from dataclasses import dataclass

from ..config import DictConfig


@dataclass
class BertConfig(DictConfig):
    """Hyper-parameters of a BERT encoder.

    n_pieces (int): vocabulary size (WordPiece pieces).
    hidden_width (int): width of every layer's output.
    n_layers (int): number of transformer blocks.
    n_heads (int): attention heads per block.
    intermediate_width (int): feed-forward inner width (4 × hidden_width in the paper).
    n_positions (int): number of learned positions: the longest window the model can read.
    n_types (int): segment (token type) vocabulary; 2 for sentence pairs.
    hidden_dropout (float): dropout on embeddings and sublayer outputs.
    attention_dropout (float): dropout on attention probabilities.
    layer_norm_eps (float): LayerNorm epsilon (1e-12 in the released checkpoints).
    activation (str): feed-forward activation; BERT uses exact "gelu".
    padding_id (int): id of [PAD].
    """

    n_pieces: int = 30522
    hidden_width: int = 768
    n_layers: int = 12
    n_heads: int = 12
    intermediate_width: int = 3072
    n_positions: int = 512
    n_types: int = 2
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    activation: str = "gelu"
    padding_id: int = 0
