"""SQuAD scoring: exact match and token F1 (v1.1 and v2.0), and choosing the no-answer threshold."""
import re
import string
import warnings
from collections import Counter
from functools import partial
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
from spacy.tokens import Doc
from spacy.training import Example
from spacy.util import registry

from ..corpora.squad import ANSWER_KEY, answer_texts
from ..tokenization.words import first_segment_end


@registry.scorers("spacy-bertfam.span_qa_scorer.v1")
def make_span_qa_scorer(spans_key: Optional[str] = None) -> Callable:
    """`spacy-bertfam.span_qa_scorer.v1`: SQuAD exact match and token F1 (qa_exact, qa_f1), see
    `score_answers`.

    spans_key (Optional[str]): the doc.spans key of the predicted answer; by default the
        component's own (spaCy passes it with the component's settings), else "answer". Gold
        answers are read from the reference's doc.spans["answers"], else ["answer"].
    """
    return partial(_score, configured_key=spans_key)  # a partial, not a closure: it pickles


def _score(examples: Iterable[Example], *, configured_key: Optional[str], **kwargs) -> Dict[str, Optional[float]]:
    return score_answers(examples, spans_key=configured_key or kwargs.get("spans_key") or ANSWER_KEY)


def score_answers(examples: Iterable[Example], *, spans_key: str = ANSWER_KEY) -> Dict[str, Optional[float]]:
    """SQuAD's exact match and token F1, each the best over a question's gold answers (an
    unanswerable question scores 1 only when no answer is given). With unanswerable questions
    in the data, also SQuAD 2.0's split: qa_hasans_exact/_f1 and qa_noans_accuracy, and
    qa_answerable_auc (see `answerable_auc`; from the answer groups' "margin" attrs, when every
    prediction has one) and qa_hasans_forced_f1 (HasAns F1 of the best span whatever tau says,
    from the groups' "best" attrs: how well the spans are learned, apart from answerability).
    Examples without a question (ordinary Docs of a corpus that mixes tasks) are not scored."""
    rows, margins, forced = [], [], []
    lost = 0  # questions the reference marks and the predicted Doc lacks
    for eg in examples:
        if not first_segment_end(eg.predicted):
            lost += bool(first_segment_end(eg.reference))
            continue
        predicted = eg.predicted.spans.get(spans_key) if eg.predicted.spans else None
        guess = predicted[0].text if predicted else ""
        margins.append(predicted.attrs.get("margin") if predicted is not None else None)
        golds = answer_texts(eg.reference)
        rows.append((bool(golds), *_best_scores(guess, golds or [""])))
        if golds and predicted is not None and "best" in predicted.attrs:
            best = predicted.attrs["best"]
            forced.append(_best_scores(eg.predicted[best[0]:best[1]].text if best else "", golds)[1])
    if lost:
        warnings.warn(f"span_qa scored {len(rows)} questions and left out {lost} whose Docs lost the question "
                      "mark-up before prediction: spaCy's Corpus (and so `spacy evaluate`) re-tokenizes the text. "
                      "Score QA with `python -m spacy_bertfam evaluate-qa MODEL DATA`, and read QA data in "
                      "training with spacy-bertfam.QACorpus.v1", stacklevel=2)
    if not rows:
        return {"qa_exact": None, "qa_f1": None}
    has, exact, f1 = (np.asarray(c) for c in zip(*rows))
    scores = {"qa_exact": float(exact.mean()), "qa_f1": float(f1.mean())}
    if not has.all():
        scores["qa_hasans_exact"] = float(exact[has].mean()) if has.any() else None
        scores["qa_hasans_f1"] = float(f1[has].mean()) if has.any() else None
        scores["qa_noans_accuracy"] = float(exact[~has].mean())
        if None not in margins:
            scores["qa_answerable_auc"] = answerable_auc(margins, has)
        if forced and len(forced) == int(has.sum()):
            scores["qa_hasans_forced_f1"] = float(np.mean(forced))
    return scores


def answerable_auc(margins: Sequence[float], answerable: Sequence[bool]) -> Optional[float]:
    """ROC AUC of the answer-vs-"no answer" margins as a test of answerability: the chance
    that an answerable question gets a higher margin than an unanswerable one (ties count
    half). Unlike F1 at a tuned tau it does not depend on the threshold: 0.5 means the model
    has not learned to tell the two apart, whatever tau does. None without both kinds."""
    margins, answerable = np.asarray(margins, dtype=np.float64), np.asarray(answerable, dtype=bool)
    positive, negative = margins[answerable], np.sort(margins[~answerable])
    if not len(positive) or not len(negative):
        return None
    below = np.searchsorted(negative, positive, side="left")  # per answerable: unanswerable below it
    tied = np.searchsorted(negative, positive, side="right") - below
    return float((below + 0.5 * tied).sum() / (len(positive) * len(negative)))


