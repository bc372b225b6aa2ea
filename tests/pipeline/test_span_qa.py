"""Sentence-pair encoding and the span_qa component."""
import json
import warnings

import numpy as np
import pytest
import spacy
import srsly
import torch
from spacy import displacy
from spacy.tokens import DocBin
from spacy.training import Example
from spacy.util import fix_random_seed
from thinc.api import Adam

from spacy_bertfam import ask, make_qa_doc
from spacy_bertfam.__main__ import main
from spacy_bertfam.corpora.squad import qa_corpus, read_squad
from spacy_bertfam.encoders import torch_encoder
from spacy_bertfam.pipeline.qa_scoring import answerable_auc, best_null_threshold, make_span_qa_scorer, score_answers, threshold_rows
from spacy_bertfam.pipeline.span_qa import _classifier_loss
from spacy_bertfam.tokenization.words import FIRST_SEGMENT

from ..conftest import TEST_DATA
from .pipelines import TINY_ENCODER, listener
from .test_bert_encoder import tiny_nlp

SQUAD = TEST_DATA / "squad"
V1 = SQUAD / "squad-v1.1-dev-3-articles.json"
V2 = SQUAD / "squad-v2.0-dev-2-articles.json"
QUESTION = "where did the dog run ?"
CONTEXT = "the cat sat on the mat . the dog ran to the river bank . hello world"


def pair_pieces(nlp, doc):
    enc = doc._.bertfam["bert_encoder"]
    tok = nlp.get_pipe("bert_encoder").contract.tokenizer
    ids = [p for w in tok.encode_words([[t.text for t in doc]])[0] for p in w]
    n_question = int(enc.token_lengths[: doc.spans[FIRST_SEGMENT][0].end].sum())
    return ids[:n_question], ids[n_question:]


def bare_pair(nlp, a, b):
    """Every layer of the bare model on [CLS] a [SEP] b [SEP] with segment ids 0/1."""
    tok = nlp.get_pipe("bert_encoder").contract.tokenizer
    cls, sep = tok.piece_id("[CLS]"), tok.piece_id("[SEP]")
    ids = torch.tensor([[cls, *a, sep, *b, sep]])
    types = torch.tensor([[0] * (len(a) + 2) + [1] * (len(b) + 1)])
    with torch.no_grad():
        layers = torch_encoder(nlp.get_pipe("bert_encoder").model).eval()(ids, type_ids=types).layers
    keep = list(range(1, len(a) + 1)) + list(range(len(a) + 2, len(a) + 2 + len(b)))
    return [layer[0, keep].numpy() for layer in layers]


def test_pair_equals_bare_model_with_segments(hf_bert_dir):
    nlp = tiny_nlp(hf_bert_dir)
    doc = nlp(make_qa_doc(nlp, QUESTION, CONTEXT))
    a, b = pair_pieces(nlp, doc)
    want = bare_pair(nlp, a, b)
    got = doc._.bertfam["bert_encoder"].layers
    for layer, expected in enumerate(want):
        np.testing.assert_allclose(got[layer], expected, atol=1e-5)
    # Without the question mark-up the same text is one segment: different vectors.
    plain = nlp(doc.text)
    assert np.abs(plain._.bertfam["bert_encoder"].layers[3] - got[3]).max() > 1e-3


def test_small_windows_repeat_the_question(hf_bert_dir):
    window, stride = 24, 5
    nlp = tiny_nlp(hf_bert_dir, window=window, stride=stride)
    doc = nlp(make_qa_doc(nlp, QUESTION, CONTEXT))
    a, b = pair_pieces(nlp, doc)
    room = window - 3 - len(a)
    assert len(b) > room  # several windows
    # Windows of B start every min(stride, room) pieces until one reaches the end.
    starts = list(range(0, len(b) - room + stride, stride))
    assert starts[-1] + room >= len(b) > starts[-2] + room
    outputs = [bare_pair(nlp, a, b[s : s + room]) for s in starts]
    top = doc._.bertfam["bert_encoder"].layers[3]
    # The question's positions: the average over all windows.
    want_a = np.mean([out[3][: len(a)] for out in outputs], axis=0)
    np.testing.assert_allclose(top[: len(a)], want_a, atol=1e-5)
    # Each context position: the average over the windows that cover it.
    for i in range(len(b)):
        covering = [out[3][len(a) + i - s] for s, out in zip(starts, outputs) if s <= i < s + room]
        np.testing.assert_allclose(top[len(a) + i], np.mean(covering, axis=0), atol=1e-5)


