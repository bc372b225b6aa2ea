"""The encoder shim's torch Adam step matches thinc's optimizer on the same parameters."""
import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from thinc.api import SGD, Adam, PyTorchShim
from torch import nn

from spacy_bertfam.encoders.adam import adam_step, handles
from spacy_bertfam.encoders.contract import EncoderShim
from spacy_bertfam.models.bert.config import BertConfig
from spacy_bertfam.models.bert.encoder import BertEncoder


@pytest.mark.parametrize("decay", [True, False])
def test_torch_adam_step_matches_thinc(decay):
    torch.manual_seed(0)
    module = BertEncoder(BertConfig(n_pieces=50, hidden_width=16, n_layers=2, n_heads=2, intermediate_width=32,
                                    n_positions=16))
    ours, theirs = EncoderShim(module), PyTorchShim(copy.deepcopy(module))
    settings = dict(L2=0.01, grad_clip=1.0, use_averages=False, L2_is_weight_decay=decay)
    opt_ours, opt_theirs = Adam(0.01, **settings), Adam(0.01, **settings)
    assert handles(opt_ours) and not handles(Adam(0.01, use_averages=True))
    for step in range(4):
        for (name, p), q in zip(ours._model.named_parameters(), theirs._model.parameters()):
            # Some gradients above the clipping norm, some below; the pooler gets none.
            grad = None if name.startswith("pooler") else torch.randn_like(p) * (3.0 if step % 2 else 0.05)
            p.grad, q.grad = (None, None) if grad is None else (grad.clone(), grad.clone())
        ours.finish_update(opt_ours)
        theirs.finish_update(opt_theirs)
        for (name, p), q in zip(ours._model.named_parameters(), theirs._model.parameters()):
            assert torch.allclose(p, q, rtol=1e-5, atol=1e-7), (step, name, float((p - q).abs().max()))
            assert p.grad is None or not p.grad.any()
    ours_state = {key[1]: opt_ours.mom2[key] for key in opt_ours.mom2}
    theirs_state = {key[1]: opt_theirs.mom2[key] for key in opt_theirs.mom2}
    assert ours_state.keys() == theirs_state.keys() and not any(k.startswith("pooler") for k in ours_state)
    assert all(np.allclose(ours_state[k], theirs_state[k], rtol=1e-5, atol=1e-9) for k in ours_state)


@pytest.mark.parametrize("decay", [True, False])
def test_sparse_gradient_is_applied_as_its_dense_form(decay):
    """An embedding table's sparse gradient (the rows looked up, some twice) moves the weights
    and moments as the dense gradient with zero rows would, over steps with and without
    clipping; the sparse gradient is removed after the step, the dense one zeroed."""
    torch.manual_seed(1)
    sparse_table, dense_table = (nn.Embedding(40, 6) for _ in range(2))
    dense_table.load_state_dict(sparse_table.state_dict())
    settings = dict(L2=0.01, grad_clip=1.0, use_averages=False, L2_is_weight_decay=decay)
    opt_sparse, opt_dense = Adam(0.01, **settings), Adam(0.01, **settings)
    for step in range(4):
        ids = torch.randint(0, 40, (3, 7))
        upstream = torch.randn(3, 7, 6) * (3.0 if step % 2 else 0.05)
        (F.embedding(ids, sparse_table.weight, sparse=True) * upstream).sum().backward()
        (F.embedding(ids, dense_table.weight) * upstream).sum().backward()
        assert sparse_table.weight.grad.is_sparse and not dense_table.weight.grad.is_sparse
        adam_step(sparse_table, opt_sparse, 0)
        adam_step(dense_table, opt_dense, 0)
        torch.testing.assert_close(sparse_table.weight, dense_table.weight, rtol=1e-6, atol=1e-7)
        assert sparse_table.weight.grad is None and not dense_table.weight.grad.any()
    for state in ("mom1", "mom2"):
        ours, theirs = getattr(opt_sparse, state)[(0, "weight")], getattr(opt_dense, state)[(0, "weight")]
        assert np.allclose(ours, theirs, rtol=1e-6, atol=1e-9)
    assert opt_sparse.nr_update[(0, "weight")] == opt_dense.nr_update[(0, "weight")] == 4


def test_other_optimizers_get_sparse_gradients_densified():
    torch.manual_seed(2)
    module = BertEncoder(BertConfig(n_pieces=50, hidden_width=16, n_layers=1, n_heads=2, intermediate_width=32,
                                    n_positions=16))
    ours, theirs = EncoderShim(module), PyTorchShim(copy.deepcopy(module))
    ids = torch.randint(0, 50, (2, 5))
    for shim, sparse in ((ours, True), (theirs, False)):
        shim._model.embed_pieces(ids, sparse=sparse).sum().backward()
    assert ours._model.embeddings.pieces.weight.grad.is_sparse
    sgd_ours, sgd_theirs = SGD(0.1), SGD(0.1)
    assert not handles(sgd_ours)
    ours.finish_update(sgd_ours)
    theirs.finish_update(sgd_theirs)
    torch.testing.assert_close(ours._model.embeddings.pieces.weight, theirs._model.embeddings.pieces.weight)
