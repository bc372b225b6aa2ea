"""The GPT key maps both ways: Hugging Face names -> ours -> Hugging Face, tensors unchanged."""
import re

import pytest
import torch
from safetensors.torch import load_file

from spacy_bertfam.convert import read_checkpoint
from spacy_bertfam.convert.hf_gpt import GPT1_KEY_MAP, GPT2_KEY_MAP, IGNORED
from spacy_bertfam.convert.keymap import rename_to_ours, rename_to_theirs
from spacy_bertfam.models.gpt import GptDecoder
from tests.conftest import make_hf_gpt


@pytest.mark.parametrize("gpt1", [False, True])
def test_gpt_key_map_round_trip(tmp_path, gpt1):
    directory = make_hf_gpt(tmp_path / "gpt", gpt1=gpt1)
    state = load_file(str(directory / "model.safetensors"))
    theirs = {k.removeprefix("transformer."): v for k, v in state.items()}
    key_map = GPT1_KEY_MAP if gpt1 else GPT2_KEY_MAP
    ours = rename_to_ours(theirs, key_map, ignore=IGNORED, source="test")
    assert set(ours) == set(GptDecoder(read_checkpoint(directory).config).state_dict())
    # The fused query/key/value became three tensors of one third each.
    assert ours["layers.0.attention.query.weight"].shape == (32, 32)
    back = rename_to_theirs(ours, key_map)
    loaded = {k for k in theirs if not any(re.match(p, k) for p in IGNORED)}
    assert set(back) == loaded
    assert all(torch.equal(back[k], theirs[k]) for k in back)
