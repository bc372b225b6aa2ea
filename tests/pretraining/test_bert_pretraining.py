"""bertfam-pretrain with BERT: learning, resuming, data-parallel equality, the CLI."""
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file

from spacy_bertfam.errors import ConfigError

from .helpers import CONFIGS, MIXED_VOCAB, TINY_BERT, pretrain, write_mixed_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_mixed_corpus(tmp_path_factory.mktemp("corpus") / "mixed.jsonl")


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    return write_mixed_corpus(tmp_path_factory.mktemp("small") / "mixed.jsonl", 12)


@pytest.fixture(scope="module")
def start(small_corpus, tmp_path_factory):
    """A tiny initial checkpoint (vocabulary + weights) that runs under comparison share:
    `tokenizers` does not train the same vocabulary twice (ties break by hash order)."""
    out = tmp_path_factory.mktemp("start")
    pretrain("bert", small_corpus, out, {**TINY_BERT, "training.max_steps": 0, "objective.heldout_instances": 32,
                                         "corpus.heldout_every": 6})
    return out / "final"


def test_a_few_hundred_steps_lower_mlm_loss_and_learn_nsp(corpus, tmp_path):
    settings = {**TINY_BERT, "objective.hidden_width": 64, "objective.intermediate_width": 256,
                "objective.max_length": 64, "objective.n_pieces": 2000, "objective.heldout_instances": 512,
                "training.batch_size": 32, "training.max_steps": 1200, "training.eval_every": 1200,
                "training.log_every": 100, "training.warmup_steps": 60, "training.lr": 0.003,
                "corpus.heldout_every": 10, "paths.vocab": str(MIXED_VOCAB)}
    records = pretrain("bert", corpus, tmp_path / "out", settings)
    before, after = records[0], records[-1]
    message = (f"held-out MLM loss {before['eval_mlm_loss']:.3f} -> {after['eval_mlm_loss']:.3f}, MLM acc "
               f"{before['eval_mlm_acc']:.3f} -> {after['eval_mlm_acc']:.3f}, NSP acc "
               f"{before['eval_nsp_acc']:.3f} -> {after['eval_nsp_acc']:.3f} after {after['step']} steps")
    print(message)
    assert after["step"] == 1200
    assert after["eval_mlm_loss"] < before["eval_mlm_loss"] - 1.0, message
    # NSP takes off somewhere between steps 300 and 900 and wobbles meanwhile. Held-out accuracy,
    # where chance is 0.5 (512 pairs, one standard error 0.022): with a vocabulary trained in each
    # run, runs here ended at 0.76-0.83, one on CI at 0.674 and one here at 0.625 (late take-offs); with the
    # shipped vocabulary the run is the same each time, 0.812 here. 0.65 is 7 standard errors above
    # chance: NSP was learned.
    assert after["eval_nsp_acc"] > 0.65, message
    assert (tmp_path / "out" / "final" / "model.safetensors").is_file()


def test_a_resumed_run_continues_with_the_same_losses(small_corpus, start, tmp_path):
    settings = {**TINY_BERT, "training.max_steps": 8, "training.checkpoint_every": 4, "training.eval_every": 8,
                "objective.heldout_instances": 32, "corpus.heldout_every": 6, "paths.init": str(start)}
    whole = pretrain("bert", small_corpus, tmp_path / "whole", settings)
    step_one = next(r for r in whole if r["step"] == 1 and "lr" in r)  # the rate step 1 trained with, not step 2's
    assert step_one["lr"] == pytest.approx(settings["training.lr"] / settings["training.warmup_steps"])
    killed = pretrain("bert", small_corpus, tmp_path / "resumed", settings, stop_after=6)
    assert killed[-1]["step"] == 6 and not (tmp_path / "resumed" / "final").exists()
    resumed = pretrain("bert", small_corpus, tmp_path / "resumed", settings, resume=True)
    losses = lambda records: [(r["step"], r["loss"]) for r in records if "loss" in r]  # noqa: E731
    # The checkpoint was at step 4: steps 5..8 are trained again from it.
    assert losses(resumed) == losses(whole), f"{losses(resumed)} != {losses(whole)}"
    a = load_file(str(tmp_path / "whole" / "final" / "model.safetensors"))
    b = load_file(str(tmp_path / "resumed" / "final" / "model.safetensors"))
    assert max(float(np.abs(a[k] - b[k]).max()) for k in a) == 0.0
    with pytest.raises(ConfigError, match="--resume"):
        pretrain("bert", small_corpus, tmp_path / "whole", settings)
    # Resuming a finished run, or with --overwrite too, or where there is no run: said, nothing trained or made.
    with pytest.raises(ConfigError, match="is at step 8 already and max_steps is 8: nothing to train"):
        pretrain("bert", small_corpus, tmp_path / "whole", settings, resume=True)
    with pytest.raises(ConfigError, match="--resume continues .* and --overwrite deletes it: give one"):
        pretrain("bert", small_corpus, tmp_path / "whole", settings, resume=True, overwrite=True)
    with pytest.raises(ConfigError, match="Nothing to resume"):
        pretrain("bert", small_corpus, tmp_path / "none", settings, resume=True)
    assert not (tmp_path / "none").exists()