def test_pair_errors_are_explained(hf_bert_dir, tmp_path):
    nlp = tiny_nlp(hf_bert_dir, window=12, stride=4)
    with pytest.raises(ValueError, match="first segment of .* pieces leaves no room"):
        nlp(make_qa_doc(nlp, "where did the dog run to on the mat ?", CONTEXT))
    doc = nlp.make_doc(CONTEXT)
    doc.spans[FIRST_SEGMENT] = [doc[2:4]]
    with pytest.raises(ValueError, match="must hold one span that starts at the first token"):
        nlp(doc)
    with pytest.raises(ValueError, match="The context is empty"):
        make_qa_doc(nlp, QUESTION, "  ")
    for empty in ("", " \t "):
        with pytest.raises(ValueError, match="The context is empty"):
            make_qa_doc(nlp, QUESTION, nlp.make_doc(empty))
    with pytest.raises(ValueError, match="every question must be a non-empty string, got None"):
        make_qa_doc(nlp, None, CONTEXT)
    with pytest.raises(ValueError, match="the context must be a string or a Doc, got list"):
        make_qa_doc(nlp, QUESTION, ["the", "cat"])


def test_a_context_doc_keeps_its_own_tokens():
    nlp = spacy.blank("en")
    context = spacy.tokens.Doc(nlp.vocab, words=["New York-based", "cats", "sat"], spaces=[True, False, False])
    doc = make_qa_doc(nlp, "who sat ?", context)
    assert [t.text for t in doc] == ["who", "sat", "?", "New York-based", "cats", "sat"]
    assert doc.text == "who sat ? New York-based catssat" and len(doc.spans[FIRST_SEGMENT][0]) == 3


QA = [  # (question, context, answer or None)
    ("where did the dog run ?", "the cat sat on the mat . the dog ran to the river .", "the river"),
    ("where did the cat sit ?", "the cat sat on the mat . the dog ran to the river .", "the mat"),
    ("who ran to the river ?", "the cat sat on the mat . the dog ran to the river .", "the dog"),
    ("who sat on the mat ?", "the dog sat on the mat . the cat ran to the bank .", "the dog"),
    ("where did the cat run ?", "the dog sat on the mat . the cat ran to the bank .", "the bank"),
    ("who said hello ?", "the cat sat on the mat . the dog ran to the river .", None),
]


def qa_examples(nlp):
    out = []
    for question, context, answer in QA:
        predicted, reference = make_qa_doc(nlp, question, context), make_qa_doc(nlp, question, context)
        start = reference.text.rindex(answer) if answer else None
        reference.spans["answer"] = [reference.char_span(start, start + len(answer))] if answer else []
        out.append(Example(predicted, reference))
    return out


def qa_nlp(checkpoint, no_answer="span_softmax", **listener_settings):
    nlp = spacy.blank("en")
    nlp.add_pipe("bert_encoder", config={"model": TINY_ENCODER})
    nlp.add_pipe("span_qa", config={"model": {"@architectures": "spacy-bertfam.SpanQA.v1",
                                               "tok2vec": listener(**listener_settings)},
                                    "no_answer": no_answer})
    nlp.config["initialize"]["components"]["bert_encoder"] = {
        "encoder_loader": {"@misc": "spacy-bertfam.CheckpointLoader.v1", "path": str(checkpoint)}}
    return nlp


