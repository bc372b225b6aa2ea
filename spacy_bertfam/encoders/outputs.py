"""Between the encoder's batch-wide layer outputs and the per-Doc `DocEncoding`s, both ways."""
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from thinc.api import Ops

from .contract import DocEncoding

Alignment = Tuple[np.ndarray, np.ndarray]  # (token_lengths, token_pieces) of one Doc


def split_outputs(
    arrays: Sequence[Any], layer_ids: Sequence[int], offsets: np.ndarray, alignments: Sequence[Alignment],
    *, own: bool = False,
) -> List[DocEncoding]:
    """Cut (n_rows, width) layer outputs into one `DocEncoding` per Doc.

    offsets: (n_docs + 1,) first row of each Doc in the outputs.
    own: give each Doc copies of its rows rather than views of the batch's arrays. A view
        keeps the whole batch's array alive for as long as any of its Docs is kept, so a
        stream holds every batch that still has a Doc downstream (prediction copies; a
        training step, which keeps the batch's arrays for its backward pass anyway, does not).
    """
    return [
        DocEncoding(
            layers={layer: _rows(arr, int(offsets[d]), int(offsets[d + 1]), own) for layer, arr in zip(layer_ids, arrays)},
            token_lengths=lengths,
            token_pieces=pieces,
        )
        for d, (lengths, pieces) in enumerate(alignments)
    ]


def _rows(array: Any, start: int, end: int, own: bool) -> Any:
    rows = array[start:end]
    return rows.copy() if own else rows


def join_gradients(
    ops: Ops, d_encodings: Sequence[Dict[int, Any]], layer_ids: Sequence[int], offsets: np.ndarray, width: int
) -> List[Any]:
    """One (n_rows, width) gradient per layer from per-Doc gradients; missing ones count as zero."""
    grads = []
    for layer in layer_ids:
        grad = ops.alloc2f(int(offsets[-1]), width)
        for d, d_doc in enumerate(d_encodings):
            part: Optional[Any] = d_doc.get(layer)
            if part is not None:
                grad[int(offsets[d]) : int(offsets[d + 1])] += part
        grads.append(grad)
    return grads
