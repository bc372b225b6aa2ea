"""A setting that cannot work raises ConfigError, a confection ConfigValidationError: spaCy's CLI
(`spacy train`, `spacy init nlp`) shows those as their message, without a traceback."""
import pytest
import spacy
from confection import ConfigValidationError

from spacy_bertfam.convert import CheckpointError

from .pipeline.pipelines import TINY_ENCODER, build


@pytest.mark.parametrize("factory,config,message", [
    ("bert_encoder", {"precision": "int4"}, "Unknown precision 'int4'"),
    ("elmo_features", {"precision": "int8"}, r'precision "int8" \(int8 linear layers\) is for bert_encoder and gpt_lm'),
    ("elmo_features", {"torch_compile": True}, "torch_compile is for the transformer encoders"),
    ("gpt_lm", {"sort_batches": 0}, "sort_batches must be >= 1, got 0"),
    ("bert_encoder", {"model": {**TINY_ENCODER, "stride": 0}}, "stride 0 must be between 1 and the window's 62"),
    ("bert_encoder", {"model": {**TINY_ENCODER, "hidden_width": 30}},
     r"\[spacy-bertfam.BertEncoder.v1\] The width \(30\) must be divisible by the number of attention heads \(4\)"),
    ("bert_encoder", {"model": {**TINY_ENCODER, "batch_pieces": 0}}, r"batch_pieces must be >= 1 \(padded positions per encoder call"),
    ("elmo_features", {"model": {"@architectures": "spacy-bertfam.ElmoBiLM.v1", "activation": "gelu"}},
     r"\[spacy-bertfam.ElmoBiLM.v1\] activation must be 'relu' or 'tanh'"),
])
def test_an_encoder_setting_that_cannot_work_is_a_config_error(factory, config, message):
    with pytest.raises(ConfigValidationError, match=message):
        spacy.blank("en").add_pipe(factory, config=config)


def test_a_listener_that_does_not_fit_its_encoder_is_a_config_error(hf_bert_dir):
    with pytest.raises(ConfigValidationError, match="width 100 does not match the encoder's output"):
        build(hf_bert_dir, ner={"width": 100})


def test_an_encoder_without_weights_is_a_config_error():
    nlp = spacy.blank("en")
    nlp.add_pipe("bert_encoder")
    with pytest.raises(ConfigValidationError, match="The bert encoder was never initialised"):
        nlp.initialize()


def test_a_layer_the_encoder_does_not_have_is_a_config_error(hf_bert_dir):
    with pytest.raises(ConfigValidationError, match=r"Layer -9 does not exist: this encoder has 4 layer outputs"):
        build(hf_bert_dir, ner={"layers": [-9]})


def test_a_packaged_model_that_is_not_installed_is_a_checkpoint_error(tmp_path, monkeypatch):
    from spacy_bertfam.loaders import pretrained_loader
    from spacy_bertfam.pretrained import PACKAGED

    monkeypatch.setenv("SPACY_BERTFAM_DATA", str(tmp_path))
    spec = PACKAGED["all-MiniLM-L6-v2"]
    monkeypatch.setitem(PACKAGED, "all-MiniLM-L6-v2", spec._replace(module="spacy_bertfam_no_such_module"))
    nlp = spacy.blank("en")
    encoder = nlp.add_pipe("bert_encoder")
    with pytest.raises(CheckpointError, match=r"'all-MiniLM-L6-v2' is not installed. Get it once with:\n"
                                              r"    python -m spacy_bertfam download all-MiniLM-L6-v2"):
        encoder.initialize(lambda: [], nlp=nlp, encoder_loader=pretrained_loader())
    with pytest.raises(ConfigValidationError, match=r"Unknown pretrained model 'MiniLM'"):
        encoder.initialize(lambda: [], nlp=nlp, encoder_loader=pretrained_loader("MiniLM"))


def test_random_init_without_its_vocabulary_is_a_config_error(tmp_path):
    from spacy_bertfam.loaders import random_init

    nlp = spacy.blank("en")
    encoder = nlp.add_pipe("bert_encoder", config={"model": TINY_ENCODER})
    with pytest.raises(ConfigValidationError, match="A bert encoder needs a vocabulary: set vocab"):
        encoder.initialize(lambda: [], nlp=nlp, encoder_loader=random_init())
    with pytest.raises(ConfigValidationError, match=r"not found.*\(the vocab of spacy-bertfam.RandomInit.v1\)"):
        encoder.initialize(lambda: [], nlp=nlp, encoder_loader=random_init(tmp_path / "vocab.txt"))


def test_a_pretraining_config_without_its_blocks_is_a_config_error(tmp_path):
    from spacy_bertfam.pretraining.cli import run

    config = tmp_path / "pretrain.cfg"
    config.write_text("[corpus]\n[objective]\n", encoding="utf8")
    with pytest.raises(ConfigValidationError, match=r"pretrain.cfg has no \[training\] block"):
        run(config, tmp_path / "out", {})


@pytest.mark.parametrize("override, message", [
    ({"objective.n_heads": 3}, r"\[objective\] The width \(32\) must be divisible by the number of attention heads \(3\)"),
    ({"training.batch_size": 0, "training.lr": 0}, r"\[training\] cannot work with batch_size = 0 \(at least 1\), lr = 0"),
    ({"corpus.split": "sentences"}, r"\[corpus\] split must be one of"),
    ({"paths.train": "no/such/text"}, "Pretraining text not found: .*no/such/text; point --paths.train"),
])
def test_a_pretraining_setting_that_cannot_work_is_a_config_error(tmp_path, override, message):
    """Each stops `bertfam-pretrain` before any step, as its message alone (they were tracebacks,
    one of them after the progress bar had started)."""
    from spacy_bertfam.pretraining.cli import run

    from .conftest import TEST_DATA
    from .pretraining.helpers import CONFIGS

    sizes = {"objective.hidden_width": 32, "objective.intermediate_width": 64, "objective.n_layers": 1,
             "paths.train": str(TEST_DATA / "raw_text")}
    with pytest.raises(ConfigValidationError, match=message):
        run(CONFIGS / "pretrain_gpt.cfg", tmp_path / "out", {**sizes, **override})
    assert not (tmp_path / "out" / "last").exists()


def test_ask_with_a_string_for_the_questions_says_to_give_a_list(hf_bert_dir):
    """A string is a sequence: it was asked letter by letter, one answer per character."""
    from spacy_bertfam import ask

    nlp = build(hf_bert_dir)
    with pytest.raises(TypeError, match=r"give a Doc and a list of questions, e.g. ask\(nlp, doc, \['Where\?'\]\)"):
        ask(nlp, nlp("the cat sat"), "Where?")


def test_the_demo_of_a_pipeline_that_is_not_there_says_how_to_make_it(tmp_path, monkeypatch):
    import subprocess
    import sys

    from spacy_bertfam import demo
    from spacy_bertfam.errors import InputError

    monkeypatch.setattr(demo.spacy.util, "is_package", lambda name: False)  # as on a machine without it
    with pytest.raises(InputError, match="No pipeline 'en_bertfam'.*spacy project run install"):
        demo.run("en_bertfam")
    done = subprocess.run([sys.executable, "-m", "spacy_bertfam", "demo", str(tmp_path / "nothing")],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "nothing': neither an installed package nor a folder" in done.stderr