@pytest.mark.parametrize("no_answer,pooling", [("span_softmax", "first_last"), ("classifier", "mean")])
def test_span_qa_learns_answers_and_no_answer(hf_bert_dir, no_answer, pooling):
    nlp = qa_nlp(hf_bert_dir, no_answer=no_answer, pooling=pooling, width=64 if pooling == "first_last" else 32)
    fix_random_seed(0)
    nlp.initialize(lambda: qa_examples(nlp))
    # 80 steps at 0.003: every answer on each of 20 seeds tried (40 at 0.01 missed one on 4-6 of 10).
    optimizer = Adam(0.003)
    before = nlp.evaluate(qa_examples(nlp))
    weights = {k: v.clone() for k, v in torch_encoder(nlp.get_pipe("bert_encoder").model).state_dict().items()}
    losses = []
    for _ in range(80):
        losses.append(nlp.update(qa_examples(nlp), sgd=optimizer, drop=0.0)["span_qa"])
    after = nlp.evaluate(qa_examples(nlp))
    assert losses[-1] < 0.2 * losses[0], losses
    assert after["qa_exact"] == 1.0 and before["qa_exact"] < 0.5, (before, after)
    # The QA loss reached the shared encoder through the listener.
    trained = torch_encoder(nlp.get_pipe("bert_encoder").model).state_dict()
    unchanged = [k for k in weights if torch.equal(weights[k], trained[k])]
    assert unchanged == ["pooler.weight", "pooler.bias"]  # only the [CLS] pooler, which nothing reads
    docs = list(nlp.pipe([make_qa_doc(nlp, q, c) for q, c, _ in QA]))
    for doc, (_, _, answer) in zip(docs, QA):
        group = doc.spans["answer"]
        assert [s.text for s in group] == ([answer] if answer else [])
        assert (group.attrs["score"] is None) == (answer is None)
        assert all(s.start >= len(doc.spans[FIRST_SEGMENT][0]) for s in group)  # never in the question


@pytest.mark.parametrize("gold", [[0, 0], [4, 5]])
def test_classifier_loss_gradient_is_its_derivative(gold):
    scores = np.random.default_rng(0).normal(size=(8, 2))
    loss, grad = _classifier_loss(scores, gold, n_question=2)
    numeric = np.zeros_like(scores)
    for index in np.ndindex(*scores.shape):
        step = np.zeros_like(scores)
        step[index] = 1e-6
        numeric[index] = (_classifier_loss(scores + step, gold, 2)[0] - _classifier_loss(scores - step, gold, 2)[0]) / 2e-6
    np.testing.assert_allclose(grad, numeric, atol=1e-6)
    # An unanswerable question teaches the answerable logit only, never the spans.
    assert (np.abs(grad[1:]).sum() == 0) == (gold == [0, 0])


@pytest.mark.parametrize("logit", [-1000.0, 1000.0])
def test_classifier_loss_of_far_logits_is_finite_and_quiet(logit):
    scores = np.zeros((6, 2))
    scores[0, 0] = logit
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warnings
        loss, d = _classifier_loss(scores, [0, 0], n_question=2)
    assert loss == pytest.approx(max(logit, 0.0)) and d[0, 0] == pytest.approx(float(logit > 0))


def test_unknown_no_answer_mode_is_refused(hf_bert_dir):
    with pytest.raises(ValueError, match="no_answer must be one of 'span_softmax', 'classifier', got 'cls'"):
        qa_nlp(hf_bert_dir, no_answer="cls")


def test_non_finite_scores_are_an_error_not_no_answer(hf_bert_dir):
    nlp = qa_nlp(hf_bert_dir)
    nlp.initialize(lambda: qa_examples(nlp))
    head = next(node for node in nlp.get_pipe("span_qa").model.walk() if node.has_param("W"))
    head.set_param("W", head.get_param("W") * np.nan)  # as after a diverged training
    with pytest.raises(ValueError, match="scores for the question 'what sat on the mat \\?' are not finite"):
        nlp(make_qa_doc(nlp, "what sat on the mat ?", "the cat sat on the mat ."))


def answers(nlp):
    """Each QA pair's answer (start, end) and its probability (0 for none)."""
    docs = list(nlp.pipe([make_qa_doc(nlp, q, c) for q, c, _ in QA]))
    spans = [[(s.start, s.end) for s in doc.spans["answer"]] for doc in docs]
    return spans, [doc.spans["answer"].attrs["score"] or 0.0 for doc in docs]


