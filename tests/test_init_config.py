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


@pytest.mark.parametrize("pipeline, problem", [("parser", r"\(unknown \['parser'\]\)"), ("ner,ner", r"\(each task once\)"),
                                               ("span_qa", r"\(unknown \['span_qa'\]\)\. span_qa pipelines start from configs/qa.cfg")])
def test_a_pipeline_init_config_cannot_make_is_one_message(pipeline, problem, tmp_path):
    with pytest.raises(ValueError, match=f"init-config makes pipelines of .*{problem}"):
        init_config("all-MiniLM-L6-v2", pipeline.split(","))
    done = subprocess.run([sys.executable, "-m", "spacy_bertfam", "init-config", "all-MiniLM-L6-v2",
                           str(tmp_path / "x.cfg"), "--pipeline", pipeline], capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr and "init-config makes pipelines" in done.stderr


def test_textcat_beside_another_task_reads_a_doc_without_cats_as_missing():
    """On a corpus whose examples are annotated for one task each, spaCy's textcat would learn
    "every class is 0" from the NER examples."""
    config = init_config("all-MiniLM-L6-v2", ["ner", "textcat"])
    assert config["components"]["textcat"]["factory"] == "partial_textcat"
    assert config["components"]["textcat"]["scorer"] == {"@scorers": "spacy-bertfam.textcat_scorer.v1"}
    assert init_config("all-MiniLM-L6-v2", ["textcat"])["components"]["textcat"]["factory"] == "textcat"
