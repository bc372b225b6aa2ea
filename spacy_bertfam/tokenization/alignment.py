"""Pieces of spaCy tokens: every token gets at least one piece.

Tokens are encoded as pre-split words by the `tokenizers` library, whose `word_ids`
give the alignment directly, so no character-offset matching is hand-written here.

Fallback for a token that yields no piece (a whitespace token, or characters the
normaliser deletes, such as control characters): it shares the piece of the nearest
preceding token, or of the following one at the start of a doc. A doc whose tokens
yield no piece at all is encoded as one [UNK] piece that all its tokens share. A sentence
pair's two segments are aligned each on its own, so that no piece crosses between them.
"""
from dataclasses import dataclass
from typing import List, Sequence

import numpy as np

from .pieces import PieceTokenizer


@dataclass
class DocPieces:
    """The pieces of one doc (special pieces excluded) and their tokens.

    ids: (n_pieces,) piece ids.
    token_lengths: (n_tokens,) number of pieces of each token (>= 1 unless the doc is empty).
    token_pieces: (sum(token_lengths),) piece index of each token's pieces, token by token.
    """

    ids: np.ndarray
    token_lengths: np.ndarray
    token_pieces: np.ndarray

    @property
    def n_pieces(self) -> int:
        """Number of pieces."""
        return int(self.ids.shape[0])


def align_tokens(
    tokenizer: PieceTokenizer, docs: Sequence[Sequence[str]], *, unk_id: int,
    first_segments: Sequence[int] = (),
) -> List[DocPieces]:
    """Tokenize each doc's token texts into pieces and align them to the tokens.

    first_segments: per doc, the tokens of a sentence pair's first segment (0: not a pair;
        missing: none is).
    """
    out = []
    for i, (ids, lengths) in enumerate(tokenizer.encode_word_pieces(docs)):
        n_first = first_segments[i] if i < len(first_segments) else 0
        if n_first:
            split = int(lengths[:n_first].sum())
            out.append(_joined(_align(ids[:split], lengths[:n_first], unk_id),
                               _align(ids[split:], lengths[n_first:], unk_id)))
        else:
            out.append(_align(ids, lengths, unk_id))
    return out


def _joined(a: DocPieces, b: DocPieces) -> DocPieces:
    return DocPieces(ids=np.concatenate([a.ids, b.ids]),
                     token_lengths=np.concatenate([a.token_lengths, b.token_lengths]),
                     token_pieces=np.concatenate([a.token_pieces, b.token_pieces + a.n_pieces]))


def _align(ids: np.ndarray, lengths: np.ndarray, unk_id: int) -> DocPieces:
    """ids: the pieces of the tokens in order; lengths: (n_tokens,) pieces of each token."""
    n_tokens = len(lengths)
    if n_tokens and not ids.size:
        return DocPieces(
            ids=np.asarray([unk_id], dtype=np.int64),
            token_lengths=np.ones(n_tokens, dtype=np.int64),
            token_pieces=np.zeros(n_tokens, dtype=np.int64),
        )
    starts = np.cumsum(lengths) - lengths
    empty = lengths == 0
    if empty.any():
        # Borrow the last piece of the nearest earlier token, or piece 0 at the start.
        borrowed = np.maximum(starts - 1, 0)
        starts = np.where(empty, borrowed, starts)
        lengths = np.where(empty, 1, lengths)
    offsets = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    token_pieces = np.arange(int(lengths.sum()), dtype=np.int64) + offsets
    return DocPieces(ids=ids, token_lengths=lengths, token_pieces=token_pieces)