def assert_same_answers(got, want):
    assert got[0] == want[0]
    assert got[1] == pytest.approx(want[1], abs=1e-5)


def test_span_qa_saves_and_replaces_listeners(hf_bert_dir, tmp_path):
    nlp = qa_nlp(hf_bert_dir, pooling="first_last", width=64)  # as configs/qa.cfg reads tokens
    fix_random_seed(0)
    nlp.initialize(lambda: qa_examples(nlp))
    optimizer = Adam(0.01)
    for _ in range(10):
        nlp.update(qa_examples(nlp), sgd=optimizer, drop=0.0)
    want = answers(nlp)
    assert any(want[0])
    nlp.to_disk(tmp_path / "qa")
    assert_same_answers(answers(spacy.load(tmp_path / "qa")), want)
    # evaluate-qa reads a .spacy of QA Docs with the question mark-up kept.
    DocBin(docs=[eg.reference for eg in qa_examples(nlp)]).to_disk(tmp_path / "qa.spacy")
    main(["evaluate-qa", str(tmp_path / "qa"), str(tmp_path / "qa.spacy"), "--output", str(tmp_path / "s.json")])
    written = srsly.read_json(tmp_path / "s.json")
    assert written["qa_f1"] == pytest.approx(nlp.evaluate(qa_examples(nlp))["qa_f1"])
    n_words = sum(len(eg.predicted) for eg in qa_examples(nlp))
    assert written["questions_per_second"] == pytest.approx(written["speed"] * len(qa_examples(nlp)) / n_words)
    nlp.replace_listeners("bert_encoder", "span_qa", ["model.tok2vec"])
    assert_same_answers(answers(nlp), want)


def trained_qa(checkpoint, steps=40):
    nlp = qa_nlp(checkpoint)
    fix_random_seed(0)
    nlp.initialize(lambda: qa_examples(nlp))
    optimizer = Adam(0.01)
    for _ in range(steps):
        nlp.update(qa_examples(nlp), sgd=optimizer, drop=0.0)
    return nlp


def test_ordinary_docs_pass_through_and_are_missing_data_in_training(hf_bert_dir):
    # span_qa shares a pipeline with ner/textcat (en_bertfam): an ordinary Doc is left alone,
    # and an example without a question adds nothing to the QA loss.
    nlp = qa_nlp(hf_bert_dir)
    nlp.initialize(lambda: qa_examples(nlp))
    doc = nlp("the cat sat on the mat")
    assert "answer" not in doc.spans
    plain = Example.from_dict(nlp.make_doc("the dog ran"), {})
    qa = nlp.get_pipe("span_qa")

    def loss(examples):
        docs = list(nlp.get_pipe("bert_encoder").pipe([eg.predicted for eg in examples]))
        return qa.get_loss(examples, qa.model.predict(docs))

    qa_only, mixed = loss(qa_examples(nlp)), loss(qa_examples(nlp) + [plain])
    assert mixed[0] == pytest.approx(qa_only[0]) and float(abs(mixed[1][-1]).sum()) == 0.0
    examples = qa_examples(nlp)
    scores = qa.model.predict(list(nlp.get_pipe("bert_encoder").pipe([eg.predicted for eg in examples])))
    assert qa_only[0] > 0 and qa.get_loss(iter(examples), scores)[0] == pytest.approx(qa_only[0])  # a generator
    question = make_qa_doc(nlp, "who ?", "the cat")
    with pytest.raises(ValueError, match=r"has no doc.spans\['answer'\]"):
        loss([Example(question, question.copy())])


