"""Log-probabilities of every piece of long texts under a GPT decoder.

The text, after one beginning-of-text piece, is read in the windows the caller gives
(overlapping (start, end) ranges of that sequence, e.g. `tokenization.windows.window_spans`);
each piece is scored in the earliest window that holds it and its predecessor, the one
giving it the most left context.
"""
from typing import List, Sequence, Tuple

import numpy as np
import torch

from .decoder import GptDecoder


@torch.no_grad()
def piece_logprobs(
    model: GptDecoder, docs: Sequence[Sequence[int]], windows: Sequence[Sequence[Tuple[int, int]]], *, bos_id: int
) -> List[np.ndarray]:
    """Per doc, the natural-log probability of each piece given all pieces before it.

    windows: per doc, (start, end) ranges over [bos_id, *pieces] covering all of it.
    """
    model.eval()
    device = next(model.parameters()).device
    out = []
    for ids, spans in zip(docs, windows):
        seq = torch.tensor([bos_id, *ids], dtype=torch.long, device=device)
        scores = np.zeros(len(ids), dtype=np.float32)
        done = 0  # pieces scored so far (targets are seq[1:])
        for start, end in spans:
            if end - 1 <= done:
                continue
            logits = model.logits(model(seq[None, start:end]).layers[-1])[0]
            logp = torch.log_softmax(logits.float(), dim=-1)
            # Position p (absolute) predicts seq[p + 1]; score targets done+1 .. end-1.
            first = done + 1
            targets = seq[first:end]
            rows = logp[first - 1 - start : end - 1 - start]
            scores[first - 1 : end - 1] = rows.gather(1, targets[:, None])[:, 0].cpu().numpy()
            done = end - 1
        out.append(scores)
    return out
