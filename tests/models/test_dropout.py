"""Dropout from 16-bit random slices: the rate, the scale, the gradient, and attention with it."""
import math

import pytest
import torch
import torch.nn.functional as F

from spacy_bertfam.models.layers.attention import SelfAttention, attend_with_dropout
from spacy_bertfam.models.layers.dropout import Dropout, dropout


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_drop_rate_and_expectation(p):
    torch.manual_seed(0)
    n = 1_000_003  # not a multiple of 4: the last 64-bit draw is cut
    y = dropout(torch.ones(n), p)
    dropped = float((y == 0).float().mean())
    assert abs(dropped - p) < 5 * math.sqrt(p * (1 - p) / n)
    kept = y[y != 0]
    scale = 65536 / (65536 - round(p * 65536))
    assert torch.all(kept == torch.tensor(scale, dtype=torch.float32))
    assert abs(float(y.mean()) - 1.0) < 5 * math.sqrt(p / (1 - p) / n)


def test_every_slice_of_the_random_integers_drops_at_the_rate():
    torch.manual_seed(1)
    y = dropout(torch.ones(4 * 250_000), 0.1).view(-1, 4)
    rates = (y == 0).float().mean(0)
    assert torch.all((rates - 0.1).abs() < 5 * math.sqrt(0.09 / 250_000)), rates


def test_gradient_is_the_mask_times_the_scale():
    torch.manual_seed(2)
    x = torch.randn(64, 33, requires_grad=True)
    y = dropout(x, 0.3)
    g = torch.randn(64, 33)
    y.backward(g)
    factor = y.detach() / x.detach()  # 0 where dropped, the scale where kept
    torch.testing.assert_close(x.grad, g * factor, rtol=1e-6, atol=0)
    kept = factor[factor != 0]
    assert 0 < kept.numel() < factor.numel()
    torch.testing.assert_close(kept, torch.full_like(kept, 65536 / (65536 - round(0.3 * 65536))))


def test_identity_in_eval_or_at_zero_and_zero_at_one():
    x = torch.randn(8, 5)
    module = Dropout(0.4).eval()
    assert module(x) is x
    assert dropout(x, 0.0) is x
    assert torch.all(dropout(x, 1.0) == 0)
    with pytest.raises(ValueError, match="between 0 and 1"):
        Dropout(1.5)


def test_same_seed_same_mask():
    x = torch.randn(100, 7)
    torch.manual_seed(3)
    a = dropout(x, 0.2)
    torch.manual_seed(3)
    b = dropout(x, 0.2)
    assert torch.equal(a, b)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_without_dropout_equals_torch(causal):
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(3, 4, 9, 8, generator=g, dtype=torch.float64) for _ in range(3))
    attend = torch.ones(3, 1, 1, 9, dtype=torch.bool)
    attend[0, ..., 6:] = False
    attend[2, ..., 3:] = False
    if causal:
        attend = attend & torch.ones(9, 9, dtype=torch.bool).tril()
    ours = attend_with_dropout(q, k, v, attend, 0.0)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=attend)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)


def test_attention_drops_probabilities_in_training_only():
    torch.manual_seed(5)
    layer = SelfAttention(width=16, n_heads=2, dropout=0.5)
    x = torch.randn(2, 6, 16)
    layer.eval()
    reference, _ = layer(x)
    layer.train()
    dropped, _ = layer(x)
    assert not torch.allclose(dropped, reference)
    layer.dropout = 0.0  # training without dropout: torch's kernel, the same numbers as eval
    undropped, _ = layer(x)
    torch.testing.assert_close(undropped, reference)