def test_null_threshold_withholds_exactly_the_answers_below_it(hf_bert_dir, tmp_path):
    nlp = trained_qa(hf_bert_dir, steps=10)
    qa = nlp.get_pipe("span_qa")
    docs = list(nlp.pipe([make_qa_doc(nlp, q, c) for q, c, _ in QA]))
    margins = [d.spans["answer"].attrs["margin"] for d in docs]
    best = [d.spans["answer"].attrs["best"] for d in docs]
    for tau in sorted(margins) + [min(margins) - 1.0]:
        qa.cfg["null_threshold"] = tau
        for doc, margin, span in zip(nlp.pipe([make_qa_doc(nlp, q, c) for q, c, _ in QA]), margins, best):
            got = [(s.start, s.end) for s in doc.spans["answer"]]
            assert got == ([] if margin <= tau else [tuple(span)]), (tau, margin)
    # Tuned on data, stored with the pipeline, used after loading.
    qa.cfg["null_threshold"] = 0.0
    plain_f1 = nlp.evaluate(qa_examples(nlp))["qa_f1"]
    tuned = qa.tune_null_threshold(docs, [eg.reference for eg in qa_examples(nlp)])
    assert tuned["qa_f1"] >= plain_f1  # tau = 0 is among the candidates
    assert nlp.evaluate(qa_examples(nlp))["qa_f1"] == pytest.approx(tuned["qa_f1"])  # and prediction uses it
    nlp.to_disk(tmp_path / "qa")
    # (the JSON cfg keeps 10 decimals; tau lies midway between margins, so no answer flips)
    loaded = spacy.load(tmp_path / "qa").get_pipe("span_qa").cfg["null_threshold"]
    assert loaded == pytest.approx(tuned["null_threshold"], abs=1e-9)
    # evaluate-qa --tune-threshold: the same tau, saved in the component and in config.cfg alike.
    qa.cfg["null_threshold"] = 0.0
    nlp.to_disk(tmp_path / "qa")
    DocBin(docs=[eg.reference for eg in qa_examples(nlp)]).to_disk(tmp_path / "qa.spacy")
    main(["evaluate-qa", str(tmp_path / "qa"), str(tmp_path / "qa.spacy"), "--tune-threshold"])
    config = spacy.util.load_config(tmp_path / "qa" / "config.cfg")
    assert config["components"]["span_qa"]["null_threshold"] == pytest.approx(tuned["null_threshold"])
    assert spacy.load(tmp_path / "qa").get_pipe("span_qa").cfg["null_threshold"] == pytest.approx(
        tuned["null_threshold"], abs=1e-9)


def test_ask_answers_with_spans_of_the_asked_doc(hf_bert_dir):
    nlp = trained_qa(hf_bert_dir)
    doc = nlp.make_doc("the cat sat on the mat . the dog ran to the river .")
    doc.ents = [doc.char_span(4, 7, label="ANIMAL")]
    doc.cats = {"PET": 1.0}
    answers = ask(nlp, doc, ["who sat on the mat ?", "where did the dog run ?"])
    assert [a.question for a in answers] == ["who sat on the mat ?", "where did the dog run ?"]
    want = [make_qa_doc(nlp, a.question, doc.text) for a in answers]
    for answer, qa_doc in zip(answers, nlp.pipe(want)):
        group = qa_doc.spans["answer"]
        n_question = len(qa_doc.spans[FIRST_SEGMENT][0])
        assert (answer.span is None) == (not len(group))
        if answer.span is not None:
            assert answer.span.doc is doc
            assert (answer.span.start, answer.span.end) == (group[0].start - n_question, group[0].end - n_question)
            assert answer.score == pytest.approx(group.attrs["score"], abs=1e-6)
    assert any(a.span is not None for a in answers)
    assert [(e.start, e.end, e.label_) for e in doc.ents] == [(1, 2, "ANIMAL")] and doc.cats == {"PET": 1.0}
    assert [s.label_ for s in doc.spans["answers"]] == [a.question for a in answers if a.span is not None]
    html = displacy.render(doc, style="span", options={"spans_key": "answers"})
    assert all(a.question in html and a.span[0].text in html for a in answers if a.span is not None)


