"""The pooler's layer combinations against the same arithmetic written out by hand."""
import numpy as np
import pytest

from spacy_bertfam.encoders.contract import DocEncoding, EncoderContract
from spacy_bertfam.pooling.pooler import build_pooler, link_pooler

WIDTH, LAYERS = 3, [1, 2]


def _encodings(rng):
    """Two docs: 3 tokens over 4 pieces, and 2 tokens over 2 pieces."""
    shapes = [(4, np.array([1, 2, 1]), np.array([0, 1, 2, 3])), (2, np.array([1, 1]), np.array([0, 1]))]
    return [DocEncoding(layers={k: rng.normal(size=(n, WIDTH)).astype("f") for k in LAYERS},
                        token_lengths=lengths, token_pieces=pieces) for n, lengths, pieces in shapes]


def _mean_pooled(enc, layer):
    rows = enc.layers[layer]
    return np.stack([rows[0], rows[1:3].mean(axis=0), rows[3]]) if len(rows) == 4 else rows


@pytest.mark.parametrize("combine", ["concat", "mean"])
def test_combination_and_its_gradient(combine):
    rng = np.random.default_rng(0)
    encodings = _encodings(rng)
    width = WIDTH * len(LAYERS) if combine == "concat" else WIDTH
    pooler = build_pooler(width=width, pooling="mean", layers=LAYERS, combine=combine)
    link_pooler(pooler, EncoderContract(family="bert", n_layers=3, width=WIDTH, default_pooling="mean"), where="test")
    outputs, backprop = pooler.begin_update(encodings)
    for enc, out in zip(encodings, outputs):
        per_layer = [_mean_pooled(enc, k) for k in LAYERS]
        expected = np.hstack(per_layer) if combine == "concat" else sum(per_layer) / len(LAYERS)
        np.testing.assert_allclose(out, expected, rtol=1e-6)
    d_outputs = [rng.normal(size=out.shape).astype("f") for out in outputs]
    grads = backprop(d_outputs)
    # Token 1 of doc 0 is pieces 1 and 2: each gets half its gradient.
    d_token = d_outputs[0][1]
    for i, layer in enumerate(LAYERS):
        share = d_token[i * WIDTH : (i + 1) * WIDTH] if combine == "concat" else d_token / len(LAYERS)
        np.testing.assert_allclose(grads[0][layer][1], share / 2, rtol=1e-6)
        np.testing.assert_allclose(grads[0][layer][2], share / 2, rtol=1e-6)


def test_first_last_puts_a_tokens_first_and_last_pieces_side_by_side():
    rng = np.random.default_rng(1)
    encodings = _encodings(rng)
    contract = EncoderContract(family="bert", n_layers=3, width=WIDTH, default_pooling="mean")
    pooler = build_pooler(width=2 * WIDTH, pooling="first_last", layers=[2], combine="scalar_mix")
    link_pooler(pooler, contract, where="test")
    outputs, backprop = pooler.begin_update(encodings)
    rows = encodings[0].layers[2]
    np.testing.assert_allclose(outputs[0], np.stack([np.hstack([rows[0], rows[0]]), np.hstack([rows[1], rows[2]]),
                                                     np.hstack([rows[3], rows[3]])]))
    d_outputs = [rng.normal(size=out.shape).astype("f") for out in outputs]
    d = backprop(d_outputs)[0][2]
    d0 = d_outputs[0]
    # A one-piece token's piece gets both halves; a two-piece token's first piece the start
    # half and its last piece the end half.
    np.testing.assert_allclose(d, np.stack([d0[0, :WIDTH] + d0[0, WIDTH:], d0[1, :WIDTH], d0[1, WIDTH:],
                                            d0[2, :WIDTH] + d0[2, WIDTH:]]), rtol=1e-6)


def test_first_last_asks_for_twice_the_width():
    contract = EncoderContract(family="bert", n_layers=3, width=WIDTH, default_pooling="mean")
    pooler = build_pooler(width=WIDTH, pooling="first_last", layers=[-1], combine="scalar_mix")
    with pytest.raises(ValueError, match=f"set width = {2 * WIDTH}"):
        link_pooler(pooler, contract, where="test")
