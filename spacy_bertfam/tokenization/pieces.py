"""A family-neutral wrapper around a `tokenizers.Tokenizer`.

Every encoder family (WordPiece for BERT, byte-level BPE for GPT) hands the rest of
the library one `PieceTokenizer`: it never truncates or pads (long documents are
windowed by the caller, never cut), it knows the ids of its special pieces, and it
serialises to the `tokenizer.json` string of the `tokenizers` library.
"""
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np
from tokenizers import Tokenizer


@dataclass
class Encoded:
    """One encoded text (or text pair), special pieces included.

    ids: (n,) piece ids.
    type_ids: (n,) segment ids (0 for the first text, 1 for the pair).
    offsets: (n, 2) character start/end of each piece in its own text
        ((0, 0) for special pieces).
    """

    ids: np.ndarray
    type_ids: np.ndarray
    offsets: np.ndarray


class PieceTokenizer:
    """Piece tokenization with offsets; an empty instance awaits a loaded vocabulary.

    tokenizer (Optional[Tokenizer]): the underlying tokenizer, or None until loaded.
    """

    def __init__(self, tokenizer: Optional[Tokenizer] = None):
        self._tok = _without_truncation(tokenizer) if tokenizer is not None else None
        self._words_tok: Optional[Tokenizer] = None

    @property
    def is_loaded(self) -> bool:
        """Whether a vocabulary is loaded."""
        return self._tok is not None

    @property
    def tokenizer(self) -> Tokenizer:
        """The `tokenizers.Tokenizer`; a ValueError says how to load one if there is none."""
        if self._tok is None:
            raise ValueError(
                "This tokenizer has no vocabulary yet: load one from a checkpoint, a "
                "tokenizer.json or a vocab.txt"
            )
        return self._tok

    @classmethod
    def from_json(cls, data: str) -> "PieceTokenizer":
        """From a tokenizer.json string; "" gives an empty tokenizer (what `to_json` writes for one)."""
        return cls(Tokenizer.from_str(data) if data else None)

    def to_json(self) -> str:
        """The tokenizer.json string ("" when empty), as saved with an encoder's contract."""
        return self._tok.to_str() if self._tok is not None else ""

    @classmethod
    def from_file(cls, path: str) -> "PieceTokenizer":
        """From a tokenizer.json file (its truncation and padding turned off)."""
        return cls(Tokenizer.from_file(str(path)))

    def save(self, path: str) -> None:
        """Write the tokenizer as a tokenizer.json file."""
        self.tokenizer.save(str(path))

    @property
    def n_pieces(self) -> int:
        """Vocabulary size, added (special) pieces included."""
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def piece_id(self, piece: str) -> int:
        """The id of `piece`; a ValueError names a piece the vocabulary lacks."""
        idx = self.tokenizer.token_to_id(piece)
        if idx is None:
            raise ValueError(f"The vocabulary has no piece '{piece}'")
        return idx

    def special_ids(self) -> List[int]:
        """Ids of all special pieces ([CLS], [SEP], [PAD], ... or <|endoftext|>)."""
        added = self.tokenizer.get_added_tokens_decoder()
        return sorted(idx for idx, token in added.items() if token.special)

    def encode(self, text: str, pair: Optional[str] = None) -> Encoded:
        """Encode a text (or pair) with the special pieces of the post-processor."""
        enc = self.tokenizer.encode(text, pair)
        return _to_encoded(enc)

    def encode_words(self, docs: Sequence[Sequence[str]]) -> List[List[List[int]]]:
        """Pieces of each word of each pre-split doc (see `encode_word_pieces`): per doc, per
        word, the list of piece ids; a word may get none."""
        out = []
        for ids, lengths in self.encode_word_pieces(docs):
            pieces, ends = ids.tolist(), np.cumsum(lengths).tolist()
            out.append([pieces[end - n:end] for n, end in zip(lengths.tolist(), ends)])
        return out

    def encode_word_pieces(self, docs: Sequence[Sequence[str]]) -> List[Tuple[np.ndarray, np.ndarray]]:
        """Pieces of each pre-split doc: never a special piece, even for a word that spells
        one ("[SEP]", "<|endoftext|>"), which is text like any other.

        Returns, per doc, its piece ids word after word (n_pieces,) and the number of pieces
        of each word (n_words,); a word may get none (whitespace, or characters that the
        normaliser removes). As arrays, not a list per word: on a batch of tweets the lists
        took four times as long as the tokenizer itself.
        """
        encs = self._words_tokenizer().encode_batch(
            [list(words) for words in docs], is_pretokenized=True, add_special_tokens=False
        )
        out = []
        for words, enc in zip(docs, encs):
            # Without special pieces every piece belongs to a word, and pieces come word after word.
            word_of = np.asarray(enc.word_ids, dtype=np.int64)
            out.append((np.asarray(enc.ids, dtype=np.int64), np.bincount(word_of, minlength=len(words))))
        return out

    def _words_tokenizer(self) -> Tokenizer:
        """A copy that reads a Doc's text that spells a special piece ("[MASK]",
        "<|endoftext|>") as text: the encoder's special pieces come from the layout alone."""
        if self._words_tok is None:
            self._words_tok = Tokenizer.from_str(self.tokenizer.to_str())
            self._words_tok.encode_special_tokens = True
        return self._words_tok

    def encode_plain(self, texts: Sequence[str]) -> List[Tuple[np.ndarray, np.ndarray]]:
        """Piece ids of each text without special pieces, and a bool array marking
        the pieces that start a word (for whole-word masking)."""
        out = []
        for enc in self.tokenizer.encode_batch(list(texts), add_special_tokens=False):
            words = enc.word_ids
            starts = [w is not None and (i == 0 or words[i - 1] != w) for i, w in enumerate(words)]
            out.append((np.asarray(enc.ids, dtype=np.int64), np.asarray(starts, dtype=bool)))
        return out

    def decode(self, ids: Sequence[int]) -> str:
        """The text of piece ids (special pieces dropped)."""
        return self.tokenizer.decode(list(ids))


def _to_encoded(enc) -> Encoded:
    return Encoded(
        ids=np.asarray(enc.ids, dtype=np.int64),
        type_ids=np.asarray(enc.type_ids, dtype=np.int64),
        offsets=np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2),
    )


def _without_truncation(tok: Tokenizer) -> Tokenizer:
    """Turn off truncation and padding that a `tokenizer.json` may carry.

    Hugging Face tokenizer files often save e.g. truncation at 128 pieces; kept, it
    would silently cut long documents.
    """
    tok = Tokenizer.from_str(tok.to_str())
    tok.no_truncation()
    tok.no_padding()
    return tok