def test_ask_explains_bad_questions(hf_bert_dir):
    nlp = trained_qa(hf_bert_dir, steps=1)
    doc = nlp.make_doc("the cat sat on the mat .")
    with pytest.raises(ValueError, match="every question must be a non-empty string"):
        ask(nlp, doc, ["  "])
    for empty in ("", "  \n\n "):  # a whitespace Doc got its whitespace token as a confident answer
        with pytest.raises(ValueError, match="the Doc is empty or whitespace"):
            ask(nlp, nlp.make_doc(empty), ["who ?"])
    with pytest.raises(ValueError, match="first segment of .* pieces leaves no room"):
        ask(nlp, doc, ["who " * 80 + "?"])
    alone = spacy.blank("en")
    alone.add_pipe("span_qa", config={"model": {"@architectures": "spacy-bertfam.SpanQA.v1", "tok2vec": listener()}})
    with pytest.raises(ValueError, match="no encoder to listen to; add the encoder component"):
        ask(alone, doc, ["who ?"])


def test_tau_is_chosen_on_qa_docs_that_span_qa_has_processed(hf_bert_dir):
    nlp = trained_qa(hf_bert_dir, steps=1)
    examples = qa_examples(nlp)
    docs = list(nlp.pipe([eg.predicted for eg in examples]))
    golds = [eg.reference for eg in examples]
    rows = threshold_rows(docs, golds)
    assert [gold for _, _, gold in rows] == [[a] if a else [] for _, _, a in QA]
    # An ordinary Doc of a corpus that mixes tasks is passed over, as the scorer passes it over.
    plain = nlp("the cat sat")
    assert threshold_rows(docs + [plain], golds + [plain.copy()]) == rows
    with pytest.raises(ValueError, match="run the pipeline .* over the Docs first"):
        threshold_rows([eg.predicted for eg in qa_examples(nlp)], golds)
    with pytest.raises(ValueError, match="6 processed Docs but 5 gold Docs"):
        threshold_rows(docs, golds[:5])
    with pytest.raises(ValueError, match="no QA questions to choose the threshold on"):
        best_null_threshold([])


def test_scorer_reads_the_answers_where_the_component_writes_them(hf_bert_dir):
    # spaCy passes a component's settings to its scorer: a span_qa with another spans_key is
    # scored on its own answers (the factory's default scorer names no key).
    nlp = spacy.blank("en")
    nlp.add_pipe("bert_encoder", config={"model": TINY_ENCODER})
    qa = nlp.add_pipe("span_qa", config={"model": {"@architectures": "spacy-bertfam.SpanQA.v1",
                                                    "tok2vec": listener()}, "spans_key": "qa"})
    predicted, reference = make_qa_doc(nlp, "q ?", "the cat sat"), make_qa_doc(nlp, "q ?", "the cat sat")
    predicted.spans["qa"] = [predicted[3:4]]
    reference.spans["answer"] = [reference[3:4]]
    assert qa.score([Example(predicted, reference)])["qa_exact"] == 1.0
    assert make_span_qa_scorer("answer")([Example(predicted, reference)], spans_key="qa")["qa_exact"] == 0.0


def test_scores_split_answerable_and_unanswerable():
    nlp = spacy.blank("en")

    def example(answer, gold):
        predicted, reference = make_qa_doc(nlp, "q ?", "the cat sat"), make_qa_doc(nlp, "q ?", "the cat sat")
        predicted.spans["answer"] = [predicted[3:4]] if answer else []
        reference.spans["answer"] = [reference[3:4]] if gold else []
        return Example(predicted, reference)

    scores = score_answers([example(True, True), example(False, True), example(False, False), example(True, False)])
    assert scores["qa_hasans_exact"] == 0.5 and scores["qa_noans_accuracy"] == 0.5 and scores["qa_exact"] == 0.5
    assert "qa_answerable_auc" not in scores  # these predictions carry no margins


def test_answerable_auc_counts_ordered_pairs():
    rng = np.random.default_rng(0)
    margins = np.round(rng.normal(size=60), 1)  # rounded: ties between the two kinds occur
    answerable = rng.random(60) < 0.5
    pairs = [(a > b) + 0.5 * (a == b) for a in margins[answerable] for b in margins[~answerable]]
    assert answerable_auc(margins, answerable) == pytest.approx(np.mean(pairs))
    assert answerable_auc([3.0, 2.0, 1.0], [True, True, False]) == 1.0
    assert answerable_auc([1.0, 2.0], [True, False]) == 0.0
    assert answerable_auc([1.0, 2.0], [True, True]) is None


