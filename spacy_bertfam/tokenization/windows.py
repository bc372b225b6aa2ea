"""Splitting long piece sequences into overlapping windows, and putting them back.

A document of any length is encoded completely: its pieces are cut into windows of
at most `window` positions (special pieces included), each a proper sequence with
its own special pieces, starting every `stride` pieces. How the outputs of
overlapping windows combine is a family rule:

- "mean" (bidirectional encoders such as BERT): a position covered by several windows
  gets the average of their outputs (so its gradient is split evenly among them);
- "most_left_context" (causal decoders such as GPT): a position takes the output of
  the window in which it has the most left context.

Sentence pairs (BERT's "[CLS] A [SEP] B [SEP]", e.g. question and context): a doc
may start with a lead of pieces (segment A) that is repeated at the head of every
window, after the prefix and before a separator, so each window of a long B sees all
of A; A's positions average over the windows, and `type_ids` are 1 from B on.

Windows are run in chunks of similar length (sorted, then cut where a chunk would
exceed `batch_pieces` padded positions or carry much padding), so a batch of short
and long texts does not pay for padding every short one to the longest.
"""
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

COMBINE_RULES = ("mean", "most_left_context")


@dataclass
class WindowPlan:
    """Windows for a batch of docs, ready to run as one padded batch.

    ids: (n_windows, T) piece ids with special pieces, padded with `padding_id`.
    mask: (n_windows, T) True for real positions.
    type_ids: (n_windows, T) segment of each position: 0, or 1 from a pair's B on.
    chunks: (window indices, length) of each encoder call: the windows' rows of
        `ids`, cut to `length` columns.
    source: (n,) row, in the chunks' outputs flattened and concatenated in order,
        of each window position that feeds an output.
    target: (n,) row of the output (concatenated doc pieces) that it feeds.
    weight: (n,) its weight in that row (1/coverage for "mean", 1 for the chosen window).
    n_out: total number of doc pieces (output rows).
    doc_offsets: (n_docs + 1,) row offsets of each doc in the output.
    """

    ids: np.ndarray
    mask: np.ndarray
    type_ids: np.ndarray
    chunks: List[Tuple[np.ndarray, int]]
    source: np.ndarray
    target: np.ndarray
    weight: np.ndarray
    n_out: int
    doc_offsets: np.ndarray


def window_spans(n_pieces: int, content: int, stride: int) -> List[Tuple[int, int]]:
    """(start, end) piece ranges of the windows covering `n_pieces` pieces."""
    if n_pieces <= content:
        return [(0, n_pieces)]
    spans = []
    start = 0
    while True:
        end = min(start + content, n_pieces)
        spans.append((start, end))
        if end == n_pieces:
            return spans
        start += stride


