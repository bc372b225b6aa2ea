"""The bi-attention QA head (BiAttentionQA.v1) over every family, and separate-segment encoding."""
import numpy as np
import pytest
import spacy
from spacy.util import fix_random_seed
from thinc.api import Adam

from spacy_bertfam import make_qa_doc

from ..conftest import make_hf_gpt
from ..fuzz.pipelines import ELMO, GPT
from .pipelines import TINY_ENCODER, listener
from .test_span_qa import CONTEXT, QA, QUESTION, qa_examples

FAMILIES = {  # encoder component, model, listener width, init loader (given the tmp path)
    "bert": ("bert_encoder", TINY_ENCODER, 32, lambda tmp, bert: {"@misc": "spacy-bertfam.CheckpointLoader.v1",
                                                                   "path": str(bert)}),
    "gpt": ("gpt_lm", GPT, 32, lambda tmp, bert: {"@misc": "spacy-bertfam.CheckpointLoader.v1",
                                                  "path": str(make_hf_gpt(tmp / "gpt"))}),
    "elmo": ("elmo_features", ELMO, 16, lambda tmp, bert: {"@misc": "spacy-bertfam.RandomInit.v1"}),
}


def bidaf_nlp(family, tmp_path, hf_bert_dir, head="spacy-bertfam.BiAttentionQA.v1"):
    name, model, width, loader = FAMILIES[family]
    nlp = spacy.blank("en")
    nlp.add_pipe(name, config={"model": model})
    settings = {"hidden_width": 16} if head.startswith("spacy-bertfam.BiAttention") else {}
    nlp.add_pipe("span_qa", config={"model": {"@architectures": head, **settings, "tok2vec": listener(width=width)}})
    nlp.config["initialize"]["components"][name] = {"encoder_loader": loader(tmp_path, hf_bert_dir)}
    fix_random_seed(0)
    nlp.initialize(lambda: qa_examples(nlp))
    return nlp


def answers(nlp):
    docs = nlp.pipe([eg.predicted for eg in qa_examples(nlp)])
    return [d.spans["answer"][0].text if d.spans["answer"] else None for d in docs]


@pytest.mark.parametrize("family", ["gpt", "elmo"])
def test_without_a_separator_question_and_context_are_encoded_apart(family, tmp_path, hf_bert_dir):
    nlp = bidaf_nlp(family, tmp_path, hf_bert_dir)
    name = FAMILIES[family][0]
    with nlp.select_pipes(enable=[name]):
        pair = nlp(make_qa_doc(nlp, QUESTION, CONTEXT))
        question, context = nlp(QUESTION), nlp(CONTEXT)
    n = len(question)
    np.testing.assert_allclose(pair.tensor[:n], question.tensor, atol=1e-5)
    np.testing.assert_allclose(pair.tensor[n:], context.tensor, atol=1e-5)


@pytest.mark.parametrize("family", ["bert", "gpt", "elmo"])
def test_bi_attention_learns_the_answers(family, tmp_path, hf_bert_dir):
    nlp = bidaf_nlp(family, tmp_path, hf_bert_dir)
    optimizer = Adam(0.01)
    for _ in range(150):
        nlp.update(qa_examples(nlp), sgd=optimizer)
    assert answers(nlp) == [answer for _, _, answer in QA]
    scores = nlp.evaluate(qa_examples(nlp))
    assert scores["qa_exact"] == 1.0


@pytest.mark.parametrize("family", ["gpt", "elmo"])
def test_save_load_and_replace_listeners_keep_the_answers(family, tmp_path, hf_bert_dir):
    nlp = bidaf_nlp(family, tmp_path, hf_bert_dir)
    optimizer = Adam(0.01)
    for _ in range(20):
        nlp.update(qa_examples(nlp), sgd=optimizer)
    doc = make_qa_doc(nlp, QUESTION, CONTEXT)
    want = nlp(doc.copy()).spans["answer"].attrs["margin"]
    nlp.to_disk(tmp_path / "saved")
    loaded = spacy.load(tmp_path / "saved")
    assert loaded(doc.copy()).spans["answer"].attrs["margin"] == pytest.approx(want, abs=1e-5)
    loaded.replace_listeners(FAMILIES[family][0], "span_qa", ["model.tok2vec"])
    assert loaded(doc.copy()).spans["answer"].attrs["margin"] == pytest.approx(want, abs=1e-5)


def test_the_cross_encoder_head_refuses_an_encoder_without_a_separator(tmp_path, hf_bert_dir):
    with pytest.raises(ValueError, match="gpt encoder 'gpt_lm' has no separator.*BiAttentionQA.v1"):
        bidaf_nlp("gpt", tmp_path, hf_bert_dir, head="spacy-bertfam.SpanQA.v1")
