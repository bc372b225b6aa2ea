"""Sampling from a GPT decoder with its key/value cache: greedy, temperature, top-k, top-p."""
from typing import Iterator, Optional

import torch

from .decoder import GptDecoder


def check_sampling(max_new_tokens: int, temperature: float, top_k: Optional[int], top_p: Optional[float]) -> None:
    """Clear errors for settings that cannot work."""
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be >= 1 or None, got {top_k}")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")


def check_fits(model: GptDecoder, prompt_pieces: int, max_new_tokens: int) -> None:
    """A clear error when the prompt and the new pieces exceed the model's positions."""
    # The last new piece is picked, never fed back: it needs no position.
    if prompt_pieces + max(max_new_tokens - 1, 0) > model.config.n_positions:
        raise ValueError(
            f"prompt of {prompt_pieces} pieces + {max_new_tokens} new pieces exceeds the "
            f"{model.config.n_positions} positions of this model (prompt + new - 1 must fit)"
        )


def _pick(logits: torch.Tensor, temperature: float, top_k: Optional[int], top_p: Optional[float],
          generator: Optional[torch.Generator]) -> torch.Tensor:
    """(B, V) logits -> (B,) next piece ids."""
    if temperature == 0:
        return logits.argmax(-1)
    logits = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        cumulative = sorted_logits.softmax(-1).cumsum(-1)
        # Drop a piece when the pieces before it already reach top_p (keep at least one).
        drop = cumulative - sorted_logits.softmax(-1) >= top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
    probs = logits.softmax(-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate(
    model: GptDecoder,
    piece_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_k: Optional[int] = None,
    top_p: Optional[float] = None,
    generator: Optional[torch.Generator] = None,
    use_cache: bool = True,
) -> Iterator[torch.Tensor]:
    """Yield the next piece of every prompt, one (B,) tensor per step.

    piece_ids, attention_mask: (B, T) prompts, left-padded (mask 0 on padding).
    temperature: 0 is greedy decoding; otherwise sample from softmax(logits / T),
        restricted to the `top_k` most likely pieces and/or the nucleus `top_p`.
    use_cache: reuse keys/values of earlier positions (False recomputes everything,
        for checking the cache).
    """
    check_sampling(max_new_tokens, temperature, top_k, top_p)
    check_fits(model, piece_ids.shape[1], max_new_tokens)
    ids, mask = piece_ids, attention_mask
    out = _in_eval_mode(model, ids, mask)
    for step in range(max_new_tokens):
        nxt = _pick(model.logits(out.layers[-1][:, -1]), temperature, top_k, top_p, generator)
        yield nxt
        if step == max_new_tokens - 1:
            return
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
        if use_cache:
            out = _in_eval_mode(model, nxt[:, None], mask, cache=out.cache)
        else:
            ids = torch.cat([ids, nxt[:, None]], dim=1)
            out = _in_eval_mode(model, ids, mask)


def _in_eval_mode(model: GptDecoder, *args, **kwargs):
    """One decoder call without dropout, whatever mode the module is in between the steps of
    a streamed generation (a pipeline's own prediction in between leaves it in training mode:
    thinc's shim does), and the mode it had afterwards."""
    was_training = model.training
    model.eval()
    try:
        return model(*args, **kwargs)
    finally:
        model.train(was_training)
