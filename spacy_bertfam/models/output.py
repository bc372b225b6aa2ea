"""What every encoder family returns: all layer outputs, so listeners read one shape."""
from dataclasses import dataclass
from typing import List, Optional

import torch

from .layers.packing import Packing


@dataclass
class EncoderOutput:
    """Hidden states of every layer.

    layers: layer 0 is the embedding output, layer i the output of block i; each is
        (B, T, width), or (n, width) when the encoder was given a `Packing`: the rows
        `packing.rows` of the flattened positions. Padding positions hold unspecified values.
    pooled: a sequence-level vector (B, width) where the family defines one (BERT's
        pooler on [CLS]), else None.
    packing: the `Packing` the layers are in, or None for (B, T, width).
    """

    layers: List[torch.Tensor]
    pooled: Optional[torch.Tensor] = None
    packing: Optional[Packing] = None

    @property
    def last_hidden(self) -> torch.Tensor:
        """The top layer's output, (B, T, width)."""
        return self.layers[-1]
