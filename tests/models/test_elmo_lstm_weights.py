"""A change of the LSTM's weights must reach its next call without gradients: an in-place
step, an optimizer's update through `.data` (ours and thinc's: same storage, no new version)
and a load. (A kept copy of the stacked gate weights once missed the `.data` updates.)"""
import torch

from spacy_bertfam.models.elmo import ElmoBiLM
from spacy_bertfam.models.elmo.config import ElmoConfig


def _run(bilm: ElmoBiLM, char_ids: torch.Tensor, grad: bool) -> torch.Tensor:
    with torch.set_grad_enabled(grad):
        return bilm(char_ids)[0].layers[-1].detach()


def test_a_weight_change_reaches_the_next_call_without_gradients():
    torch.manual_seed(0)
    bilm = ElmoBiLM(ElmoConfig(filters=[(1, 4), (2, 8)], cell_width=16, projection_width=8)).eval()
    char_ids = torch.randint(1, 262, (3, 6, 50))
    first = _run(bilm, char_ids, grad=False)
    assert torch.equal(_run(bilm, char_ids, grad=False), first)
    cell = bilm.backward_layers[1]
    with torch.no_grad():  # in place, as an optimizer step does
        cell.state_linearity.weight.mul_(1.5)
    stepped = _run(bilm, char_ids, grad=False)
    assert not torch.equal(stepped, first)
    assert torch.allclose(stepped, _run(bilm, char_ids, grad=True), atol=1e-6)
    before = _run(bilm, char_ids, grad=False)
    cell.input_linearity.weight.data.mul_(0.5)  # as encoders/adam.py and thinc's shim update
    through_data = _run(bilm, char_ids, grad=False)
    assert not torch.equal(through_data, before)
    assert torch.allclose(through_data, _run(bilm, char_ids, grad=True), atol=1e-6)
    bilm.load_state_dict({k: v * 0.5 for k, v in bilm.state_dict().items()})
    assert torch.allclose(_run(bilm, char_ids, grad=False), _run(bilm, char_ids, grad=True), atol=1e-6)
