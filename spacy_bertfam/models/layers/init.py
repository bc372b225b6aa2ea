"""The weight initialisation BERT and GPT-2 share."""
from torch import nn


def init_normal(module: nn.Module, std: float = 0.02) -> None:
    """normal(0, std) for Linear and Embedding weights, zero biases, unit LayerNorms.

    Apply with `model.apply(init_normal)`.
    """
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)