def test_scores_report_answerable_auc_from_the_margins():
    nlp = spacy.blank("en")

    def example(margin, gold):
        predicted, reference = make_qa_doc(nlp, "q ?", "the cat sat"), make_qa_doc(nlp, "q ?", "the cat sat")
        predicted.spans["answer"] = [predicted[3:4]] if margin > 0 else []
        predicted.spans["answer"].attrs["margin"] = margin
        reference.spans["answer"] = [reference[3:4]] if gold else []
        return Example(predicted, reference)

    # answerable margins 2, -1; unanswerable 1, -3: 3 of the 4 pairs are ordered rightly
    scores = score_answers([example(2.0, True), example(-1.0, True), example(1.0, False), example(-3.0, False)])
    assert scores["qa_answerable_auc"] == pytest.approx(0.75)


def test_scores_report_the_forced_span_f1_of_answerable_questions():
    nlp = spacy.blank("en")

    def example(best, answer, gold):
        predicted, reference = make_qa_doc(nlp, "q ?", "the cat sat"), make_qa_doc(nlp, "q ?", "the cat sat")
        predicted.spans["answer"] = [predicted[slice(*best)]] if answer else []
        predicted.spans["answer"].attrs.update(best=best, margin=1.0 if answer else -1.0)
        reference.spans["answer"] = [reference[3:4]] if gold else []  # "cat"
        return Example(predicted, reference)

    # Answerable: "cat" withheld (forced F1 1), "cat sat" answered (F1 2/3); the unanswerable one
    # does not count. Withholding the first costs it HasAns F1, not forced F1.
    scores = score_answers([example((3, 4), False, True), example((3, 5), True, True), example((2, 3), True, False)])
    assert scores["qa_hasans_forced_f1"] == pytest.approx((1 + 2 / 3) / 2)
    assert scores["qa_hasans_f1"] == pytest.approx((0 + 2 / 3) / 2)


def test_scores_are_squads_exact_and_f1():
    nlp = spacy.blank("en")

    def example(guess, golds):
        predicted = make_qa_doc(nlp, "q ?", guess or "x")
        predicted.spans["answer"] = [predicted[2:]] if guess else []  # the whole context
        reference = make_qa_doc(nlp, "q ?", " ; ".join(golds) or "x")
        starts = [reference.text.index(g) for g in golds]
        reference.spans["answers"] = [reference.char_span(s, s + len(g)) for s, g in zip(starts, golds)]
        return Example(predicted, reference)

    scores = score_answers([
        example("The River.", ["river"]),  # articles and punctuation do not count: exact
        example("the river bank", ["a river", "bank"]),  # "river bank" vs "river": P 1/2, R 1, F1 2/3
        example(None, []),  # no answer, rightly
        example("dog", []),  # an answer where there is none
    ])
    assert scores["qa_exact"] == pytest.approx(0.5)
    assert scores["qa_f1"] == pytest.approx((1 + 2 / 3 + 1 + 0) / 4)


