"""GPT pretraining: held-out perplexity falls; the checkpoint initialises gpt_lm and trains with spacy."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import spacy
from spacy.tokens import DocBin

from spacy_bertfam.loaders import checkpoint_loader

from ..conftest import ASSETS, TEST_DATA
from .helpers import pretrain

SIZES = dict(n_pieces=400, hidden_width=32, n_layers=2, n_heads=2, intermediate_width=128, n_positions=64)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpt_pretrain")
    text = (ASSETS / "raw_text" / "janeausten_6novels.txt").read_text(encoding="utf8")[:120_000]
    (tmp / "austen.txt").write_text(text, encoding="utf8")
    records = pretrain("gpt", tmp / "austen.txt", tmp / "out", {
        **{f"objective.{k}": v for k, v in SIZES.items()}, "objective.block_size": 32, "corpus.split": "passages",
        "corpus.heldout_every": 20, "corpus.extra_heldout": {"wikitext2": str(TEST_DATA / "raw_text" / "wikitext2_test.head.tokens.txt")},
        "training.batch_size": 16, "training.max_steps": 60, "training.eval_every": 60,
        "training.warmup_steps": 6, "training.lr": 0.003})
    return tmp / "out", records


def test_pretraining_lowers_heldout_perplexity(pretrained):
    _, records = pretrained
    before, after = records[0]["eval_ppl"], records[-1]["eval_ppl"]
    assert after < 0.6 * before, f"held-out perplexity {before:.1f} -> {after:.1f}"
    # WikiText-2 test (its first three articles: the 200 held-out blocks take ~11 kB), another
    # domain, evaluated beside the held-out chapters.
    wiki_before, wiki_after = records[0]["eval_wikitext2_ppl"], records[-1]["eval_wikitext2_ppl"]
    assert wiki_after < 0.8 * wiki_before, f"WikiText-2 perplexity {wiki_before:.1f} -> {wiki_after:.1f}"


def test_checkpoint_initialises_gpt_lm(pretrained):
    out, _ = pretrained
    nlp = spacy.blank("en")
    model = {"@architectures": "spacy-bertfam.GptDecoder.v1", **SIZES, "window": 32, "stride": 24}
    nlp.add_pipe("gpt_lm", config={"model": model, "lm_scores": True})
    nlp.get_pipe("gpt_lm").initialize(lambda: [], nlp=nlp, encoder_loader=checkpoint_loader(out / "final"))
    doc = nlp("It is a truth universally acknowledged, that a single man in possession of a good fortune.")
    assert np.isfinite(doc.tensor).all()
    assert 1.0 < doc._.perplexity < SIZES["n_pieces"]


def test_spacy_train_textcat_gpt_with_lm_weight(pretrained, tmp_path):
    out, _ = pretrained
    nlp = spacy.blank("en")
    texts = ["I lost my card", "my card has not arrived", "what is the exchange rate", "exchange rates today"] * 4
    docs = []
    for i, t in enumerate(texts):
        doc = nlp.make_doc(t)
        doc.cats = {"card": float(i % 4 < 2), "rate": float(i % 4 >= 2)}
        docs.append(doc)
    DocBin(docs=docs).to_disk(tmp_path / "train.spacy")
    config = Path(__file__).parents[2] / "configs" / "textcat_gpt.cfg"
    overrides = [f"--components.gpt_lm.model.{k}={v}" for k, v in SIZES.items()]
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "train", str(config), "--output", str(tmp_path / "model"),
         "--paths.train", str(tmp_path / "train.spacy"), "--paths.dev", str(tmp_path / "train.spacy"),
         "--paths.gpt_checkpoint", str(out / "final"), "--components.gpt_lm.model.window=32",
         "--components.gpt_lm.model.stride=24", "--components.textcat.model.tok2vec.width=32",
         "--training.max_epochs=0", "--training.max_steps=6", "--training.eval_frequency=3", *overrides],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "LOSS GPT_LM" in result.stdout  # the LM loss is reported in the training log
    trained = spacy.load(tmp_path / "model" / "model-last")
    assert trained.get_pipe("gpt_lm").cfg["lm_weight"] == 0.5
    assert set(trained("my card").cats) == {"card", "rate"}
