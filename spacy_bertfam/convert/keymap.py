"""Key maps: data that says which checkpoint tensor becomes which parameter of ours.

A key map is a list of `KeyRow(ours, theirs, transpose)`; `{i}` in a pattern stands
for a layer index. Renaming reports every checkpoint key the map does not know, so
a checkpoint of another architecture never loads half-way by accident.
"""
import re
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

import torch

from .errors import CheckpointError


class KeyRow(NamedTuple):
    ours: str
    theirs: str
    transpose: bool = False


NO_TRANSPOSE = False
TRANSPOSE = True


def _pattern(template: str) -> "re.Pattern[str]":
    return re.compile("^" + re.escape(template).replace(r"\{i\}", r"(\d+)") + "$")


def rename_to_ours(
    state: Dict[str, torch.Tensor],
    rows: List[KeyRow],
    *,
    ignore: Iterable[str] = (),
    source: str = "checkpoint",
) -> Dict[str, torch.Tensor]:
    """Map a checkpoint's state dict onto our parameter names.

    ignore: regular expressions of checkpoint keys that carry nothing we need
        (buffers such as `position_ids`, tied copies).
    Raises CheckpointError listing every key that is neither mapped nor ignored.
    """
    compiled: List[Tuple["re.Pattern[str]", KeyRow]] = [(_pattern(r.theirs), r) for r in rows]
    ignored = [re.compile(p) for p in ignore]
    ours: Dict[str, torch.Tensor] = {}
    unknown: List[str] = []
    for key, tensor in state.items():
        row, index = _match(compiled, key)
        if row is None:
            if not any(p.search(key) for p in ignored):
                unknown.append(key)
            continue
        name = row.ours.replace("{i}", index) if index is not None else row.ours
        ours[name] = tensor.T.contiguous() if row.transpose else tensor
    if unknown:
        raise CheckpointError(
            f"{source}: {len(unknown)} unknown key(s) that map to no parameter: "
            f"{_listing(unknown)}"
        )
    return ours


def rename_to_theirs(state: Dict[str, torch.Tensor], rows: List[KeyRow]) -> Dict[str, torch.Tensor]:
    """The inverse map (our names -> checkpoint names), e.g. to export or to test a map."""
    compiled = [(_pattern(r.ours), r) for r in rows]
    out: Dict[str, torch.Tensor] = {}
    for key, tensor in state.items():
        row, index = _match(compiled, key)
        if row is None:
            raise CheckpointError(f"No checkpoint name for our parameter '{key}'")
        name = row.theirs.replace("{i}", index) if index is not None else row.theirs
        out[name] = tensor.T.contiguous() if row.transpose else tensor
    return out


def _match(compiled, key: str) -> Tuple[Optional[KeyRow], Optional[str]]:
    for pattern, row in compiled:
        m = pattern.match(key)
        if m:
            return row, (m.group(1) if m.groups() else None)
    return None, None


def _listing(keys: List[str], most: int = 20) -> str:
    shown = ", ".join(sorted(keys)[:most])
    return shown + (f", ... ({len(keys) - most} more)" if len(keys) > most else "")