def test_two_processes_train_like_one(small_corpus, start, tmp_path):
    """torchrun with 2 gloo processes vs one process, same global batch, dropout 0."""
    args = ["bertfam-pretrain", str(CONFIGS / "pretrain_bert.cfg")]
    overrides = [f"--{k}={v}" for k, v in {**TINY_BERT, "paths.train": small_corpus, "paths.init": start,
                                           "objective.dropout": 0.0, "objective.heldout_instances": 32,
                                           "corpus.heldout_every": 6, "training.max_steps": 6,
                                           "training.eval_every": 6}.items()]
    single = subprocess.run([sys.executable, "-m", "spacy", *args, str(tmp_path / "one"), *overrides],
                            capture_output=True, text=True)
    assert single.returncode == 0, single.stderr[-3000:]
    double = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                             "-m", "spacy", *args, str(tmp_path / "two"), *overrides], capture_output=True, text=True)
    assert double.returncode == 0, double.stderr[-3000:]
    initial = load_file(str(start / "model.safetensors"))
    one = load_file(str(tmp_path / "one" / "final" / "model.safetensors"))
    two = load_file(str(tmp_path / "two" / "final" / "model.safetensors"))
    moved = max(float(np.abs(one[k] - initial[k]).max()) for k in one)
    diff = max(float(np.abs(one[k] - two[k]).max()) for k in one)
    print(f"1 vs 2 processes after 6 steps: max |difference| {diff:.2e}; weights moved up to {moved:.2e}")
    assert moved > 1e-3, f"training moved the weights by only {moved}"
    assert diff <= 1e-5, f"1 vs 2 processes: max |difference| {diff:.2e} after 6 steps (weights moved {moved:.2e})"


def test_accumulation_gives_the_same_steps(small_corpus, start, tmp_path):
    settings = {**TINY_BERT, "training.max_steps": 3, "objective.dropout": 0.0, "objective.heldout_instances": 32,
                "corpus.heldout_every": 6, "paths.init": str(start)}
    one = pretrain("bert", small_corpus, tmp_path / "one", settings)
    two = pretrain("bert", small_corpus, tmp_path / "two", {**settings, "training.accumulate": 4})
    assert [r["loss"] for r in one[1:]] == pytest.approx([r["loss"] for r in two[1:]], abs=1e-5)


def test_the_command_is_registered_with_spacy():
    result = subprocess.run([sys.executable, "-m", "spacy", "bertfam-pretrain", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "--resume" in result.stdout, result.stderr


def test_configs_ner_starts_from_a_pretraining_checkpoint(start, tmp_path):
    """`spacy train configs/ner.cfg --paths.encoder_checkpoint <output>/final`: one path setting."""
    import spacy
    from spacy.tokens import DocBin

    nlp = spacy.blank("en")
    docs = [nlp.make_doc(t) for t in ["Emma Woodhouse lived at Hartfield in Highbury .", "Mr. Knightley called ."] * 8]
    for doc in docs:
        doc.ents = [doc.char_span(0, len(doc[:2].text), label="person")]
    DocBin(docs=docs).to_disk(tmp_path / "train.spacy")
    sizes = {"n_pieces": 1000, "hidden_width": 32, "n_layers": 2, "n_heads": 2, "intermediate_width": 64,
             "n_positions": 64, "window": 32, "stride": 24}
    overrides = [f"--components.bert_encoder.model.{k}={v}" for k, v in sizes.items()]
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "train", str(CONFIGS / "ner.cfg"), "--output", str(tmp_path / "model"),
         "--paths.train", str(tmp_path / "train.spacy"), "--paths.dev", str(tmp_path / "train.spacy"),
         "--paths.encoder_checkpoint", str(start),
         # two layers: concatenate all three outputs instead of the config's last four
         "--components.ner.model.tok2vec.layers=[-3,-2,-1]", "--components.ner.model.tok2vec.width=96",
         "--training.max_epochs=0", "--training.max_steps=3", *overrides],
        capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trained = spacy.load(tmp_path / "model" / "model-last")
    assert trained.get_pipe("bert_encoder").contract.source == str(start)
    assert trained("Emma called .").tensor.shape == (3, 32)


def test_fresh_runs_with_a_given_vocabulary_are_identical(small_corpus, start, tmp_path):
    settings = {**TINY_BERT, "paths.vocab": str(start / "tokenizer.json"), "training.max_steps": 4,
                "training.eval_every": 4, "objective.heldout_instances": 32, "corpus.heldout_every": 6}
    first = pretrain("bert", small_corpus, tmp_path / "a", settings)
    second = pretrain("bert", small_corpus, tmp_path / "b", settings)
    assert [r.get("loss") for r in first] == [r.get("loss") for r in second]
    assert (tmp_path / "a" / "final" / "tokenizer.json").read_text() == (start / "tokenizer.json").read_text()
