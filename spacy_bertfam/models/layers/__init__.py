"""Building blocks shared by the model families; they take plain keyword arguments."""
from .activations import get_activation
from .attention import SelfAttention
from .feedforward import FeedForward
from .packing import Packing
from .transformer import TransformerBlock

__all__ = ["get_activation", "SelfAttention", "FeedForward", "Packing", "TransformerBlock"]
