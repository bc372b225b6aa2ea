"""One encoder, three heads (ner, partial_textcat, span_qa) trained on examples annotated for
one task each: what is missing stays missing, and the encoder runs once per batch."""
import numpy as np
import pytest
import spacy
from spacy.training import Example
from spacy.util import fix_random_seed
from thinc.api import SGD

from spacy_bertfam.encoders import torch_encoder

from .pipelines import TINY_ENCODER, TRAIN, listener
from .test_span_qa import qa_examples

HEADS = ("ner", "textcat", "span_qa")


def shared_nlp(checkpoint):
    """bert_encoder shared through listeners by ner, textcat (partial_textcat) and span_qa."""
    nlp = spacy.blank("en")
    nlp.add_pipe("bert_encoder", config={"model": TINY_ENCODER})
    nlp.add_pipe("ner", config={"model": {
        "@architectures": "spacy.TransitionBasedParser.v2", "state_type": "ner", "extra_state_tokens": False,
        "hidden_width": 32, "maxout_pieces": 2, "use_upper": True, "tok2vec": listener()}})
    nlp.add_pipe("partial_textcat", name="textcat", config={"model": {
        "@architectures": "spacy.TextCatReduce.v1", "exclusive_classes": True, "use_reduce_first": False,
        "use_reduce_last": False, "use_reduce_max": False, "use_reduce_mean": True, "tok2vec": listener()}})
    nlp.add_pipe("span_qa", config={"model": {"@architectures": "spacy-bertfam.SpanQA.v1", "tok2vec": listener()}})
    nlp.config["initialize"]["components"]["bert_encoder"] = {
        "encoder_loader": {"@misc": "spacy-bertfam.CheckpointLoader.v1", "path": str(checkpoint)}}
    fix_random_seed(0)
    nlp.initialize(lambda: mixed_examples(nlp))
    return nlp


def task_examples(nlp, task):
    """Examples annotated for `task` only: the others' annotation is absent (missing)."""
    if task == "span_qa":
        return qa_examples(nlp)
    key = {"ner": "entities", "textcat": "cats"}[task]
    return [Example.from_dict(nlp.make_doc(text), {key: ann[key]}) for text, ann in TRAIN]


def mixed_examples(nlp):
    return [eg for task in HEADS for eg in task_examples(nlp, task)]


def head_params(nlp, name):
    model = nlp.get_pipe(name).model
    return [node.get_param(p).copy() for node in model.walk() for p in node.param_names if node.has_param(p)]


@pytest.mark.parametrize("head", HEADS)
def test_a_head_learns_nothing_from_examples_not_annotated_for_it(hf_bert_dir, head):
    nlp = shared_nlp(hf_bert_dir)
    others = [eg for task in HEADS if task != head for eg in task_examples(nlp, task)]
    before = head_params(nlp, head)
    losses = nlp.update(others, sgd=SGD(0.1, L2=0.0, grad_clip=0.0), losses={})
    assert losses[head] == 0.0
    assert all(np.array_equal(a, b) for a, b in zip(before, head_params(nlp, head)))
    # The encoder learnt from the other heads, and this head learns from its own examples.
    losses = nlp.update(task_examples(nlp, head), sgd=SGD(0.1, L2=0.0, grad_clip=0.0), losses={})
    assert losses[head] > 0.0
    assert any(not np.array_equal(a, b) for a, b in zip(before, head_params(nlp, head)))


def test_scores_of_a_mixed_dev_set_are_each_tasks_own(hf_bert_dir):
    nlp = shared_nlp(hf_bert_dir)
    optimizer = nlp.create_optimizer()
    for _ in range(5):
        nlp.update(mixed_examples(nlp), sgd=optimizer)
    mixed = nlp.evaluate(mixed_examples(nlp))
    for task, key in (("ner", "ents_f"), ("textcat", "cats_score"), ("span_qa", "qa_f1")):
        assert mixed[key] == nlp.evaluate(task_examples(nlp, task))[key], task


def test_one_encoder_pass_serves_every_head(hf_bert_dir):
    nlp = shared_nlp(hf_bert_dir)
    shims = {id(s) for _, c in nlp.pipeline if hasattr(c, "model") for n in c.model.walk() for s in n.shims}
    assert len(shims) == 1  # the heads hold no encoder of their own
    calls = []
    torch_encoder(nlp.get_pipe("bert_encoder").model).register_forward_hook(lambda *_: calls.append(1))
    doc = nlp("the dog ran to the river bank")
    assert len(calls) == 1 and doc.cats and doc._.bertfam["bert_encoder"].layers
    texts = [text for text, _ in TRAIN] * 3
    calls.clear()
    docs = list(nlp.pipe(texts, batch_size=16))
    with_heads = len(calls)
    calls.clear()
    with nlp.select_pipes(enable=["bert_encoder"]):
        list(nlp.pipe(texts, batch_size=16))
    assert with_heads == len(calls) and all(d.cats and d.ents is not None for d in docs)  # heads add no pass
    calls.clear()
    nlp.update(mixed_examples(nlp), sgd=SGD(0.01))
    training = len(calls)
    calls.clear()
    with nlp.select_pipes(enable=["bert_encoder"]):
        nlp.get_pipe("bert_encoder").model.begin_update([eg.predicted for eg in mixed_examples(nlp)])
    assert training == len(calls)  # one pass in training too, shared by the three listeners
