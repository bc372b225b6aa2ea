"""`python -m spacy train` end to end with tiny configs."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import spacy
import torch
from spacy.tokens import DocBin

from .conftest import write_vocab
from .pipeline.pipelines import TRAIN, examples

CONFIGS = Path(__file__).parent / "configs"


def _corpus(path: Path) -> Path:
    nlp = spacy.blank("en")
    DocBin(docs=[eg.reference for eg in examples(nlp)] * 5).to_disk(path)
    return path


def test_spacy_train_tiny_random_init(tmp_path):
    corpus = _corpus(tmp_path / "train.spacy")
    vocab = write_vocab(tmp_path / "vocab.txt", 120)
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "train", str(CONFIGS / "tiny_train.cfg"), "--output", str(out),
         "--paths.train", str(corpus), "--paths.dev", str(corpus), "--paths.vocab", str(vocab)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "randomly initialised (seed 0)" in result.stderr
    nlp = spacy.load(out / "model-last")
    assert nlp.pipe_names == ["bert_encoder", "ner", "textcat"]
    doc = nlp(TRAIN[0][0])
    assert doc.tensor.shape == (len(doc), 32) and np.isfinite(doc.tensor).all()
    assert set(doc.cats) == {"PET", "PLACE"}
    # Training moved the encoder away from its seed-0 initialisation.
    assert nlp.get_pipe("bert_encoder").model.to_bytes() != _seed0_encoder_bytes(nlp, vocab)


def _seed0_encoder_bytes(nlp, vocab):
    from spacy_bertfam.loaders import random_init

    fresh = spacy.blank("en")
    config = {k: v for k, v in nlp.get_pipe_config("bert_encoder").items() if k != "factory"}
    fresh.add_pipe("bert_encoder", config=config)
    fresh.get_pipe("bert_encoder").initialize(lambda: [], nlp=fresh, encoder_loader=random_init(vocab, seed=0))
    return fresh.get_pipe("bert_encoder").model.to_bytes()


def test_spacy_train_shipped_frozen_config(tmp_path, hf_bert_dir):
    """configs/ner_frozen.cfg: a sourced, frozen, annotating encoder, concat of 4 layers."""
    from .pipeline.test_bert_encoder import tiny_nlp

    encoder = tiny_nlp(hf_bert_dir, component={"store_all_layers": False})
    encoder.to_disk(tmp_path / "encoder")
    corpus = _corpus(tmp_path / "train.spacy")
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "train", str(CONFIGS.parents[1] / "configs" / "ner_frozen.cfg"),
         "--output", str(out), "--paths.train", str(corpus), "--paths.dev", str(corpus),
         "--paths.encoder_pipeline", str(tmp_path / "encoder"),
         "--components.ner.model.tok2vec.width", "128",
         "--training.max_epochs", "0", "--training.max_steps", "4", "--training.eval_frequency", "2"],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trained = spacy.load(out / "model-last")
    from spacy_bertfam.encoders import torch_encoder

    after = torch_encoder(trained.get_pipe("bert_encoder").model).state_dict()
    before = torch_encoder(encoder.get_pipe("bert_encoder").model).state_dict()
    assert all(torch.equal(after[k], before[k]) for k in before)  # frozen: not one weight moved
    doc = trained(TRAIN[0][0])
    assert sorted(doc._.bertfam["bert_encoder"].layers) == [0, 1, 2, 3]


@pytest.mark.parametrize("task", ["ner", "textcat"])
def test_shipped_configs_train_from_minilm(task, tmp_path, minilm_dir):
    """configs/{ner,textcat}.cfg as shipped: MiniLM through the registered loader, a few steps."""
    corpus = _corpus(tmp_path / "train.spacy")
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "train", str(CONFIGS.parents[1] / "configs" / f"{task}.cfg"),
         "--output", str(out), "--paths.train", str(corpus), "--paths.dev", str(corpus),
         "--training.max_epochs", "0", "--training.max_steps", "2", "--training.eval_frequency", "2"],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    nlp = spacy.load(out / "model-last")
    read = {i % 7 for i in nlp.get_pipe_config(task)["model"]["tok2vec"]["layers"]}
    doc = nlp(TRAIN[1][0])
    # Stored: the layers the listener reads (MiniLM: 0..6), and the top one for doc.tensor.
    assert set(doc._.bertfam["bert_encoder"].layers) == read | {6}
    assert doc.tensor.shape == (len(doc), 384)
    if task == "textcat":
        assert set(doc.cats) == {"PET", "PLACE"} and sum(doc.cats.values()) == pytest.approx(1.0)


@pytest.mark.parametrize("command", ["train", "assemble"])
def test_spacy_commands_without_the_checkpoint_end_in_the_message_alone(tmp_path, command):
    """No traceback above what to do: a missing checkpoint is shown as spaCy shows config errors,
    also by `spacy assemble`, which initialises the pipeline outside spaCy's own handler."""
    corpus = _corpus(tmp_path / "train.spacy")
    missing = tmp_path / "elmo_pretrain" / "final"
    where = [] if command == "train" else [str(tmp_path / "assembled")]
    result = subprocess.run(
        [sys.executable, "-m", "spacy", command, str(CONFIGS.parents[1] / "configs" / "ner_elmo.cfg"), *where,
         "--paths.train", str(corpus), "--paths.dev", str(corpus), "--paths.elmo_checkpoint", str(missing)],
        capture_output=True, text=True,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr, result.stderr[-3000:]
    assert "Cannot load the encoder's checkpoint" in result.stdout
    assert f"Checkpoint not found: {missing}" in result.stdout
    assert "bertfam-pretrain configs/pretrain_elmo.cfg training/elmo_pretrain" in result.stdout
