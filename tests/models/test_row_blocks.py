import pytest
import torch

from spacy_bertfam.models.layers.row_blocks import BLOCK, RowBlockedLinear, block_rows

ROW_COUNTS = (1, 3, 7, 33, 64, 65, 300, BLOCK, BLOCK + 1, 2 * BLOCK + 37)


def _pair(dtype):
    torch.manual_seed(0)
    plain = torch.nn.Linear(48, 80).to(dtype)
    blocked = block_rows(torch.nn.Sequential(torch.nn.Linear(48, 80)))[0].to(dtype)
    blocked.load_state_dict(plain.state_dict())
    return plain, blocked


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_row_blocked_linear_gives_the_plain_layers_values(dtype):
    plain, blocked = _pair(dtype)
    assert isinstance(blocked, RowBlockedLinear)
    with torch.no_grad():
        for n in ROW_COUNTS:
            x = torch.randn(n, 48).to(dtype)
            torch.testing.assert_close(blocked(x), plain(x))
        x = torch.randn(3, 700, 48).to(dtype)  # 3-D input, 2,100 rows
        torch.testing.assert_close(blocked(x), plain(x))


def test_block_rows_keeps_the_parameters_and_other_layers():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    weight = model[0].weight
    block_rows(model)
    assert type(model[0]) is RowBlockedLinear and model[0].weight is weight
    assert type(model[1]) is torch.nn.LayerNorm


@pytest.mark.skipif(not torch.backends.mkldnn.is_available() or not torch.ops.mkldnn._is_mkldnn_bf16_supported(),
                    reason="no oneDNN bfloat16 products on this CPU")
def test_onednn_sees_a_bounded_set_of_bf16_product_shapes(capfd):
    """oneDNN keeps a compiled product per shape: whatever the row count, the products must
    come in the padded sizes (at most BLOCK rows)."""
    _, blocked = _pair(torch.bfloat16)
    capfd.readouterr()
    with torch.no_grad(), torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
        for n in ROW_COUNTS:
            blocked(torch.randn(n, 48).to(torch.bfloat16))
    lines = [line for line in capfd.readouterr().out.splitlines() if ",matmul," in line and ",exec," in line]
    rows = {int(line.split(",")[-2].split("x")[0]) for line in lines}
    assert len(lines) >= len(ROW_COUNTS), "expected oneDNN to run the products (its verbose lines not found)"
    # (torch multiplies a single row without oneDNN's matmul on some versions)
    assert rows - {1} == {4, 8, 64, 128, 320, BLOCK}, rows
