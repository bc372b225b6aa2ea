"""Key maps: data that says which checkpoint tensor becomes which parameter of ours.

A key map is a list of `KeyRow(ours, theirs, transpose, part)`; `{i}` in a pattern
stands for a layer index. `transpose` flips a 2-d weight (GPT-2's Conv1D stores
[in, out]); `part = (k, n)` takes the k-th of n equal slices along the first
dimension after transposing (GPT-2's fused query/key/value). Renaming reports every
checkpoint key the map does not know, so a checkpoint of another architecture never
loads half-way by accident.
"""
import re
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

import torch

from .errors import CheckpointError


class KeyRow(NamedTuple):
    """One key-map entry: the checkpoint tensor `theirs` becomes our parameter `ours` (see the module
    docstring for `{i}`, `transpose` and `part`)."""

    ours: str
    theirs: str
    transpose: bool = False
    part: Optional[Tuple[int, int]] = None


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
        matches = _matches(compiled, key)
        if not matches:
            if not any(p.search(key) for p in ignored):
                unknown.append(key)
            continue
        for row, index in matches:
            name = row.ours.replace("{i}", index) if index is not None else row.ours
            value = tensor.T if row.transpose and tensor.ndim == 2 else tensor
            if row.part is not None:
                k, n = row.part
                value = value.chunk(n, dim=0)[k]
            ours[name] = value.contiguous()
    if unknown:
        raise CheckpointError(
            f"{source}: {len(unknown)} unknown key(s) that map to no parameter: "
            f"{_listing(unknown)}"
        )
    return ours


def rename_to_theirs(state: Dict[str, torch.Tensor], rows: List[KeyRow]) -> Dict[str, torch.Tensor]:
    """The inverse map (our names -> checkpoint names), e.g. to export or to test a map."""
    compiled = [(_pattern(r.ours), r) for r in rows]
    parts: Dict[str, Dict[int, torch.Tensor]] = {}
    transposed: Dict[str, bool] = {}
    for key, tensor in state.items():
        matches = _matches(compiled, key)
        if not matches:
            raise CheckpointError(f"No checkpoint name for our parameter '{key}'")
        row, index = matches[0]
        name = row.theirs.replace("{i}", index) if index is not None else row.theirs
        parts.setdefault(name, {})[row.part[0] if row.part else 0] = tensor
        transposed[name] = row.transpose
    out: Dict[str, torch.Tensor] = {}
    for name, pieces in parts.items():
        value = torch.cat([pieces[k] for k in sorted(pieces)], dim=0)
        out[name] = value.T.contiguous() if transposed[name] and value.ndim == 2 else value
    return out


def _matches(compiled, key: str) -> List[Tuple[KeyRow, Optional[str]]]:
    found = []
    for pattern, row in compiled:
        m = pattern.match(key)
        if m:
            found.append((row, m.group(1) if m.groups() else None))
    return found


def _listing(keys: List[str], most: int = 20) -> str:
    shown = ", ".join(sorted(keys)[:most])
    return shown + (f", ... ({len(keys) - most} more)" if len(keys) > most else "")
