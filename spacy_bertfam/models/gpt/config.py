"""GPT hyper-parameters; one config covers GPT-1 (post-LN) and GPT-2 (pre-LN)."""
from dataclasses import dataclass

from ..config import DictConfig


@dataclass
class GptConfig(DictConfig):
    """Hyper-parameters of a GPT decoder. Defaults are GPT-2 small (Radford et al. 2019).

    n_pieces (int): vocabulary size (50257 for GPT-2, 40478 for GPT-1).
    hidden_width (int): width of every layer's output.
    n_layers (int): transformer blocks.
    n_heads (int): attention heads.
    intermediate_width (int): feed-forward inner width (4 × hidden_width).
    n_positions (int): learned positions: the longest context.
    embedding_dropout (float), residual_dropout (float), attention_dropout (float):
        the three dropout sites of the original code (0.1 each).
    layer_norm_eps (float): LayerNorm epsilon (1e-5 in both releases).
    activation (str): "gelu_tanh": both GPT-1 and GPT-2 use the tanh approximation.
    pre_norm (bool): True puts LayerNorm before each sublayer and adds a final
        LayerNorm (GPT-2); False is GPT-1's post-LN layout without a final norm.
    """

    n_pieces: int = 50257
    hidden_width: int = 768
    n_layers: int = 12
    n_heads: int = 12
    intermediate_width: int = 3072
    n_positions: int = 1024
    embedding_dropout: float = 0.1
    residual_dropout: float = 0.1
    attention_dropout: float = 0.1
    layer_norm_eps: float = 1e-5
    activation: str = "gelu_tanh"
    pre_norm: bool = True
