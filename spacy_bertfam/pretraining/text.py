"""Plain-text corpora for language-model pretraining."""
import re
from pathlib import Path
from typing import Iterable, Iterator, List, Sequence, Tuple, Union

import numpy as np

from ..tokenization import PieceTokenizer

_GUTENBERG = re.compile(r"\*\*\* ?START OF.*?\*\*\*(.*?)\*\*\* ?END OF", re.S)


def read_text(path: Union[str, Path]) -> str:
    """A text file; a Project Gutenberg header and footer, if present, are cut off."""
    text = Path(path).read_text(encoding="utf8", errors="replace")
    found = _GUTENBERG.search(text)
    return found.group(1) if found else text


def split_heldout(text: str, fraction: float) -> Tuple[str, str]:
    """(train, held-out): the last `fraction` of the text, cut at a line break."""
    cut = text.rfind("\n", 0, int(len(text) * (1 - fraction)))
    cut = cut if cut > 0 else int(len(text) * (1 - fraction))
    return text[:cut], text[cut:]


def piece_stream(tokenizer: PieceTokenizer, texts: Iterable[str], *, separator: int,
                 chunk_chars: int = 100_000) -> np.ndarray:
    """All texts as one array of piece ids, `separator` between texts.

    Long texts are encoded in chunks cut at line breaks (the tokenizer is fast on
    many medium strings, slow on one huge one).
    """
    parts: List[np.ndarray] = []
    for text in texts:
        chunks = _chunks(text, chunk_chars)
        for enc in tokenizer.encode_batch(chunks):
            parts.append(enc.ids)
        parts.append(np.asarray([separator], dtype=np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _chunks(text: str, size: int) -> List[str]:
    out, start = [], 0
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end + 1
        out.append(text[start:end])
        start = end
    return out


def blocks(stream: np.ndarray, length: int) -> np.ndarray:
    """(n_blocks, length) consecutive, non-overlapping slices of the stream."""
    n = len(stream) // length
    return stream[: n * length].reshape(n, length)


def batches(data: np.ndarray, batch_size: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Endless shuffled batches of rows of `data`."""
    while True:
        order = rng.permutation(len(data))
        for start in range(0, len(order) - batch_size + 1, batch_size):
            yield data[order[start : start + batch_size]]
