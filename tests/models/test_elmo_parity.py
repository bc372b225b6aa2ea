"""ELMo: bilm-tf weights in our modules reproduce the original implementation's outputs."""
import json

import h5py
import numpy as np
import pytest
import torch

from spacy_bertfam.convert import CheckpointError, load_state, read_checkpoint
from spacy_bertfam.models.elmo import ElmoBiLM
from spacy_bertfam.tokenization.characters import batch_char_ids

from ..conftest import TEST_DATA

FIXTURE = TEST_DATA / "elmo_test_fixture"


@pytest.fixture(scope="module")
def bilm():
    ckpt = read_checkpoint(FIXTURE)
    model = ElmoBiLM(ckpt.config).eval()
    load_state(model, ckpt.state, source=ckpt.source)
    return model


def test_character_cnn_matches_reference(bilm):
    words = (FIXTURE / "vocab_test.txt").read_text(encoding="utf8").strip().split("\n")
    assert len(words) > 400 and "<S>" in words
    with torch.no_grad():
        ours = bilm.char_cnn(torch.from_numpy(batch_char_ids([words], boundaries=False)))[0].numpy()
    with h5py.File(FIXTURE / "elmo_token_embeddings.hdf5", "r") as f:
        expected = f["embedding"][...][: len(words)]
    error = float(np.abs(ours - expected).max())
    print("ELMo layer 0 max-abs", error)
    assert error <= 1e-6


def run_fixture(bilm, stateful: bool) -> float:
    sentences = json.loads((FIXTURE / "sentences.json").read_text(encoding="utf8"))
    expected = [h5py.File(FIXTURE / f"lm_embeddings_{k}.hdf5", "r") for k in range(3)]
    width = bilm.config.projection_width
    state, worst, compared = None, 0.0, 0
    for i in range(10):
        batch = [sentences[k][i].split() for k in range(3)]
        with torch.no_grad():
            out, new_state = bilm(torch.from_numpy(batch_char_ids(batch)), state=state)
        state = new_state if stateful else None
        for k, words in enumerate(batch):
            top = out.layers[-1][k, 1 : len(words) + 1].numpy()  # <S> and </S> removed
            want = expected[k][str(i)][...]
            assert want.shape == (2, len(words), width)
            worst = max(worst, float(np.abs(top[:, :width] - want[0]).max()),
                        float(np.abs(top[:, width:] - want[1]).max()))
            compared += 1
    assert compared == 30
    return worst


def test_stateful_bilm_matches_reference(bilm):
    error = run_fixture(bilm, stateful=True)
    print("ELMo top layer max-abs (30 sentences, state carried)", error)
    assert error <= 1e-5
    # The reference carried state between batches: without it the outputs differ.
    assert run_fixture(bilm, stateful=False) > 1e-3


def test_layers_and_padding(bilm):
    ids = torch.from_numpy(batch_char_ids([["a", "short", "one"], ["x"]]))
    with torch.no_grad():
        out, _ = bilm(ids)
        alone, _ = bilm(ids[1:, :3])
    assert [tuple(layer.shape) for layer in out.layers] == [(2, 5, 32)] * 3
    # Layer 0 is the token representation twice; padding does not leak into a row.
    torch.testing.assert_close(out.layers[0][..., :16], out.layers[0][..., 16:])
    for a, b in zip(out.layers, alone.layers):
        torch.testing.assert_close(a[1, :3], b[0], atol=1e-6, rtol=0)


def test_bad_bilm_directories(tmp_path):
    import shutil

    broken = tmp_path / "elmo"
    shutil.copytree(FIXTURE, broken)
    options = json.loads((broken / "options.json").read_text())
    del options["lstm"]["projection_dim"]
    (broken / "options.json").write_text(json.dumps(options))
    with pytest.raises(CheckpointError, match="options.json lacks or mangles the field 'projection_dim'"):
        read_checkpoint(broken)
    shutil.copy(FIXTURE / "options.json", broken / "options.json")
    with h5py.File(broken / "lm_weights.hdf5", "a") as f:
        del f["CNN_proj/b_proj"]
    with pytest.raises(CheckpointError, match=r"missing dataset\(s\) \['CNN_proj/b_proj'\]"):
        read_checkpoint(broken)
