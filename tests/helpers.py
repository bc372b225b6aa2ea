"""Helpers used by several test modules."""
from typing import List, Sequence, Tuple

import torch

from spacy_bertfam.tokenization import PieceTokenizer


def padded_batch(
    tokenizer: PieceTokenizer, texts: Sequence[str], pairs: Sequence[str] = ()
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ids, attention mask, type ids), right-padded with 0."""
    encs = [
        tokenizer.encode(t, pairs[i] if i < len(pairs) else None) for i, t in enumerate(texts)
    ]
    T = max(len(e.ids) for e in encs)
    ids = torch.zeros(len(encs), T, dtype=torch.long)
    mask = torch.zeros(len(encs), T, dtype=torch.long)
    types = torch.zeros(len(encs), T, dtype=torch.long)
    for i, e in enumerate(encs):
        n = len(e.ids)
        ids[i, :n] = torch.from_numpy(e.ids)
        types[i, :n] = torch.from_numpy(e.type_ids)
        mask[i, :n] = 1
    return ids, mask, types


def max_abs_masked(ours: List[torch.Tensor], theirs: Sequence[torch.Tensor], mask: torch.Tensor) -> List[float]:
    """Per layer max |a - b| over real (unpadded) positions only."""
    keep = mask.bool()
    return [float((a[keep] - b[keep]).abs().max()) for a, b in zip(ours, theirs)]
