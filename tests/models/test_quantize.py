"""int8 linear layers: close to fp32, and a row's output depends on that row alone."""
from unittest import mock

import torch
from torch import nn

from spacy_bertfam.models import quantize
from spacy_bertfam.models.quantize import Int8Linear, int8_copy


def test_int8_linear_is_close_to_fp32_and_row_independent():
    torch.manual_seed(0)
    linear = nn.Linear(64, 96)
    x = torch.randn(2, 9, 64)
    x[0, 3] *= 50  # an outlier token must not coarsen the others
    quantized = Int8Linear(linear)
    with torch.no_grad():
        expected, got = linear(x), quantized(x)
    assert got.shape == expected.shape and got.dtype == torch.float32
    error = ((got - expected).norm(dim=-1) / expected.norm(dim=-1)).max().item()
    assert 0 < error < 0.02, error
    with torch.no_grad():
        assert torch.equal(quantized(x[1:, 4:6]), got[1:, 4:6])
        assert torch.equal(quantized(x[0, 3]), got[0, 3])


def test_int8_copy_replaces_linear_layers_but_the_kept_ones():
    model = nn.Sequential(nn.Linear(8, 8, bias=False))
    model.down = nn.Linear(8, 8)
    copy = int8_copy(model, keep_fp32=("down",))
    assert isinstance(copy[0], Int8Linear) and copy[0].bias is None
    assert type(copy.down) is nn.Linear and isinstance(model[0], nn.Linear)
    x = torch.randn(5, 8)
    with torch.no_grad():
        assert (copy[0](x) - model[0](x)).abs().max() < 0.05 * model[0](x).abs().max()


def test_query_key_and_value_quantize_their_input_once_and_keep_nothing():
    torch.manual_seed(0)
    attention = nn.Module()
    for name in ("query", "key", "value", "output"):
        setattr(attention, name, nn.Linear(16, 16))
    copy = int8_copy(attention)
    assert copy.query.quantizer is copy.key.quantizer is copy.value.quantizer is not copy.output.quantizer
    x = torch.randn(4, 16)
    with torch.no_grad():
        alone = [Int8Linear(getattr(attention, name))(x) for name in ("query", "key", "value")]
        with mock.patch.object(quantize, "_quantize_rows", wraps=quantize._quantize_rows) as spy:
            shared = [getattr(copy, name)(x) for name in ("query", "key", "value")]
    assert spy.call_count == 1 and all(torch.equal(a, b) for a, b in zip(alone, shared))
    assert copy.query.quantizer._last is None  # all three read it: nothing is held
