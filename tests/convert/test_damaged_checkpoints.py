"""Checkpoints from strangers and damaged files: refused with a CheckpointError naming the file."""
import json
import pickle
from pathlib import Path

import pytest
import spacy
import torch

from spacy_bertfam.convert import CheckpointError, read_checkpoint, save_checkpoint
from spacy_bertfam.loaders import checkpoint_loader


class _RunsCode:
    """Unpickling this calls `Path.touch` on a marker file: the kind of payload a
    malicious `pytorch_model.bin` carries."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_pickle_that_would_run_code_is_refused(hf_bert_dir, tmp_path):
    (hf_bert_dir / "model.safetensors").unlink()
    marker = tmp_path / "pwned"
    weights = {"embeddings.word_embeddings.weight": torch.zeros(3), "payload": _RunsCode(marker)}
    with (hf_bert_dir / "pytorch_model.bin").open("wb") as f:
        pickle.dump(weights, f)
    with pytest.raises(CheckpointError, match=r"pytorch_model.bin holds more than tensors, and unpickling it could run code"):
        read_checkpoint(hf_bert_dir)
    assert not marker.exists()  # refused before anything ran


def test_truncated_safetensors_names_the_file(hf_bert_dir, tmp_path):
    ours = save_checkpoint(tmp_path / "ours", read_checkpoint(hf_bert_dir))
    weights = ours / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(CheckpointError, match=r"model.safetensors is not a readable safetensors file .*truncated"):
        read_checkpoint(ours)


def test_truncated_pytorch_bin_names_the_file(hf_bert_dir):
    from safetensors.torch import load_file

    tensors = load_file(str(hf_bert_dir / "model.safetensors"))
    (hf_bert_dir / "model.safetensors").unlink()
    torch.save(tensors, hf_bert_dir / "pytorch_model.bin")
    data = (hf_bert_dir / "pytorch_model.bin").read_bytes()
    (hf_bert_dir / "pytorch_model.bin").write_bytes(data[: len(data) // 3])
    with pytest.raises(CheckpointError, match=r"pytorch_model.bin is not a readable PyTorch weight file"):
        read_checkpoint(hf_bert_dir)


def test_config_that_is_not_json(hf_bert_dir):
    (hf_bert_dir / "config.json").write_text("{not json", encoding="utf8")
    with pytest.raises(CheckpointError, match=r"config.json is not valid JSON"):
        read_checkpoint(hf_bert_dir)


def test_checkpoint_of_another_family_is_refused_by_the_loader(hf_bert_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo_features", config={"model": {"@architectures": "spacy-bertfam.ElmoBiLM.v1"}})
    with pytest.raises(CheckpointError, match=r"is a bert checkpoint; this encoder is elmo"):
        nlp.get_pipe("elmo_features").initialize(lambda: [], nlp=nlp, encoder_loader=checkpoint_loader(hf_bert_dir))


def test_our_format_without_its_tokenizer(hf_bert_dir, tmp_path):
    ours = save_checkpoint(tmp_path / "ours", read_checkpoint(hf_bert_dir))
    (ours / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError, match=r"missing tokenizer file tokenizer.json \(a bert checkpoint needs one\)"):
        read_checkpoint(ours)
    (ours / "tokenizer.json").write_text("[]", encoding="utf8")
    with pytest.raises(CheckpointError, match=r"tokenizer.json is not a readable tokenizer file"):
        read_checkpoint(ours)


def test_our_format_config_of_unknown_family(hf_bert_dir, tmp_path):
    ours = save_checkpoint(tmp_path / "ours", read_checkpoint(hf_bert_dir))
    meta = json.loads((ours / "config.json").read_text())
    meta["spacy_bertfam"]["family"] = "xlnet"
    (ours / "config.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"unknown model family 'xlnet'"):
        read_checkpoint(ours)


@pytest.mark.parametrize("factory,family,command,var", [
    ("elmo_features", "elmo", "configs/pretrain_elmo.cfg training/elmo_pretrain", "elmo_checkpoint"),
    ("gpt_lm", "gpt", "configs/pretrain_gpt.cfg training/gpt_pretrain", "gpt_checkpoint"),
])
def test_missing_checkpoint_says_which_command_makes_it(tmp_path, factory, family, command, var):
    nlp = spacy.blank("en")
    nlp.add_pipe(factory)
    with pytest.raises(CheckpointError) as error:
        nlp.get_pipe(factory).initialize(lambda: [], nlp=nlp, encoder_loader=checkpoint_loader(tmp_path / "none"))
    message = str(error.value)
    assert f"Checkpoint not found: {tmp_path / 'none'}" in message
    assert f"bertfam-pretrain {command}" in message and f"--paths.{var} PATH" in message


@pytest.mark.parametrize("factory,suggested", [("elmo_features", "training/elmo_pretrain/final"),
                                               ("gpt_lm", "training/gpt_pretrain/final"),
                                               ("bert_encoder", "PretrainedLoader.v1")])
def test_uninitialised_encoder_suggests_a_loader_of_its_family(factory, suggested):
    nlp = spacy.blank("en")
    nlp.add_pipe(factory)
    with pytest.raises(ValueError) as error:
        nlp.initialize()
    message = str(error.value)
    assert f"The {factory.split('_')[0]} encoder was never initialised" in message and suggested in message
    if factory != "bert_encoder":
        assert "MiniLM" not in message


def test_command_line_shows_a_checkpoint_error_as_its_message(tmp_path, capsys):
    from spacy_bertfam.__main__ import main

    with pytest.raises(SystemExit) as exit_:
        main(["init-encoder", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "none")])
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith(f"python -m spacy_bertfam init-encoder: Checkpoint not found: {tmp_path / 'none'}")
    assert "Traceback" not in err


def test_checkpoint_error_pickles_with_its_message():
    """Errors cross process boundaries (nlp.pipe with n_process > 1) by pickling."""
    error = pickle.loads(pickle.dumps(CheckpointError("x.safetensors is truncated")))
    assert isinstance(error, CheckpointError) and str(error) == "x.safetensors is truncated"
    assert error.args == ("x.safetensors is truncated",)  # as for the ValueError it was


def _bilm_copy(tmp_path: Path) -> Path:
    from ..conftest import TEST_DATA

    fixture = TEST_DATA / "elmo_test_fixture"
    for name in ("options.json", "lm_weights.hdf5"):
        (tmp_path / name).write_bytes((fixture / name).read_bytes())
    return tmp_path / "lm_weights.hdf5"


def test_truncated_bilm_hdf5_names_the_file(tmp_path):
    """h5py's own error for a truncated download names no file and is no CheckpointError."""
    weights = _bilm_copy(tmp_path)
    weights.write_bytes(weights.read_bytes()[:2000])
    with pytest.raises(CheckpointError, match=r"lm_weights.hdf5 cannot be read as HDF5 .*download or copy it again"):
        read_checkpoint(tmp_path)


def test_bilm_softmax_without_its_bias_is_named(tmp_path):
    import h5py

    weights = _bilm_copy(tmp_path)
    with h5py.File(weights, "a") as f:
        f["softmax/W"] = torch.zeros(10, 16).numpy()  # a softmax weight, its bias missing (a bare KeyError before)
    with pytest.raises(CheckpointError, match=r"missing dataset\(s\) \['softmax/b'\]"):
        read_checkpoint(tmp_path)
