import pytest
import torch

from spacy_bertfam.models.layers import FeedForward


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh", "relu", "silu"])
def test_prediction_in_place_equals_training_arithmetic(activation):
    """Without autograd the activation overwrites the hidden state; the output must be the
    one the autograd path computes, and gradients must still flow with autograd on."""
    torch.manual_seed(0)
    ffn = FeedForward(width=8, inner_width=32, activation=activation)
    x = torch.randn(3, 5, 8)
    with torch.no_grad():
        predicted = ffn(x)
    trained = ffn(x.requires_grad_())
    assert torch.equal(predicted, trained.detach())
    trained.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
