"""The data path shared by every objective: documents -> examples -> shuffle -> batches.

Each stage keeps all of its in-flight data in its state dict (nothing lives only in
a suspended generator's locals), so `state_dict()` between two batches captures the
whole pipeline and a resumed run draws exactly the batches the killed run would have.
Examples are numbered in the order they leave the shuffle buffer; objectives derive
per-example randomness (e.g. BERT's masking) from that number, so that every process
of a distributed run, and a single process given the same global batch, agree.
"""
from collections import deque
from typing import Any, Callable, Deque, Dict, Generic, Iterator, List, Optional, Tuple, TypeVar

from .documents import DocKey, DocumentReader
from .shuffle import ShuffleBuffer

E = TypeVar("E")
Numbered = Tuple[int, Any]


class ExampleMaker(Generic[E]):
    """Turns documents into examples; `pending` holds examples made but not yet taken.

    Subclasses implement `make(key, text)` and may keep more state by extending
    `state_dict` / `load_state_dict`.
    """

    def __init__(self) -> None:
        self.pending: Deque[E] = deque()

    def make(self, key: DocKey, text: str) -> List[E]:
        """This document's examples (maybe none; a maker may keep text back for the next document)."""
        raise NotImplementedError

    def examples(self, documents: Iterator[Tuple[DocKey, str]]) -> Iterator[E]:
        """The examples of `documents`, pending ones first; ends with the documents."""
        while True:
            while self.pending:
                yield self.pending.popleft()
            try:
                key, text = next(documents)
            except StopIteration:
                return
            self.pending.extend(self.make(key, text))

    def state_dict(self) -> Dict[str, Any]:
        """The examples made but not yet taken, for resuming; subclasses add what they carry."""
        return {"pending": list(self.pending)}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
        self.pending = deque(state["pending"])


class ExampleStream:
    """Endless numbered, shuffled examples from a document reader through a maker."""

    def __init__(self, reader: DocumentReader, maker: ExampleMaker, buffer_size: int, seed: int):
        self.reader = reader
        self.maker = maker
        self.buffer = ShuffleBuffer(buffer_size, seed)
        self.count = 0
        self._peeked: Any = None
        self._iter: Optional[Iterator[Any]] = None

    def _examples(self) -> Iterator[Any]:
        if self._iter is None:
            docs = self.reader.documents(repeat=True)
            self._iter = self.buffer.shuffle(self.maker.examples(docs))
        return self._iter

    def batch(self, size: int, max_pieces: Optional[int] = None, length: Callable[[Any], int] = len,
              min_examples: int = 1) -> List[Numbered]:
        """The next batch: `size` examples or, with `max_pieces`, as many as fit in
        that many pieces (at least `min_examples`, e.g. one per process; the example that
        would overflow opens the next batch)."""
        out: List[Numbered] = []
        total = 0
        examples = self._examples()
        while max_pieces is not None or len(out) < size:
            if self._peeked is None:
                self._peeked = next(examples)
            n = length(self._peeked)
            if max_pieces is not None and len(out) >= min_examples and total + n > max_pieces:
                break
            out.append((self.count, self._peeked))
            self.count += 1
            total += n
            self._peeked = None
        return out

    def state_dict(self) -> Dict[str, Any]:
        """The whole data path's position (reader, maker, shuffle buffer, example count, the example
        peeked at), for resuming."""
        return {"reader": self.reader.state_dict(), "maker": self.maker.state_dict(),
                "buffer": self.buffer.state_dict(), "count": self.count, "peeked": self._peeked}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore a `state_dict`: the next batch is the one the saved run would have drawn."""
        self.reader.load_state_dict(state["reader"])
        self.maker.load_state_dict(state["maker"])
        self.buffer.load_state_dict(state["buffer"])
        self.count = state["count"]
        self._peeked = state["peeked"]
        self._iter = None