def test_squad_conversion_counts_and_reader(tmp_path):
    # Three articles of SQuAD v1.1 dev and two of v2.0 dev (tests/data/squad/README.md).
    nlp = spacy.blank("en")
    v1, report = read_squad(V1, nlp)
    assert report.questions == len(v1) == 232 and report.unanswerable == 0
    v2, report2 = read_squad(V2, nlp)
    assert report2.questions == len(v2) == 315 and report2.unanswerable == 159
    assert 0.4 < report2.unanswerable / report2.questions < 0.6  # about half, as in all of v2.0 dev
    for doc in v1[:200] + v2[:200]:
        question = doc.spans[FIRST_SEGMENT][0]
        for span in doc.spans["answers"]:
            assert span.start >= question.end
    # Every gold answer is the answer text, but for the few widened to whole tokens.
    data = json.loads(V1.read_text(encoding="utf8"))["data"]
    texts = [a["text"].strip() for art in data for p in art["paragraphs"] for qa in p["qas"] for a in qa["answers"]]
    spans = [s.text for d in v1 for s in d.spans["answers"]]
    assert len(spans) == len(texts) == report.answers == 694
    assert 0 < sum(s != t for s, t in zip(spans, texts)) == report.widened < 0.02 * report.answers
    # The reader keeps the question mark-up on the predicted side.
    from spacy_bertfam.corpora.squad import write_squad

    write_squad(V1, tmp_path / "dev.spacy", nlp, articles=(0, 2))
    examples = list(qa_corpus(tmp_path / "dev.spacy")(nlp))
    assert len(examples) == 85 + 76  # the questions of the first two articles
    assert all(FIRST_SEGMENT in eg.predicted.spans for eg in examples)
    assert all(eg.predicted.text == eg.reference.text for eg in examples)


def test_widened_answers_are_scored_against_the_datasets_texts(tmp_path):
    """An answer that cuts a token ("school" of "schools") is a widened span for training, but
    EM/F1 compare with the dataset's text, as SQuAD's scorer does (the widened text was used)."""
    from spacy_bertfam.corpora.squad import answer_texts, write_squad
    from spacy_bertfam.pipeline.qa_scoring import score_answers

    nlp = spacy.blank("en")
    write_squad(V1, tmp_path / "dev.spacy", nlp)
    examples = list(qa_corpus(tmp_path / "dev.spacy")(nlp))
    data = json.loads(V1.read_text(encoding="utf8"))["data"]
    official = [[a["text"] for a in qa["answers"]] for art in data for p in art["paragraphs"] for qa in p["qas"]]
    assert [answer_texts(eg.reference) for eg in examples] == official
    widened = [eg for eg, texts in zip(examples, official)
               if texts != [s.text for s in eg.reference.spans["answers"]]]
    assert widened
    # Predicting a widened span itself is no longer always an exact match (it was, with its own text as gold).
    for eg, texts in zip(examples, official):
        if eg in widened:
            i = next(i for i, (t, sp) in enumerate(zip(texts, eg.reference.spans["answers"])) if t != sp.text)
            gold = eg.reference.spans["answers"][i]
            eg.predicted.spans["answer"] = [eg.predicted.char_span(gold.start_char, gold.end_char)]
    assert score_answers(widened)["qa_exact"] < 1.0


def test_scoring_says_when_the_question_mark_up_was_lost_before_prediction():
    """`spacy evaluate` reads .spacy files with spaCy's Corpus, whose predicted Docs are the text
    re-tokenized: span_qa then skipped every question and printed no QA score, without a word."""
    nlp = spacy.blank("en")
    reference = make_qa_doc(nlp, "Where did the dog run?", "The dog ran to the river.")
    reference.spans["answers"] = [reference[-3:-1]]
    examples = [Example(nlp.make_doc(reference.text), reference), Example(reference, reference)]
    with pytest.warns(UserWarning, match="span_qa scored 1 questions and left out 1 whose Docs lost the question"):
        score_answers(examples)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        score_answers(examples[1:])  # nothing lost, nothing said


def test_tuning_the_threshold_on_data_without_unanswerable_questions_is_refused(hf_bert_dir, tmp_path, capsys):
    """It saved tau = 0 as if tuned: on answerable questions alone no threshold can be told apart."""
    nlp = trained_qa(hf_bert_dir, steps=1)
    nlp.to_disk(tmp_path / "qa")
    DocBin(docs=[eg.reference for eg in qa_examples(nlp) if eg.reference.spans["answer"]]).to_disk(tmp_path / "v1.spacy")
    with pytest.raises(SystemExit) as exit:
        main(["evaluate-qa", str(tmp_path / "qa"), str(tmp_path / "v1.spacy"), "--tune-threshold"])
    assert exit.value.code == 1 and "has no unanswerable question" in capsys.readouterr().err
