"""init-config: a training config whose encoder has the checkpoint's sizes, ready for spacy train."""
import subprocess
import sys

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_bertfam.convert import read_checkpoint
from spacy_bertfam.init_config import init_config

from .conftest import TEST_DATA, make_hf_bert, make_hf_gpt
from .pipeline.pipelines import TRAIN

MAKERS = {"bert": lambda tmp: make_hf_bert(tmp / "bert"), "gpt": lambda tmp: make_hf_gpt(tmp / "gpt"),
          "elmo": lambda tmp: TEST_DATA / "elmo_test_fixture"}
ENCODERS = {"bert": "bert_encoder", "gpt": "gpt_lm", "elmo": "elmo_features"}


def _corpus(path):
    nlp = spacy.blank("en")
    docs = []
    for text, ann in TRAIN:
        doc = nlp.make_doc(text)
        doc.ents = [doc.char_span(s, e, label=label) for s, e, label in ann["entities"]]
        doc.cats = ann["cats"]
        docs.append(doc)
    DocBin(docs=docs * 4).to_disk(path)
    return path


@pytest.mark.parametrize("family", ["bert", "gpt", "elmo"])
def test_config_fits_the_checkpoint_and_trains(family, tmp_path):
    checkpoint = MAKERS[family](tmp_path)
    pipeline = ["ner", "textcat"] if family != "elmo" else ["ner"]
    out = tmp_path / "config.cfg"
    result = subprocess.run([sys.executable, "-m", "spacy_bertfam", "init-config", str(checkpoint), str(out),
                             "--pipeline", ",".join(pipeline)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    config = spacy.util.load_config(out)
    encoder = ENCODERS[family]
    model = config["components"][encoder]["model"]
    sizes = read_checkpoint(checkpoint).config.to_dict()
    assert all(model[k] == (list(map(list, v)) if k == "filters" else v) for k, v in sizes.items() if k in model)
    assert config["nlp"]["pipeline"] == [encoder, *pipeline]
    assert config["initialize"]["components"][encoder]["encoder_loader"]["path"] == str(checkpoint.resolve())
    corpus = _corpus(tmp_path / "train.spacy")
    result = subprocess.run([sys.executable, "-m", "spacy", "train", str(out), "--output", str(tmp_path / "out"),
                             "--paths.train", str(corpus), "--paths.dev", str(corpus), "--training.max_steps", "2",
                             "--training.eval_frequency", "2"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    nlp = spacy.load(tmp_path / "out" / "model-last")
    assert nlp.pipe_names == [encoder, *pipeline]
    assert nlp("the cat sat on the mat").tensor.shape[0] == 6


def test_a_packaged_name_uses_the_pretrained_loader():
    config = init_config("all-MiniLM-L6-v2", ["ner"])
    assert config["initialize"]["components"]["bert_encoder"]["encoder_loader"] == {
        "@misc": "spacy-bertfam.PretrainedLoader.v1", "name": "all-MiniLM-L6-v2"}
    model = config["components"]["bert_encoder"]["model"]
    assert (model["hidden_width"], model["n_layers"], model["window"], model["stride"]) == (384, 6, 128, 96)
    assert config["components"]["ner"]["model"]["tok2vec"]["width"] == 4 * 384


def test_unknown_task_is_refused():
    with pytest.raises(ValueError, match="init-config makes pipelines of"):
        init_config("all-MiniLM-L6-v2", ["parser"])
