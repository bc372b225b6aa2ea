"""A Doc's output does not depend on its batch mates, nor on the number of processes."""
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import spacy

from spacy_bertfam.loaders import checkpoint_loader, random_init

from ..conftest import make_hf_bert, make_hf_gpt
from ..fuzz.pipelines import ELMO
from .pipelines import build, examples
from .test_gpt_lm import TINY_GPT

# Short texts, an empty one and long ones that need several windows (window 64).
TEXTS = ["the cat sat on the mat", "", "hello world " * 60, "the dog ran", "bank " * 3,
         "the river bank and the world " * 25, "cat"] * 3


@pytest.fixture(scope="module")
def bert_pipeline(tmp_path_factory):
    """A bert_encoder + ner + textcat pipeline trained a few steps."""
    nlp = build(make_hf_bert(tmp_path_factory.mktemp("bert") / "hf"), textcat={})
    optimizer = nlp.initialize(lambda: examples(nlp))
    for _ in range(5):
        nlp.update(examples(nlp), sgd=optimizer)
    return nlp


def _gpt_pipeline(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("gpt_lm", config={"model": TINY_GPT, "lm_scores": True})
    nlp.get_pipe("gpt_lm").initialize(lambda: [], nlp=nlp, encoder_loader=checkpoint_loader(make_hf_gpt(tmp_path / "gpt")))
    return nlp


def _elmo_pipeline():
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo_features", config={"model": ELMO})
    nlp.get_pipe("elmo_features").initialize(lambda: [], nlp=nlp, encoder_loader=random_init())
    return nlp


def _outputs(docs):
    # spaCy's own textcat scores a batch of only empty docs as all zeros (and an empty doc
    # among others by its bias alone), so an empty doc's cats are left out.
    return [(d.tensor, [(e.start, e.end, e.label_) for e in d.ents], d.cats if len(d) else {},
             d._.get("perplexity") if d.has_extension("perplexity") else None) for d in docs]


def _assert_same(a, b, int8=False):
    if int8:
        # fp32's last-bit differences between batch shapes can flip a rounding to the next int8
        # level, and a flip spreads through the token's later layers: a few percent of the values
        # differ. One activation scale per batch (the int8 before) moved nearly all of them.
        ta, tb = (np.concatenate([t.ravel() for t, *_ in x]) for x in (a, b))
        far = np.abs(ta - tb) > 1e-5 + 1e-5 * np.abs(tb)
        assert ta.shape == tb.shape and far.mean() < 0.2, far.mean()
    for (ta, ea, ca, pa), (tb, eb, cb, pb) in zip(a, b, strict=True):
        assert ta.shape == tb.shape
        if not int8:
            np.testing.assert_allclose(ta, tb, atol=1e-5, rtol=1e-5)
        assert ea == eb
        assert ca.keys() == cb.keys() and all(abs(ca[k] - cb[k]) < 1e-5 for k in ca)
        assert (pa is None) == (pb is None) and (pa is None or abs(pa - pb) < 1e-4 * pa)


@pytest.mark.parametrize("family", ["bert", "bert_int8", "gpt", "elmo"])
def test_batch_size_does_not_change_a_docs_output(family, bert_pipeline, tmp_path):
    nlp = {"bert": lambda: bert_pipeline, "bert_int8": lambda: bert_pipeline, "gpt": lambda: _gpt_pipeline(tmp_path),
           "elmo": _elmo_pipeline}[family]()
    contract = nlp.get_pipe("bert_encoder").contract if family == "bert_int8" else None
    if contract:  # int8 quantizes activations per token, never per batch
        contract.request_precision("int8")
    try:
        one = _outputs(nlp.pipe(TEXTS, batch_size=1))
        many = _outputs(nlp.pipe(TEXTS, batch_size=32))
        alone = _outputs([nlp(t) for t in TEXTS])
    finally:
        if contract:
            contract.request_precision("fp32")
    _assert_same(one, many, int8=contract is not None)
    _assert_same(alone, many, int8=contract is not None)


CHECK = textwrap.dedent("""
    import sys, numpy as np, spacy
    nlp = spacy.load(sys.argv[1])
    texts = {texts!r}
    one = list(nlp.pipe(texts, n_process=1))
    two = list(nlp.pipe(texts, n_process=2, batch_size=4))
    for a, b in zip(one, two, strict=True):
        assert a.to_array(["ENT_IOB", "ENT_TYPE"]).tolist() == b.to_array(["ENT_IOB", "ENT_TYPE"]).tolist()
        # Workers run torch on one thread: sums may round differently in the last bits.
        assert a.cats.keys() == b.cats.keys() and all(abs(a.cats[k] - b.cats[k]) < 1e-5 for k in a.cats)
        np.testing.assert_allclose(a.tensor, b.tensor, atol=1e-5, rtol=1e-5)
        if a.has_extension("perplexity") and len(a):
            assert abs(a._.perplexity - b._.perplexity) < 1e-4 * a._.perplexity
            np.testing.assert_allclose(a._.token_logprobs, b._.token_logprobs, atol=1e-4)
    print("same", len(two), sum(len(d.ents) for d in two))
""")


@pytest.mark.parametrize("family", ["bert", "gpt"])
def test_two_processes_give_the_output_of_one(family, bert_pipeline, tmp_path):
    nlp = bert_pipeline if family == "bert" else _gpt_pipeline(tmp_path)
    nlp.to_disk(tmp_path / "pipeline")
    script = CHECK.format(texts=TEXTS)
    # In a subprocess with a timeout, so a hang fails the test instead of the suite.
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path / "pipeline")],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith(f"same {len(TEXTS)}")
    # The parent's tokenizer ran its thread pool before the fork: the workers run serially, silently.
    assert "huggingface/tokenizers" not in result.stderr, result.stderr[-3000:]


