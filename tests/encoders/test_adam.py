"""The encoder shim's torch Adam step matches thinc's optimizer on the same parameters."""
import copy

import numpy as np
import pytest
import torch
from thinc.api import Adam, PyTorchShim

from spacy_bertfam.encoders.adam import handles
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