ThresholdRow = Tuple[float, str, Sequence[str]]  # margin, best span's text, gold answers (none: unanswerable)


def threshold_rows(docs: Iterable[Doc], golds: Iterable[Doc], spans_key: str = ANSWER_KEY) -> List[ThresholdRow]:
    """Per QA Doc processed by span_qa (with its gold Doc), what choosing tau needs: the margin
    of its best span over "no answer", that span's text, and the gold answer texts. Docs
    without a question (a corpus that mixes tasks) are passed over, as the scorer does."""
    docs, golds = list(docs), list(golds)
    if len(docs) != len(golds):
        raise ValueError(f"threshold_rows: {len(docs)} processed Docs but {len(golds)} gold Docs; "
                         "give one gold Doc per processed Doc, in the same order")
    rows = []
    for doc, gold in zip(docs, golds):
        if not first_segment_end(doc):
            continue
        group = doc.spans.get(spans_key) if doc.spans else None
        if group is None or "margin" not in group.attrs:
            raise ValueError(f"threshold_rows: a QA Doc has no answer group doc.spans[{spans_key!r}] with a "
                             "margin; run the pipeline (with span_qa) over the Docs first, e.g. nlp.pipe(docs)")
        best = group.attrs["best"]
        rows.append((group.attrs["margin"], doc[best[0]:best[1]].text if best else "", answer_texts(gold)))
    return rows


def _answered_and_withheld(rows: Sequence[ThresholdRow]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: its margin, its F1 when answered, and its F1 when withheld (1 if unanswerable)."""
    margins = np.asarray([m for m, _, _ in rows], dtype=np.float64)
    answered = np.asarray([_best_scores(text, list(golds) or [""])[1] for _, text, golds in rows])
    withheld = np.asarray([float(not golds) for _, _, golds in rows])
    return margins, answered, withheld


def _mean_f1(margins: np.ndarray, answered: np.ndarray, withheld: np.ndarray, tau: float) -> float:
    """The one rule: a question is answered exactly where its margin > tau."""
    return float(np.where(margins > tau, answered, withheld).mean())


def f1_at_threshold(rows: Sequence[ThresholdRow], tau: float) -> float:
    """Mean F1 when a question is answered exactly where its margin > tau."""
    return _mean_f1(*_answered_and_withheld(rows), tau)


def best_null_threshold(rows: Sequence[ThresholdRow]) -> Tuple[float, float]:
    """The threshold tau with the best mean F1, and that F1.

    rows: per question, the best span's log-score margin over "no answer", its text, and
        the gold answer texts (none for an unanswerable question), see `threshold_rows`.
        A question is answered when its margin > tau; candidates are 0, the midpoints
        between sorted margins (SQuAD 2.0's own evaluation searches the same way), and one
        below the smallest and above the largest margin (answer all, withhold all); ties go
        to the tau nearest 0.
    """
    if not len(rows):
        raise ValueError("best_null_threshold: no QA questions to choose the threshold on; "
                         "give processed QA Docs with their gold answers (SQuAD 2.0 dev data)")
    margins, answered, withheld = _answered_and_withheld(rows)
    finite = np.sort(margins[np.isfinite(margins)])
    candidates = np.unique(np.concatenate([[0.0], (finite[1:] + finite[:-1]) / 2, finite[:1] - 1, finite[-1:] + 1]))
    best = (-1.0, 0.0)
    for tau in candidates:
        f1 = _mean_f1(margins, answered, withheld, tau)
        if f1 > best[0] or (f1 == best[0] and abs(tau) < abs(best[1])):
            best = (f1, float(tau))
    return best[1], best[0]


def _best_scores(guess: str, golds: List[str]) -> Tuple[float, float]:
    return (max(float(_normalise(guess) == _normalise(g)) for g in golds), max(_token_f1(guess, g) for g in golds))


_PUNCTUATION = frozenset(string.punctuation)


def _normalise(text: str) -> str:
    """SQuAD's answer normalisation: lower case, no punctuation, articles or extra spaces."""
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def _token_f1(guess: str, gold: str) -> float:
    g, t = _normalise(guess).split(), _normalise(gold).split()
    if not g or not t:
        return float(g == t)
    common = sum((Counter(g) & Counter(t)).values())
    if not common:
        return 0.0
    precision, recall = common / len(g), common / len(t)
    return 2 * precision * recall / (precision + recall)
