"""ELMo's random initialisation keeps each module's own rule (the highway carry bias)."""
import torch

from spacy_bertfam.models.elmo import ElmoBiLM, ElmoConfig
from spacy_bertfam.models.layers.highway import Highway


def test_reset_parameters_keeps_the_highway_carry_bias():
    model = ElmoBiLM(ElmoConfig(n_highway=2))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(1)
    model.reset_parameters()
    highways = [m for m in model.modules() if isinstance(m, Highway)]
    assert highways and all(torch.all(g.bias == -2.0) for h in highways for g in h.gates)
    changed = [k for k, v in model.state_dict().items() if v.dtype.is_floating_point and not torch.equal(v, before[k])]
    assert any("highway" in k and "transforms" in k and k.endswith("weight") for k in changed)