def plan_windows(
    docs: Sequence[np.ndarray],
    *,
    window: int,
    stride: int,
    prefix: Sequence[int],
    suffix: Sequence[int],
    padding_id: int,
    combine: str = "mean",
    batch_pieces: int = 4096,
    leads: Optional[Sequence[int]] = None,
    separator: Sequence[int] = (),
) -> WindowPlan:
    """Lay out the windows of every doc's piece ids (special pieces excluded).

    window (int): positions per window, `prefix` and `suffix` pieces included.
    stride (int): pieces between window starts; 1 <= stride <= window - len(prefix + suffix).
    prefix, suffix: special pieces around each window ([CLS] / [SEP] for BERT).
    combine (str): "mean" or "most_left_context", see the module docstring.
    batch_pieces (int): at most this many padded positions per encoder call (a
        window longer than that still runs, alone).
    leads: per doc, how many of its first pieces form a pair's segment A (0: no pair);
        a doc's B then advances by min(stride, the room A leaves in a window).
    separator: pieces between A and B ([SEP] for BERT).
    """
    content = window - len(prefix) - len(suffix)
    if content < 1:
        raise ValueError(
            f"window {window} leaves no room for pieces next to {len(prefix) + len(suffix)} "
            "special pieces; use a larger window"
        )
    if not 1 <= stride <= content:
        raise ValueError(
            f"stride {stride} must be between 1 and the window's {content} content pieces "
            f"(window {window} minus special pieces); a larger stride would skip pieces"
        )
    if combine not in COMBINE_RULES:
        raise ValueError(f"Unknown window combination '{combine}'; expected one of {COMBINE_RULES}")
    leads = [0] * len(docs) if leads is None else list(leads)
    if any(leads) and combine != "mean":
        raise ValueError(f"Sentence pairs need the 'mean' window rule (A repeats in every window), not '{combine}'")
    spans = []  # (doc, lead length, start, end); start/end index the doc's pieces after the lead
    doc_offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    for d, ids in enumerate(docs):
        doc_offsets[d + 1] = doc_offsets[d] + len(ids)
        if not len(ids):
            continue
        q = leads[d]
        if not q:
            spans.extend((d, 0, s, e) for s, e in window_spans(len(ids), content, stride))
            continue
        room = content - q - len(separator)
        if room < 1:
            raise ValueError(
                f"A sentence pair's first segment of {q} pieces leaves no room for the second in a "
                f"window of {window}; shorten the first segment or use a larger window"
            )
        spans.extend((d, q, q + s, q + e) for s, e in window_spans(len(ids) - q, room, min(stride, room)))
    n_windows = len(spans)
    rows = []
    for d, q, s, e in spans:
        lead = np.concatenate([docs[d][:q], separator]) if q else []
        rows.append(np.concatenate([prefix, lead, docs[d][s:e], suffix]).astype(np.int64))
    width = max((len(r) for r in rows), default=0)
    out_ids = np.full((n_windows, width), padding_id, dtype=np.int64)
    type_ids = np.zeros((n_windows, width), dtype=np.int64)
    mask = np.zeros((n_windows, width), dtype=bool)
    lengths = np.zeros(n_windows, dtype=np.int64)
    for w, (row, (_, q, _, _)) in enumerate(zip(rows, spans)):
        out_ids[w, : len(row)] = row
        if q:  # segment B (and the closing suffix) from after A's separator
            type_ids[w, len(prefix) + q + len(separator) : len(row)] = 1
        mask[w, : len(row)] = True
        lengths[w] = len(row)
    chunks = _chunks(lengths, batch_pieces)
    # Row of window w's first position in the concatenated, flattened chunk outputs.
    row_start = np.zeros(n_windows, dtype=np.int64)
    offset = 0
    for windows, length in chunks:
        row_start[windows] = offset + np.arange(len(windows)) * length
        offset += len(windows) * length
    sources, targets, lefts = [], [], []
    for w, (d, q, s, e) in enumerate(spans):
        n = e - s
        if q:  # segment A, then B after the separator
            sources.append(row_start[w] + len(prefix) + np.arange(q))
            targets.append(doc_offsets[d] + np.arange(q))
            lefts.append(np.arange(q))
        body = row_start[w] + len(prefix) + (q + len(separator) if q else 0)
        sources.append(body + np.arange(n))
        targets.append(doc_offsets[d] + s + np.arange(n))
        lefts.append(np.arange(n))
    source = np.concatenate(sources) if sources else np.zeros(0, dtype=np.int64)
    target = np.concatenate(targets) if targets else np.zeros(0, dtype=np.int64)
    n_out = int(doc_offsets[-1])
    if combine == "mean":
        coverage = np.bincount(target, minlength=n_out).astype(np.float32)
        weight = 1.0 / coverage[target]
    else:
        left = np.concatenate(lefts) if lefts else np.zeros(0, dtype=np.int64)
        # Stable sort by (target, left context): the last entry per target wins.
        order = np.lexsort((left, target))
        last = np.ones(len(order), dtype=bool)
        last[:-1] = target[order][1:] != target[order][:-1]
        keep = order[last]
        source, target = source[keep], target[keep]
        weight = np.ones(len(keep), dtype=np.float32)
    return WindowPlan(
        ids=out_ids,
        mask=mask,
        type_ids=type_ids,
        chunks=chunks,
        source=source.astype(np.int64),
        target=target.astype(np.int64),
        weight=weight.astype(np.float32),
        n_out=n_out,
        doc_offsets=doc_offsets,
    )


def _chunks(lengths: np.ndarray, batch_pieces: int, min_size: int = 8, max_padding: float = 1.25):
    """Group windows (sorted by length) into encoder calls of bounded padded size.

    A chunk closes when the next window would push it past `batch_pieces` padded
    positions, or, once it holds `min_size` windows, past `max_padding` × its real
    positions.
    """
    chunks: List[Tuple[np.ndarray, int]] = []
    current: List[int] = []
    real = 0
    for w in np.argsort(lengths, kind="stable"):
        length = int(lengths[w])
        padded = (len(current) + 1) * length
        if current and (padded > batch_pieces or
                        (len(current) >= min_size and padded > max_padding * (real + length))):
            chunks.append((np.asarray(current, dtype=np.int64), int(lengths[current[-1]])))
            current, real = [], 0
        current.append(int(w))
        real += length
    if current:
        chunks.append((np.asarray(current, dtype=np.int64), int(lengths[current[-1]])))
    return chunks
