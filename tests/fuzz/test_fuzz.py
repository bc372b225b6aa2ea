"""Every component on awkward text: no exception, one finite vector per token, sane spans.

Through `nlp(...)`, `nlp.pipe(...)` and `nlp.update(...)`; the named cases always run,
random ones are drawn by hypothesis. bench/fuzz.py runs the same strategies for longer.
"""
import pytest
from hypothesis import HealthCheck, given, settings
from spacy.training import Example

from .checks import check_doc
from .pipelines import PIPELINES, qa_example
from .strategies import LONG_DOC, SPECIAL, batches, texts

FUZZ = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                       HealthCheck.too_slow])


@pytest.fixture(scope="module", params=sorted(PIPELINES))
def pipeline(request, tmp_path_factory):
    return request.param, PIPELINES[request.param](tmp_path_factory.mktemp(request.param))


def _docs(name, nlp, texts_):
    """The Docs a pipeline reads: QA Docs (the question fuzzed too) for span_qa."""
    if name != "span_qa":
        return [nlp.make_doc(t) for t in texts_]
    from spacy_bertfam import make_qa_doc

    return [make_qa_doc(nlp, (t[:40] or "why") + " ?", t + " the end .") for t in texts_]


def _run(name, nlp, texts_):
    docs = _docs(name, nlp, texts_)
    for doc in nlp.pipe(docs, batch_size=4):
        check_doc(doc, nlp)
    for doc in docs[:2]:
        check_doc(nlp(doc), nlp)


def _update(name, nlp, texts_):
    if name == "span_qa":
        egs = [qa_example(nlp, (t[:40] or "why") + " ?", t + " the end .") for t in texts_]
    else:
        egs = [Example.from_dict(nlp.make_doc(t), {"cats": {"PET": 1.0, "PLACE": 0.0}} if nlp.has_pipe("textcat")
                                 else {}) for t in texts_]
    losses = nlp.update(egs, sgd=None)  # gradients computed, weights left alone
    assert all(v == v for v in losses.values()), losses  # no NaN


@pytest.mark.parametrize("case", sorted(SPECIAL))
def test_named_awkward_texts(pipeline, case):
    name, nlp = pipeline
    _run(name, nlp, [SPECIAL[case], "the cat sat", ""])
    _update(name, nlp, [SPECIAL[case], "the cat sat on the mat"])


def test_a_100000_token_doc(pipeline):
    name, nlp = pipeline
    (doc,) = _docs(name, nlp, [LONG_DOC])
    assert len(doc) > 100_000
    check_doc(nlp(doc), nlp)


def test_empty_docs_mixed_into_a_batch(pipeline):
    name, nlp = pipeline
    batch = ["", "the dog ran", "", "   ", "hello world", ""]
    _run(name, nlp, batch)
    _update(name, nlp, [t for t in batch if t.strip()] + [""] * (name != "span_qa"))


@FUZZ
@given(batch=batches)
def test_random_batches(pipeline, batch):
    name, nlp = pipeline
    _run(name, nlp, batch)


@FUZZ
@given(text=texts)
def test_random_updates(pipeline, text):
    name, nlp = pipeline
    _update(name, nlp, [text, "the cat sat on the mat"])
