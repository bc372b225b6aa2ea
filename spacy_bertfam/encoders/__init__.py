"""thinc Models that run a family's torch encoder over Docs, and the contract they offer.

See `contract.py` for what an encoder Model gives its component and listeners.
"""
from .contract import DocEncoding, EncodedBatch, EncoderContract, contract_of, torch_encoder
from .elmo_encoder import build_elmo_encoder
from .piece_encoder import PieceLayout, build_piece_encoder, piece_layout

__all__ = [
    "DocEncoding", "EncodedBatch", "EncoderContract", "contract_of", "torch_encoder",
    "build_elmo_encoder", "PieceLayout", "build_piece_encoder", "piece_layout",
]
