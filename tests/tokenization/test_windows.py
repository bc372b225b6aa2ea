"""Windowing against a mock encoder whose outputs are known: forward and backward.

The mock's output at a window position is `table[piece id] + offset[position in the
window]`, so what each doc piece should receive from its covering windows can be
worked out by hand from the window spans.
"""
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from spacy_bertfam.models.windowed import WindowedEncoder
from spacy_bertfam.tokenization.windows import plan_windows, window_spans

WIDTH, VOCAB, T = 3, 20, 16
CLS, SEP = 1, 2


class MockEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.table = nn.Parameter(torch.randn(VOCAB, WIDTH, generator=gen))
        self.offset = nn.Parameter(torch.randn(T, WIDTH, generator=gen))
        self.config = SimpleNamespace(n_layers=0, hidden_width=WIDTH)

    def embed_pieces(self, ids, sparse=False):
        return torch.nn.functional.embedding(ids, self.table, sparse=sparse)

    def forward(self, ids, mask, piece_vectors=None, packing=None):
        pieces = self.embed_pieces(ids) if piece_vectors is None else piece_vectors
        layer = pieces + self.offset[: ids.shape[1]][None]
        return SimpleNamespace(layers=[layer if packing is None else packing.unpad(layer)])


def _run(docs, *, window, stride, combine, batch_pieces=4096):
    plan = plan_windows(docs, window=window, stride=stride, prefix=[CLS], suffix=[SEP], padding_id=0,
                        combine=combine, batch_pieces=batch_pieces)
    mock = MockEncoder()
    to = torch.from_numpy
    (out,) = WindowedEncoder(mock)(to(plan.ids), to(plan.mask), [(to(w), n) for w, n in plan.chunks],
                                   to(plan.source), to(plan.target), to(plan.weight), plan.n_out, [0])
    return plan, mock, out


def _expected(docs, mock, *, window, stride, combine):
    """Per doc piece, the output and the window positions (with weights) it is made of."""
    table, offset = mock.table.detach().numpy(), mock.offset.detach().numpy()
    rows, feeds = [], []
    for ids in docs:
        covering = {}  # piece -> [(position in window, left context)]
        for start, end in window_spans(len(ids), window - 2, stride):
            for p in range(start, end):
                covering.setdefault(p, []).append((1 + p - start, p - start))
        for p, piece in enumerate(ids):
            cover = covering[p]
            if combine == "mean":
                used = [(pos, 1.0 / len(cover)) for pos, _ in cover]
            else:
                used = [(max(cover, key=lambda c: c[1])[0], 1.0)]
            rows.append(table[piece] + sum(w * offset[pos] for pos, w in used))
            feeds.append(used)
    return np.asarray(rows), feeds


@pytest.mark.parametrize("combine", ["mean", "most_left_context"])
@pytest.mark.parametrize("window,stride", [(6, 2), (6, 4), (8, 3), (16, 14)])
def test_overlapping_windows_combine_and_backprop_as_the_rule_says(combine, window, stride):
    rng = np.random.default_rng(window * 10 + stride)
    docs = [rng.integers(3, VOCAB, size=n) for n in (1, 4, 11, 0, 23, 9)]
    plan, mock, out = _run(docs, window=window, stride=stride, combine=combine, batch_pieces=3 * window)
    expected, feeds = _expected(docs, mock, window=window, stride=stride, combine=combine)
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-6, atol=1e-6)

    grad = torch.from_numpy(rng.normal(size=out.shape).astype(np.float32))
    out.backward(grad)
    g = grad.numpy()
    ids = np.concatenate([d for d in docs if len(d)])
    d_table = np.zeros((VOCAB, WIDTH), dtype=np.float32)
    np.add.at(d_table, ids, g)  # each piece's weights sum to 1 over its windows
    d_offset = np.zeros((T, WIDTH), dtype=np.float32)
    for row, used in enumerate(feeds):
        for pos, w in used:
            d_offset[pos] += w * g[row]
    assert mock.table.grad.is_sparse  # the table gradient on a CPU: the rows looked up
    np.testing.assert_allclose(mock.table.grad.to_dense().numpy(), d_table, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mock.offset.grad.numpy(), d_offset, rtol=1e-5, atol=1e-5)


def test_every_piece_is_covered_and_windows_hold_their_special_pieces():
    docs = [np.arange(3, 3 + n) % VOCAB for n in (5, 30)]
    plan = plan_windows(docs, window=8, stride=4, prefix=[CLS], suffix=[SEP], padding_id=0)
    assert sorted(set(plan.target.tolist())) == list(range(35))
    for row, mask in zip(plan.ids, plan.mask):
        real = row[mask]
        assert real[0] == CLS and real[-1] == SEP and len(real) <= 8


@pytest.mark.parametrize("window,stride,message", [(2, 1, "leaves no room"), (8, 7, "stride 7 must be between 1"),
                                                   (8, 0, "stride 0 must be between 1")])
def test_impossible_layouts_are_refused(window, stride, message):
    with pytest.raises(ValueError, match=message):
        plan_windows([np.arange(5)], window=window, stride=stride, prefix=[CLS], suffix=[SEP], padding_id=0)


def test_after_chunk_runs_once_per_chunk_of_a_several_chunk_call_without_changing_the_outputs():
    rng = np.random.default_rng(7)
    docs = [rng.integers(3, VOCAB, size=n) for n in (5, 14, 23, 9, 2)]
    plan = plan_windows(docs, window=8, stride=4, prefix=[CLS], suffix=[SEP], padding_id=0,
                        combine="mean", batch_pieces=16)
    assert len(plan.chunks) > 1
    to = torch.from_numpy
    args = (to(plan.ids), to(plan.mask), [(to(w), n) for w, n in plan.chunks],
            to(plan.source), to(plan.target), to(plan.weight), plan.n_out, [0])
    encoder = WindowedEncoder(MockEncoder())
    calls = []
    with torch.no_grad():
        (plain,) = encoder(*args)
        (hooked,) = encoder(*args, after_chunk=lambda: calls.append(1))
    assert len(calls) == len(plan.chunks)
    assert torch.equal(plain, hooked)
    calls.clear()
    single = plan_windows(docs[:1], window=8, stride=4, prefix=[CLS], suffix=[SEP], padding_id=0,
                          combine="mean", batch_pieces=16)
    assert len(single.chunks) == 1
    with torch.no_grad():
        encoder(to(single.ids), to(single.mask), [(to(w), n) for w, n in single.chunks], to(single.source),
                to(single.target), to(single.weight), single.n_out, [0], after_chunk=lambda: calls.append(1))
    assert calls == []  # one chunk: its pages serve the next call
