"""What every encoder family returns: all layer outputs, so listeners read one shape."""
from dataclasses import dataclass
from typing import List, Optional

import torch


@dataclass
class EncoderOutput:
    """Hidden states of every layer.

    layers: layer 0 is the embedding output, layer i the output of block i; each is
        (B, T, width). Padding positions hold unspecified values.
    pooled: a sequence-level vector (B, width) where the family defines one (BERT's
        pooler on [CLS]), else None.
    """

    layers: List[torch.Tensor]
    pooled: Optional[torch.Tensor] = None

    @property
    def last_hidden(self) -> torch.Tensor:
        """The top layer's output, (B, T, width)."""
        return self.layers[-1]
