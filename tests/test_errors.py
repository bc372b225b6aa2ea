"""A setting that cannot work raises ConfigError, a confection ConfigValidationError: spaCy's CLI
(`spacy train`, `spacy init nlp`) shows those as their message, without a traceback."""
import pytest
import spacy
from confection import ConfigValidationError

from .pipeline.pipelines import build


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
