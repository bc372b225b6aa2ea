"""Log-probabilities of pieces under a GPT decoder, read from hidden states already computed.

The features pass has run the decoder over every piece, so scoring needs only the LM
head: the top-layer state at piece i (after the final LayerNorm) gives the distribution
of piece i + 1. A text's first piece has no state before it; it is scored after the
beginning-of-text piece alone, whose distribution does not depend on the text.
"""
import torch

from .decoder import GptDecoder

# LM-head rows per matrix product: 256 × 50,257 float32 logits are 51 MB.
ROWS_PER_CALL = 256


@torch.no_grad()
def next_piece_logprobs(model: GptDecoder, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log P(targets[i] | the context summarised by hidden[i]), for (n, width) hidden states."""
    scores = hidden.new_empty(targets.shape[0], dtype=torch.float32)
    for start in range(0, targets.shape[0], ROWS_PER_CALL):
        rows = slice(start, start + ROWS_PER_CALL)
        logp = torch.log_softmax(model.logits(hidden[rows]).float(), dim=-1)
        scores[rows] = logp.gather(1, targets[rows, None])[:, 0]
    return scores


@torch.no_grad()
def first_piece_logprobs(model: GptDecoder, bos_id: int) -> torch.Tensor:
    """(n_pieces,) log-probabilities of a text's first piece after the beginning-of-text piece."""
    was_training = model.training
    model.eval()
    bos = torch.tensor([[bos_id]], device=model.pieces.weight.device)
    logp = torch.log_softmax(model.logits(model(bos).layers[-1][0, 0]).float(), dim=-1)
    model.train(was_training)
    return logp
