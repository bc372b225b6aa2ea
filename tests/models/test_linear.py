"""Linear layers that predict through oneDNN on a CPU in a bounded set of row counts."""
import pytest
import torch
import torch.nn.functional as F

from spacy_bertfam.models.layers.linear import BLOCK, Linear, linear, padded_rows

ROW_COUNTS = (1, 3, 7, 33, 64, 65, 300, 2049, BLOCK, BLOCK + 1, 2 * BLOCK + 37)
ONEDNN = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def _layer(dtype):
    torch.manual_seed(0)
    return Linear(48, 80).to(dtype)


def test_padded_rows_are_a_bounded_set_that_covers_every_count():
    counts = [padded_rows(n) for n in range(1, BLOCK + 1)]
    assert all(c >= n for n, c in zip(range(1, BLOCK + 1), counts))
    assert counts == sorted(counts) and len(set(counts)) == 54 and max(counts) == BLOCK
    assert padded_rows(5) == 8 and padded_rows(33) == 64 and padded_rows(2049) == 2176


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_prediction_gives_what_f_linear_gives(dtype):
    layer = _layer(dtype)
    tolerance = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 1e-2}
    with torch.no_grad():
        for n in ROW_COUNTS:
            x = torch.randn(n, 48).to(dtype)
            torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias), **tolerance)
        x = torch.randn(3, 700, 48).to(dtype)[:, ::2]  # 3-D and not contiguous
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias), **tolerance)
        torch.testing.assert_close(linear(x, layer.weight), F.linear(x, layer.weight), **tolerance)  # no bias
        assert layer(torch.randn(0, 48).to(dtype)).shape == (0, 80)


def test_a_row_does_not_depend_on_its_batch_mates():
    """Padding to other counts must not change a row's value: batch-invariant prediction."""
    layer = _layer(torch.float32)
    x = torch.randn(300, 48)
    with torch.no_grad():
        whole = layer(x)
        for n in (1, 5, 33, 64, 299):
            torch.testing.assert_close(layer(x[:n]), whole[:n], rtol=0, atol=1e-6)


def test_training_runs_f_linear_with_gradients():
    layer = _layer(torch.float32)
    x = torch.randn(37, 48, requires_grad=True)
    out = layer(x)
    assert torch.equal(out, F.linear(x, layer.weight, layer.bias))
    out.sum().backward()
    assert layer.weight.grad is not None and x.grad is not None
    assert list(layer.state_dict()) == ["weight", "bias"]  # loads what nn.Linear saved


def test_torch_switch_turns_the_onednn_products_off():
    """`torch.backends.mkldnn.enabled = False` (a CPU whose BLAS is the faster) must give
    F.linear's products to the last bit (with the switch on, oneDNN's differ from them here
    in the last bits: K = 384 sums in another order)."""
    torch.manual_seed(0)
    layer, x = Linear(384, 80), torch.randn(37, 384)
    enabled = torch.backends.mkldnn.enabled
    with torch.no_grad():
        expected = F.linear(x, layer.weight, layer.bias)
        torch.backends.mkldnn.enabled = False
        try:
            assert torch.equal(layer(x), expected)
        finally:
            torch.backends.mkldnn.enabled = enabled


@pytest.mark.skipif(not ONEDNN, reason="torch without oneDNN: F.linear throughout")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_onednn_sees_only_the_padded_row_counts(capfd, dtype):
    """oneDNN keeps a compiled product per shape: whatever the row count, the products must
    come in the padded counts."""
    if dtype == torch.bfloat16 and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        pytest.skip("no oneDNN bfloat16 products on this CPU")
    layer = _layer(dtype)
    capfd.readouterr()
    with torch.no_grad(), torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
        for n in ROW_COUNTS:
            layer(torch.randn(n, 48).to(dtype))
    lines = [line for line in capfd.readouterr().out.splitlines() if ",exec," in line
             and (",inner_product," in line or ",matmul," in line)]
    assert len(lines) >= len(ROW_COUNTS), "expected oneDNN to run the products (its verbose lines not found)"
    problems = [line.split(",")[-2] for line in lines]  # inner product "mb8ic48oc80", matmul "8x48:48x80"
    rows = {int(p[2:].split("ic")[0]) if p.startswith("mb") else int(p.split("x")[0]) for p in problems}
    assert rows == {1, 4, 8, 64, 128, 320, 2176, BLOCK}, rows
