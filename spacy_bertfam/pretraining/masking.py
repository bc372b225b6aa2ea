"""BERT's masked-LM corruption (Devlin et al. 2018, §3.1 and appendix A).

15% of the non-special pieces are selected (stochastic rounding, so the rate is
exact in expectation even for short sequences); each selected piece becomes
[MASK] (80%), a random non-special piece (10%) or stays as it is (10%). With
`whole_word`, all pieces of a word are selected together. The loss is computed on
the selected positions only.
"""
from dataclasses import dataclass
from typing import List, Tuple

import numpy as np

from ..errors import ConfigError


@dataclass
class MaskingScheme:
    """mask_id: id of [MASK]; special_ids: pieces never selected nor used as replacement;
    n_pieces: vocabulary size; rate: fraction of candidates selected;
    mask_share / random_share: of the selected, the share masked / replaced at random."""

    mask_id: int
    special_ids: List[int]
    n_pieces: int
    rate: float = 0.15
    mask_share: float = 0.8
    random_share: float = 0.1
    whole_word: bool = False

    def __post_init__(self) -> None:
        if not 0.0 < self.rate < 1.0:
            raise ConfigError(f"mask rate must be in (0, 1), not {self.rate}")
        if self.mask_share + self.random_share > 1.0:
            raise ConfigError("mask_share + random_share must not exceed 1")
        self.replacements = np.setdiff1d(np.arange(self.n_pieces), np.asarray(self.special_ids))

    def __call__(self, ids: np.ndarray, word_start: np.ndarray, rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
        """Corrupt one sequence.

        ids: (T,) piece ids, special pieces included.
        word_start: (T,) bool, True where a piece begins a word (used by whole_word).
        Returns (corrupted ids, selected (T,) bool).
        """
        candidates = np.flatnonzero(~np.isin(ids, self.special_ids))
        selected = np.zeros(len(ids), dtype=bool)
        if len(candidates) == 0:
            return ids.copy(), selected
        expected = self.rate * len(candidates)
        budget = int(expected) + int(rng.random() < expected - int(expected))
        groups = _word_groups(candidates, word_start) if self.whole_word else [[i] for i in candidates]
        count = 0
        for g in rng.permutation(len(groups)):
            if count >= budget:
                break
            if count + len(groups[g]) > budget:
                continue  # as the reference: a word that does not fit is skipped
            selected[groups[g]] = True
            count += len(groups[g])
        out = ids.copy()
        positions = np.flatnonzero(selected)
        draw = rng.random(len(positions))
        masked = positions[draw < self.mask_share]
        randomised = positions[(draw >= self.mask_share) & (draw < self.mask_share + self.random_share)]
        out[masked] = self.mask_id
        out[randomised] = rng.choice(self.replacements, size=len(randomised))
        return out, selected


def _word_groups(candidates: np.ndarray, word_start: np.ndarray) -> List[List[int]]:
    """Candidate positions grouped by word: a group starts at a word start or after a gap."""
    groups: List[List[int]] = []
    for i in candidates:
        if groups and not word_start[i] and groups[-1][-1] == i - 1:
            groups[-1].append(int(i))
        else:
            groups.append([int(i)])
    return groups
