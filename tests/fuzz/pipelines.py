"""The pipelines fuzzed: every component over a tiny model, one encoder pass each."""
from pathlib import Path

import spacy
from spacy.language import Language
from spacy.training import Example

from spacy_bertfam import make_qa_doc
from spacy_bertfam.loaders import checkpoint_loader

from ..conftest import make_hf_bert, make_hf_gpt
from ..pipeline.pipelines import TINY_ENCODER, build, examples, listener

ELMO = {"@architectures": "spacy-bertfam.ElmoBiLM.v1", "char_width": 4, "filters": [[1, 8], [2, 8]],
        "cell_width": 16, "projection_width": 8, "n_layers": 2, "dropout": 0.0}
GPT = {"@architectures": "spacy-bertfam.GptDecoder.v1", "n_pieces": 300, "hidden_width": 32, "n_layers": 3,
       "n_heads": 4, "intermediate_width": 128, "n_positions": 64, "window": 64, "stride": 48}
NER = {"@architectures": "spacy.TransitionBasedParser.v2", "state_type": "ner", "extra_state_tokens": False,
       "hidden_width": 16, "maxout_pieces": 2, "use_upper": True}


def bert_ner_textcat(tmp: Path) -> Language:
    return build(make_hf_bert(tmp / "bert"), textcat={})


def elmo_ner(tmp: Path) -> Language:
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo_features", config={"model": ELMO})
    nlp.add_pipe("ner", config={"model": {**NER, "tok2vec": listener(width=16, layers=[0, 1, 2])}})
    nlp.config["initialize"]["components"]["elmo_features"] = {"encoder_loader": {"@misc": "spacy-bertfam.RandomInit.v1"}}
    nlp.initialize(lambda: examples(nlp))
    return nlp


def gpt_scores(tmp: Path) -> Language:
    nlp = spacy.blank("en")
    nlp.add_pipe("gpt_lm", config={"model": GPT, "lm_scores": True, "lm_weight": 0.5})
    nlp.add_pipe("textcat", config={"model": {
        "@architectures": "spacy.TextCatReduce.v1", "exclusive_classes": True, "use_reduce_first": False,
        "use_reduce_last": False, "use_reduce_max": False, "use_reduce_mean": True, "tok2vec": listener()}})
    nlp.config["initialize"]["components"]["gpt_lm"] = {
        "encoder_loader": {"@misc": "spacy-bertfam.CheckpointLoader.v1", "path": str(make_hf_gpt(tmp / "gpt"))}}
    nlp.initialize(lambda: examples(nlp))
    return nlp


def span_qa(tmp: Path) -> Language:
    nlp = spacy.blank("en")
    nlp.add_pipe("bert_encoder", config={"model": TINY_ENCODER})
    nlp.add_pipe("span_qa", config={"model": {"@architectures": "spacy-bertfam.SpanQA.v1", "tok2vec": listener()}})
    nlp.get_pipe("bert_encoder").initialize(lambda: [], nlp=nlp,
                                            encoder_loader=checkpoint_loader(make_hf_bert(tmp / "qa_bert")))
    nlp.initialize(lambda: [qa_example(nlp, "who sat ?", "the cat sat on the mat .")])
    return nlp


def qa_example(nlp: Language, question: str, context: str) -> Example:
    """A QA training example whose answer is the context's first token (none if it has none)."""
    predicted, reference = make_qa_doc(nlp, question, context), make_qa_doc(nlp, question, context)
    n_question = len(nlp.make_doc(question.strip()))
    reference.spans["answer"] = [reference[n_question : n_question + 1]] if len(reference) > n_question else []
    return Example(predicted, reference)


PIPELINES = {"bert_ner_textcat": bert_ner_textcat, "elmo_ner": elmo_ner, "gpt_scores": gpt_scores,
             "span_qa": span_qa}
