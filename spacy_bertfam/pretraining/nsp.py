"""Next-sentence-prediction instances: `[CLS] A [SEP] B [SEP]` from documents.

Follows `create_instances_from_document` of the reference implementation
(google-research/bert): sentences of a document are gathered into a chunk up to a
target length (shorter with probability `short_seq_prob`); A is a random number of
the chunk's first sentences; B is the rest of the chunk (IsNext) or a span of a
different document (NotNext), and the pair is truncated from a random end of the
longer segment. One change: the reference forces NotNext whenever a chunk holds one
sentence, which skews the classes; here the coin is thrown first and a one-sentence
chunk pairs with its document's neighbouring sentence. Documents with fewer than two
sentences give no instances.
"""
from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np


@dataclass
class Sentence:
    """Piece ids of one sentence (no special pieces) and where words start."""

    ids: np.ndarray
    word_start: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class Instance:
    """One pair: ids = [CLS] A [SEP] B [SEP]; the first `n_first` pieces have segment 0."""

    ids: np.ndarray
    word_start: np.ndarray
    n_first: int
    is_next: bool

    def __len__(self) -> int:
        return len(self.ids)


def document_instances(
    doc: Sequence[Sentence],
    others: Sequence[Sequence[Sentence]],
    rng: np.random.Generator,
    *,
    max_length: int,
    short_seq_prob: float,
    cls_id: int,
    sep_id: int,
) -> List[Instance]:
    """All instances of one document; `others` are other documents, for NotNext."""
    if len(doc) < 2 or not others:
        return []
    room = max_length - 3  # [CLS], [SEP], [SEP]
    target = room if rng.random() >= short_seq_prob else int(rng.integers(2, room + 1))
    out: List[Instance] = []
    chunk: List[Sentence] = []
    length = 0
    i = 0
    while i < len(doc):
        chunk.append(doc[i])
        length += len(doc[i])
        if i == len(doc) - 1 or length >= target:
            is_next = bool(rng.random() < 0.5)
            if is_next:
                if len(chunk) >= 2:
                    cut = int(rng.integers(1, len(chunk)))
                    first, second = chunk[:cut], chunk[cut:]
                elif i + 1 < len(doc):
                    first, second = chunk, [doc[i + 1]]
                else:
                    first, second = [doc[i - 1]], chunk
            else:
                cut = int(rng.integers(1, len(chunk))) if len(chunk) >= 2 else 1
                first = chunk[:cut]
                second = _random_span(others, target - sum(map(len, first)), rng)
                i -= len(chunk) - cut  # the unused sentences start the next chunk
            out.append(_pack(first, second, is_next, room, rng, cls_id, sep_id))
            chunk, length = [], 0
        i += 1
    return out


def _random_span(others: Sequence[Sequence[Sentence]], target: int, rng: np.random.Generator) -> List[Sentence]:
    other = others[int(rng.integers(len(others)))]
    start = int(rng.integers(len(other)))
    span: List[Sentence] = []
    for sentence in other[start:]:
        span.append(sentence)
        if sum(map(len, span)) >= target:
            break
    return span


def _pack(first: List[Sentence], second: List[Sentence], is_next: bool, room: int,
          rng: np.random.Generator, cls_id: int, sep_id: int) -> Instance:
    a_ids, a_ws = _concat(first)
    b_ids, b_ws = _concat(second)
    # Truncation as the reference: one piece at a time from a random end of the
    # longer segment; only the kept spans [lo, hi) are tracked, then cut once.
    spans = [[0, len(a_ids)], [0, len(b_ids)]]
    while sum(hi - lo for lo, hi in spans) > room:
        span = spans[0] if spans[0][1] - spans[0][0] > spans[1][1] - spans[1][0] else spans[1]
        if rng.random() < 0.5:
            span[0] += 1
        else:
            span[1] -= 1
    (a_lo, a_hi), (b_lo, b_hi) = spans
    special = np.asarray([True])
    ids = np.concatenate([[cls_id], a_ids[a_lo:a_hi], [sep_id], b_ids[b_lo:b_hi], [sep_id]]).astype(np.int64)
    word_start = np.concatenate([special, a_ws[a_lo:a_hi], special, b_ws[b_lo:b_hi], special])
    return Instance(ids, word_start, a_hi - a_lo + 2, is_next)


def _concat(sentences: List[Sentence]) -> Tuple[np.ndarray, np.ndarray]:
    return (np.concatenate([s.ids for s in sentences]).astype(np.int64),
            np.concatenate([s.word_start for s in sentences]).astype(bool))
