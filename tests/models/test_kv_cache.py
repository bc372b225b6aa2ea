"""The key/value cache: written in place with spare room, yet equal to concatenation."""
import torch

from spacy_bertfam.models.layers.attention import KVCache


def _kv(generator, n):
    return (torch.randn(2, 3, n, 4, generator=generator), torch.randn(2, 3, n, 4, generator=generator))


def test_extending_equals_concatenating_and_clone_branches():
    g = torch.Generator().manual_seed(0)
    parts = [_kv(g, n) for n in (5, 1, 1, 3, 1, 1)]
    cache = KVCache(*parts[0])
    for k, v in parts[1:]:
        cache = cache.extend(k, v)
    assert cache.length == 12
    torch.testing.assert_close(cache.keys, torch.cat([k for k, _ in parts], dim=2), rtol=0, atol=0)
    torch.testing.assert_close(cache.values, torch.cat([v for _, v in parts], dim=2), rtol=0, atol=0)
    # Two branches from one point: a clone keeps each branch's positions its own.
    branch = cache.clone().extend(*_kv(g, 1))
    other = cache.extend(*_kv(g, 1))
    assert not torch.equal(branch.keys[:, :, -1], other.keys[:, :, -1])
    torch.testing.assert_close(branch.keys[:, :, :12], other.keys[:, :, :12], rtol=0, atol=0)


def test_extending_under_autograd_keeps_gradients():
    g = torch.Generator().manual_seed(1)
    first = [t.requires_grad_() for t in _kv(g, 2)]
    new = [t.requires_grad_() for t in _kv(g, 1)]
    cache = KVCache(*first).extend(*new)
    (cache.keys.sum() + 2 * cache.values.sum()).backward()
    assert float(first[0].grad.min()) == 1.0 and float(new[1].grad.min()) == 2.0
