"""Pooling piece vectors into token vectors ("mean" | "first" | "last" piece, or "first_last":
the first and the last piece side by side, so that a span head can read where a word starts
from its first piece and where it ends from its last, as BERT's SQuAD labels do)."""
from typing import Callable, Tuple

from thinc.api import Ops
from thinc.types import Floats2d, Ints1d

from ..errors import ConfigError

POOLINGS = ("mean", "first", "last", "first_last")


def check_pooling(pooling: str) -> str:
    """`pooling` if it is one of POOLINGS; a ValueError otherwise."""
    if pooling not in POOLINGS:
        raise ConfigError(f"Unknown pooling '{pooling}'; expected one of {POOLINGS}")
    return pooling


def pooled_width(pooling: str, width: int) -> int:
    """Width of a token vector pooled from pieces of `width`."""
    return 2 * width if pooling == "first_last" else width


def pool_pieces(
    ops: Ops, pieces: Floats2d, token_pieces: Ints1d, token_lengths: Ints1d, pooling: str
) -> Tuple[Floats2d, Callable[[Floats2d], Floats2d]]:
    """Token vectors (n_tokens, W, or 2W for "first_last") from piece vectors (n_pieces, W).

    token_pieces, token_lengths: see `encoders.contract.DocEncoding` (every length >= 1). A piece
    shared by several tokens receives the sum of their gradients.
    """
    n_pieces, width = pieces.shape
    if pooling == "mean":
        rows = pieces[token_pieces]
        pooled = ops.reduce_mean(rows, token_lengths)

        def backprop_mean(d_pooled: Floats2d) -> Floats2d:
            d_rows = ops.backprop_reduce_mean(ops.xp.ascontiguousarray(d_pooled), token_lengths)
            return _scatter(ops, (n_pieces, width), token_pieces, d_rows)

        return pooled, backprop_mean
    ends = ops.xp.cumsum(token_lengths)
    firsts, lasts = token_pieces[ends - token_lengths], token_pieces[ends - 1]
    if pooling == "first_last":
        def backprop_first_last(d_pooled: Floats2d) -> Floats2d:
            d_pieces = _scatter(ops, (n_pieces, width), firsts, ops.xp.ascontiguousarray(d_pooled[:, :width]))
            ops.scatter_add(d_pieces, lasts, ops.xp.ascontiguousarray(d_pooled[:, width:]))
            return d_pieces

        return ops.xp.concatenate([pieces[firsts], pieces[lasts]], axis=1), backprop_first_last
    chosen = firsts if pooling == "first" else lasts

    def backprop_pick(d_pooled: Floats2d) -> Floats2d:
        return _scatter(ops, (n_pieces, width), chosen, d_pooled)

    return pieces[chosen], backprop_pick


def _scatter(ops: Ops, shape: Tuple[int, int], indices: Ints1d, rows: Floats2d) -> Floats2d:
    """Sum `rows` into a zero table at `indices` (repeated indices accumulate)."""
    table = ops.alloc2f(*shape)
    ops.scatter_add(table, indices, rows)
    return table
