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
