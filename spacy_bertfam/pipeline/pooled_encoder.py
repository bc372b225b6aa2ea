"""What `nlp.replace_listeners` leaves in a listener's place: the encoder chained with its pooler.

`spacy-bertfam.PooledEncoder.v1` is the standalone form of a listener: a copy of the
encoder Model followed by the listener's pooling, with the encoder asked for exactly
the layers that pooling reads.
"""
from typing import Dict, List, Optional

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model, chain

from ..encoders import contract_of
from ..pooling import build_pooler, link_pooler, pooler_layers


def replace_listener(encoder_copy: Model, listener, component) -> Model:
    """The encoder copy chained with the listener's own pooler (its learned mix comes along)."""
    contract_of(encoder_copy).request_layers(listener.layers_read())
    return chain(encoder_copy, listener.pooler)


def replace_listener_cfg(encoder_cfg: Dict, listener_cfg: Dict) -> Dict:
    """The config block that replaces the listener's: a PooledEncoder.v1 with its settings."""
    return {
        "@architectures": "spacy-bertfam.PooledEncoder.v1",
        "encoder": encoder_cfg,
        "width": listener_cfg["width"],
        "pooling": listener_cfg.get("pooling"),
        "layers": listener_cfg.get("layers", [-1]),
        "combine": listener_cfg.get("combine", "scalar_mix"),
    }


@registry.architectures("spacy-bertfam.PooledEncoder.v1")
def pooled_encoder_v1(
    encoder: Model,
    width: int,
    pooling: Optional[str] = None,
    layers: List[int] = [-1],
    combine: str = "scalar_mix",
) -> Model[List[Doc], List]:
    """A standalone encoder with a listener's pooling: what replace_listeners leaves.

    encoder (Model): an encoder architecture (e.g. spacy-bertfam.BertEncoder.v1).
    width, pooling, layers, combine: as in spacy-bertfam.EncoderListener.v1.
    """
    pooler = build_pooler(width=width, pooling=pooling, layers=layers, combine=combine)
    contract = contract_of(encoder)
    link_pooler(pooler, contract, where="spacy-bertfam.PooledEncoder.v1")
    contract.request_layers(pooler_layers(pooler))
    return chain(encoder, pooler)
