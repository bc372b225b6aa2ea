"""A bounded shuffle buffer whose whole state (items and RNG) can be saved and restored."""
from typing import Any, Dict, Generic, Iterable, Iterator, List, TypeVar

import numpy as np

from ..errors import ConfigError

T = TypeVar("T")


class ShuffleBuffer(Generic[T]):
    """Holds up to `size` items and releases a random one for each item added.

    Streams larger than memory get shuffled within a window of `size` items;
    deterministic given `seed`; `state_dict` captures the items and the RNG so a
    resumed run draws the same sequence.
    """

    def __init__(self, size: int, seed: int):
        if size < 1:
            raise ConfigError(f"The shuffle buffer needs a size of at least 1, not {size}: set training.shuffle_buffer")
        self.size = size
        self.items: List[T] = []
        self.rng = np.random.default_rng(seed)

    def shuffle(self, source: Iterable[T]) -> Iterator[T]:
        """Items of `source` in shuffled order (the buffer is drained when `source` ends)."""
        for item in source:
            # Added before anything is released, so a state saved at any yield
            # holds every item taken from `source` and not yet released.
            self.items.append(item)
            if len(self.items) > self.size:
                yield self._pop()
        while self.items:
            yield self._pop()

    def _pop(self) -> T:
        i = int(self.rng.integers(len(self.items)))
        self.items[i], self.items[-1] = self.items[-1], self.items[i]
        return self.items.pop()

    def state_dict(self) -> Dict[str, Any]:
        """The buffered items and the RNG state, for resuming."""
        return {"items": list(self.items), "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
        self.items = list(state["items"])
        self.rng.bit_generator.state = state["rng"]
