"""GPT-1 and GPT-2: config and decoder."""
from .config import GptConfig
from .decoder import DecoderOutput, GptDecoder, positions_from_mask
from .generate import check_fits, check_sampling, generate
from .scoring import first_piece_logprobs, next_piece_logprobs

__all__ = ["first_piece_logprobs", "next_piece_logprobs", "check_fits", "check_sampling", "generate", "GptConfig",
           "GptDecoder", "DecoderOutput", "positions_from_mask"]