@pytest.mark.parametrize("family", ["bert", "gpt", "elmo"])
def test_a_memory_zone_frees_the_new_words_and_changes_no_output(family, bert_pipeline, tmp_path):
    """spaCy's `nlp.memory_zone()` (what keeps a long-running stream's vocabulary from growing)
    frees the strings of the block's new words and leaves every output as outside a zone."""
    nlp = {"bert": lambda: bert_pipeline, "gpt": lambda: _gpt_pipeline(tmp_path), "elmo": _elmo_pipeline}[family]()
    texts = [f"{t} zonewordalpha{i} zonewordbeta{i}".strip() for i, t in enumerate(TEXTS)]
    before = len(nlp.vocab.strings)
    with nlp.memory_zone():
        inside = _outputs(nlp.pipe(texts))
    assert len(nlp.vocab.strings) == before
    outside = _outputs(nlp.pipe(texts))
    assert len(nlp.vocab.strings) > before  # the words were new: the zone had strings to free
    _assert_same(inside, outside)


@pytest.mark.parametrize("family", ["bert", "bert_int8", "bert_bf16", "gpt", "elmo"])
def test_a_pickled_pipeline_gives_the_same_output(family, bert_pipeline, tmp_path):
    """spaCy pickles the pipeline for n_process where workers are spawned (macOS, Windows); a
    reduced precision is pickled after it has predicted (its weight copies exist by then)."""
    nlp = {"gpt": lambda: _gpt_pipeline(tmp_path), "elmo": _elmo_pipeline}.get(family, lambda: bert_pipeline)()
    precision = family.partition("_")[2]
    if precision:
        nlp.get_pipe("bert_encoder").contract.request_precision(precision)
    try:
        expected = _outputs(nlp.pipe(TEXTS))
        copy = pickle.loads(pickle.dumps(nlp))
    finally:
        if precision:
            nlp.get_pipe("bert_encoder").contract.request_precision("fp32")
    if precision:
        assert copy.get_pipe("bert_encoder").contract.precision == precision
    _assert_same(_outputs(copy.pipe(TEXTS)), expected, int8=precision == "int8")


def test_spawned_processes_give_the_output_of_one(bert_pipeline, tmp_path):
    bert_pipeline.to_disk(tmp_path / "pipeline")
    script = "import multiprocessing; multiprocessing.set_start_method('spawn')\n" + CHECK.format(texts=TEXTS)
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path / "pipeline")],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith(f"same {len(TEXTS)}")


