"""From an encoder's stored piece-level layers to one vector per token: pool, then combine."""
from .pieces import POOLINGS, check_pooling, pool_pieces, pooled_width
from .pooler import COMBINES, build_pooler, link_pooler, pooler_input_width, pooler_layers

__all__ = ["POOLINGS", "check_pooling", "pool_pieces", "pooled_width", "COMBINES", "build_pooler", "link_pooler",
           "pooler_input_width", "pooler_layers"]
