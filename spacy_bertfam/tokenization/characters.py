"""ELMo's character ids: each token as UTF-8 bytes between begin/end-of-word markers.

As bilm-tf and AllenNLP's ELMoCharacterMapper: ids 0-255 are bytes, 256/257 the
begin/end-of-sentence characters, 258/259 begin/end of word, 260 padding; then
every id is shifted by one so that 0 marks a padding token. A token keeps at most
`max_chars - 2` bytes (the rest is cut, as in the original; the token still gets
its vector).
"""
from typing import Dict, List, Sequence

import numpy as np

BOS_CHAR, EOS_CHAR, BOW_CHAR, EOW_CHAR, PAD_CHAR = 256, 257, 258, 259, 260
BOS_TOKEN, EOS_TOKEN = "<S>", "</S>"


def _marker(character: int, max_chars: int) -> np.ndarray:
    ids = np.full(max_chars, PAD_CHAR, dtype=np.int64)
    ids[:3] = (BOW_CHAR, character, EOW_CHAR)
    return ids + 1


def word_char_ids(word: str, max_chars: int = 50) -> np.ndarray:
    """(max_chars,) ids of one word; "<S>" and "</S>" are the sentence markers."""
    if word == BOS_TOKEN:
        return _marker(BOS_CHAR, max_chars)
    if word == EOS_TOKEN:
        return _marker(EOS_CHAR, max_chars)
    data = word.encode("utf8", "ignore")[: max_chars - 2]
    ids = np.full(max_chars, PAD_CHAR, dtype=np.int64)
    ids[0] = BOW_CHAR
    ids[1 : len(data) + 1] = np.frombuffer(data, dtype=np.uint8)
    ids[len(data) + 1] = EOW_CHAR
    return ids + 1


def batch_char_ids(sentences: Sequence[Sequence[str]], max_chars: int = 50, *, boundaries: bool = True) -> np.ndarray:
    """(B, T, max_chars) ids, padded with 0; `boundaries` wraps each in <S> ... </S>.

    Each distinct word is encoded once and the rows gathered from those: most tokens of a
    batch repeat an earlier word."""
    rows: List[List[str]] = [([BOS_TOKEN, *s, EOS_TOKEN] if boundaries else list(s)) for s in sentences]
    T = max((len(r) for r in rows), default=0)
    index: Dict[str, int] = {}  # word -> its row in the table; row 0 is padding (all zeros)
    positions = np.zeros((len(rows), T), dtype=np.int64)
    for b, row in enumerate(rows):
        positions[b, : len(row)] = [index.setdefault(word, len(index) + 1) for word in row]
    table = np.zeros((len(index) + 1, max_chars), dtype=np.int64)
    for word, i in index.items():
        table[i] = word_char_ids(word, max_chars)
    return table[positions]
