"""Packed batches: the blocks run on the real positions only and give what the padded batch gives."""
import pytest
import torch

from spacy_bertfam.models.bert import BertConfig, BertEncoder
from spacy_bertfam.models.gpt import GptConfig, GptDecoder
from spacy_bertfam.models.layers import Packing

SIZES = {"hidden_width": 32, "n_layers": 2, "n_heads": 4, "intermediate_width": 64, "n_positions": 16}
FAMILIES = {
    "bert": lambda: BertEncoder(BertConfig(n_pieces=50, hidden_dropout=0.0, attention_dropout=0.0, **SIZES)),
    "gpt2": lambda: GptDecoder(GptConfig(n_pieces=50, embedding_dropout=0.0, residual_dropout=0.0,
                                         attention_dropout=0.0, **SIZES)),
    "gpt1": lambda: GptDecoder(GptConfig(n_pieces=50, embedding_dropout=0.0, residual_dropout=0.0,
                                         attention_dropout=0.0, pre_norm=False, **SIZES)),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_packed_layers_and_gradients_equal_the_padded_batch(family):
    torch.manual_seed(0)
    model = FAMILIES[family]()
    lengths = torch.tensor([16, 3, 9, 1, 12])
    mask = torch.arange(16)[None, :] < lengths[:, None]
    ids = torch.randint(1, 50, mask.shape) * mask
    packing = Packing.of(mask, min_padding=0.0)
    assert packing.rows.numel() == int(lengths.sum())

    padded_out = model(ids, mask)
    padded = [layer.reshape(-1, layer.shape[-1])[packing.rows] for layer in padded_out.layers]
    packed_out = model(ids, mask, packing=packing)
    assert packed_out.packing is packing and all(layer.shape == (41, 32) for layer in packed_out.layers)
    for a, b in zip(padded, packed_out.layers):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)
    if family == "bert":  # the pooler reads each window's [CLS] row
        torch.testing.assert_close(packed_out.pooled, padded_out.pooled, rtol=1e-5, atol=1e-5)

    weights = torch.randn(len(padded), 41, 32)
    grads = []
    for layers in (padded, packed_out.layers):
        model.zero_grad()
        sum((w * layer).sum() for w, layer in zip(weights, layers)).backward(retain_graph=True)
        grads.append({name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], rtol=1e-4, atol=1e-5, msg=name)


def test_no_packing_without_padding_and_positions_map_to_rows():
    assert Packing.of(torch.ones(3, 4, dtype=torch.bool)) is None
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]], dtype=torch.bool)
    assert Packing.of(mask, min_padding=0.5) is None  # half the positions are padding: not more than 0.5
    packing = Packing.of(mask, min_padding=0.0)
    assert packing.rows.tolist() == [0, 1, 3] and packing.index(torch.tensor([3, 0])).tolist() == [2, 0]
    x = torch.arange(6.0).reshape(2, 3, 1)
    assert packing.unpad(x).squeeze(1).tolist() == [0.0, 1.0, 3.0]
    assert packing.pad(packing.unpad(x)).squeeze(2).tolist() == [[0.0, 1.0, 0.0], [3.0, 0.0, 0.0]]



def test_rows_made_up_to_a_chosen_count_with_padding_positions_give_the_same_real_rows():
    """`rows_to`: the packed rows are made up to the count the layers run best with by taking
    padding positions, whose outputs are ignored; the real positions' outputs do not change."""
    torch.manual_seed(0)
    model = FAMILIES["bert"]().eval()
    lengths = torch.tensor([16, 3, 9, 1, 12])  # 41 real positions of 80
    mask = torch.arange(16)[None, :] < lengths[:, None]
    ids = torch.randint(1, 50, mask.shape) * mask
    plain = Packing.of(mask, min_padding=0.0)
    made_up = Packing.of(mask, rows_to=lambda n: 64)
    assert made_up.rows.numel() == 64 and made_up.padding.numel() == 16
    assert torch.equal(made_up.rows, made_up.rows.sort().values)
    assert set(plain.rows.tolist()) <= set(made_up.rows.tolist())
    real = plain.rows
    with torch.no_grad():
        a = model(ids, mask, packing=plain).layers
        b = model(ids, mask, packing=made_up).layers
    for x, y in zip(a, b):
        assert y.shape == (64, 32) and torch.isfinite(y).all()
        torch.testing.assert_close(y[made_up.index(real)], x, rtol=1e-5, atol=1e-5)
    # Not enough padding to reach the count: the real rows alone.
    assert Packing.of(mask, rows_to=lambda n: 100).rows.numel() == 41
    # Little padding, but a whole batch off the chosen counts: packed anyway.
    full = torch.ones(3, 7, dtype=torch.bool)
    full[0, 6] = False
    assert Packing.of(full, rows_to=lambda n: -(-n // 8) * 8).rows.numel() == 20  # 21 -> 24: packed
    assert Packing.of(full, rows_to=lambda n: -(-n // 7) * 7) is None  # 21 positions: a chosen count
