"""Data handed from an encoder component to its listeners (the shared contract)."""
from dataclasses import dataclass
from typing import Dict, List

from thinc.types import Floats2d, Ints1d


@dataclass
class DocEncoding:
    """An encoder's output for one Doc, at piece level.

    layers: layer index (0 = embedding output, -1 never stored: indices are
        normalised to 0..n_layers) -> (n_pieces, width) array.
    token_lengths: (n_tokens,) pieces per spaCy token (each >= 1).
    token_pieces: (sum(token_lengths),) piece indices of each token, token by token.
    """

    layers: Dict[int, Floats2d]
    token_lengths: Ints1d
    token_pieces: Ints1d

    @property
    def n_pieces(self) -> int:
        return 0 if not self.layers else int(next(iter(self.layers.values())).shape[0])


EncoderOutputs = List[DocEncoding]
