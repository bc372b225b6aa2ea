import pytest
import torch

from spacy_bertfam.models.layers import FeedForward
from spacy_bertfam.models.layers.activations import get_activation


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh", "relu", "silu"])
def test_prediction_in_place_equals_training_arithmetic(activation):
    """Without autograd the activation overwrites the hidden state; the output must be the
    one the same products give with the activation out of place, and the autograd path's
    up to the order of a product's sums (prediction multiplies through oneDNN on a CPU,
    training through torch's BLAS); gradients must still flow with autograd on."""
    torch.manual_seed(0)
    ffn = FeedForward(width=8, inner_width=32, activation=activation)
    x = torch.randn(3, 5, 8)
    with torch.no_grad():
        predicted = ffn(x)
        out_of_place = ffn.down(ffn.activation(ffn.up(x)))
    assert torch.equal(predicted, out_of_place)
    trained = ffn(x.requires_grad_())
    torch.testing.assert_close(predicted, trained.detach(), rtol=1e-6, atol=1e-6)
    trained.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0


@pytest.mark.parametrize("shape", [(1, 96), (63, 96), (64, 96), (65, 96), (200, 96), (3, 77, 96)])
def test_exact_gelu_in_place_equals_one_call_over_the_whole_tensor(shape):
    """The in-place exact GELU runs in two parts (see `activations._GELU_ROWS`); every value
    must be the one torch gives for the whole tensor."""
    x = torch.randn(*shape) * 3
    expected = torch.nn.functional.gelu(x)
    assert torch.equal(get_activation("gelu", in_place=True)(x.clone()), expected)


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch built without oneDNN")
def test_onednn_sees_few_gelu_shapes_however_many_rows_come(capfd):
    """oneDNN caches a primitive per input shape: the feed-forward's GELU must show it only
    row counts below 64 or multiples of it, whatever the batch's number of positions."""
    ffn = FeedForward(width=8, inner_width=32).eval()
    capfd.readouterr()
    with torch.no_grad(), torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
        for rows in (1, 5, 63, 64, 65, 129, 300, 1001):
            ffn(torch.randn(rows, 8))
    lines = [line for line in capfd.readouterr().out.splitlines() if "eltwise_gelu_erf" in line]
    row_counts = {int(line.split(",")[-2].split("x")[0]) for line in lines}
    assert len(lines) >= 8, "expected oneDNN to run the GELUs (its verbose lines not found)"
    assert row_counts == {1, 5, 63, 64, 128, 256, 44, 960, 41}
