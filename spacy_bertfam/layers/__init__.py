"""thinc layers gluing the pure torch models to spaCy Docs."""
from .piece_encoder import build_piece_encoder, normalise_layer, requested_layers, torch_encoder

__all__ = ["build_piece_encoder", "normalise_layer", "requested_layers", "torch_encoder"]