RELOAD = textwrap.dedent("""
    import sys, numpy as np, spacy
    nlp = spacy.load(sys.argv[1])
    docs = list(nlp.pipe({texts!r}))
    logprobs = [d._.token_logprobs if d.has_extension("token_logprobs") else None for d in docs]
    np.savez(sys.argv[2], *[d.tensor for d in docs], *[np.asarray([] if lp is None else lp) for lp in logprobs])
    print(repr([([(e.start, e.end, e.label_) for e in d.ents], d.cats) for d in docs]))
""")


@pytest.mark.parametrize("family", ["bert", "gpt", "elmo"])
def test_saved_pipeline_predicts_bit_identically_in_a_fresh_process(family, bert_pipeline, tmp_path):
    nlp = {"bert": lambda: bert_pipeline, "gpt": lambda: _gpt_pipeline(tmp_path), "elmo": _elmo_pipeline}[family]()
    docs = list(nlp.pipe(TEXTS))
    nlp.to_disk(tmp_path / "pipeline")
    result = subprocess.run([sys.executable, "-c", RELOAD.format(texts=TEXTS), str(tmp_path / "pipeline"),
                             str(tmp_path / "out.npz")], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == repr([([(e.start, e.end, e.label_) for e in d.ents], d.cats) for d in docs])
    saved = np.load(tmp_path / "out.npz")
    logprobs = [d._.token_logprobs if d.has_extension("token_logprobs") else None for d in docs]
    arrays = [d.tensor for d in docs] + [np.asarray([] if lp is None else lp) for lp in logprobs]
    assert len(saved.files) == len(arrays)
    assert all(np.array_equal(saved[f"arr_{i}"], a) for i, a in enumerate(arrays))


QA_RELOAD = textwrap.dedent("""
    import sys, spacy
    from spacy_bertfam import make_qa_doc
    nlp = spacy.load(sys.argv[1])
    docs = [nlp(make_qa_doc(nlp, q, c)) for q, c in {pairs!r}]
    print(repr([[(s.start, s.end) for s in d.spans["answer"]] + [d.spans["answer"].attrs["score"]] for d in docs]))
""")


QA_PAIRS = [("who sat ?", "the cat sat on the mat ."), ("where ?", "hello world " * 40), ("what ran ?", "the dog ran")]


def _trained_span_qa(tmp_path):
    from ..fuzz.pipelines import qa_example, span_qa

    nlp = span_qa(tmp_path)
    optimizer = nlp.resume_training()
    for _ in range(3):
        nlp.update([qa_example(nlp, q, c) for q, c in QA_PAIRS], sgd=optimizer)
    return nlp


def _answers(nlp):
    from spacy_bertfam import make_qa_doc

    docs = [nlp(make_qa_doc(nlp, q, c)) for q, c in QA_PAIRS]
    return [[(s.start, s.end) for s in d.spans["answer"]] + [d.spans["answer"].attrs["score"]] for d in docs]


def test_a_pickled_span_qa_pipeline_gives_the_same_answers(tmp_path):
    nlp = _trained_span_qa(tmp_path)
    assert _answers(pickle.loads(pickle.dumps(nlp))) == _answers(nlp)


def test_saved_span_qa_answers_bit_identically_in_a_fresh_process(tmp_path):
    nlp = _trained_span_qa(tmp_path)
    nlp.to_disk(tmp_path / "pipeline")
    result = subprocess.run([sys.executable, "-c", QA_RELOAD.format(pairs=QA_PAIRS), str(tmp_path / "pipeline")],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == repr(_answers(nlp))


def test_span_qa_answers_in_a_memory_zone_as_outside_and_frees_the_new_words(tmp_path):
    from spacy_bertfam import make_qa_doc

    nlp = _trained_span_qa(tmp_path)
    expected = _answers(nlp)
    before = len(nlp.vocab.strings)
    with nlp.memory_zone():
        inside = _answers(nlp)
        nlp(make_qa_doc(nlp, "who saw zonewordgamma ?", "zonewordgamma saw zonewordgamma ."))
        assert len(nlp.vocab.strings) > before  # new words: the zone has strings to free
    assert len(nlp.vocab.strings) == before
    assert inside == expected
