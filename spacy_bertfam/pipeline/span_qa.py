"""`span_qa`: extractive question answering over QA Docs (question + context).

The component reads token vectors through a listener (so it shares the encoder's
forward pass), scores every context token as an answer start and end, and writes the
best span, or none when "no answer" scores higher (SQuAD v2), to `doc.spans["answer"]`,
its probability in `doc.spans["answer"].attrs["score"]`. Question tokens are never
part of an answer: they are masked out of the softmax in training and prediction.
"""
import re
import string
from collections import Counter
from itertools import islice
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.util import registry
from spacy.vocab import Vocab
from thinc.api import Model, chain
from thinc.types import Floats2d

from ..corpora.squad import ANSWER_KEY, answer_texts, question_length
from ..heads.span_logits import build_span_logits
from ..pretrained import packaged_sizes

Answer = Optional[Tuple[int, int, float]]  # (start, end) token span and its probability, or None


@registry.architectures("spacy-bertfam.SpanQA.v1")
def span_qa_v1(tok2vec: Model[List[Doc], List[Floats2d]]) -> Model[List[Doc], List[Floats2d]]:
    """Per doc, (1 + n_tokens, 2) start/end scores; row 0 is "no answer"."""
    model = chain(tok2vec, build_span_logits())
    model.set_ref("tok2vec", tok2vec)
    return model


DEFAULT_MODEL = {
    "@architectures": "spacy-bertfam.SpanQA.v1",
    "tok2vec": {"@architectures": "spacy-bertfam.EncoderListener.v1", "upstream": "*",
                "width": packaged_sizes("all-MiniLM-L6-v2")["hidden_width"]},
}


@Language.factory(
    "span_qa",
    default_config={"model": DEFAULT_MODEL, "spans_key": ANSWER_KEY, "max_answer_tokens": 30,
                    "scorer": {"@scorers": "spacy-bertfam.span_qa_scorer.v1"}},
    default_score_weights={"qa_f1": 1.0, "qa_exact": 0.0},
)
def make_span_qa(nlp: Language, name: str, model: Model, spans_key: str, max_answer_tokens: int,
                 scorer: Optional[Callable]) -> "SpanQA":
    """The `span_qa` factory; its settings are `SpanQA`'s."""
    return SpanQA(nlp.vocab, model, name, spans_key=spans_key, max_answer_tokens=max_answer_tokens, scorer=scorer)


class SpanQA(TrainablePipe):
    """Extractive QA: writes each QA Doc's best context span, or no answer, to doc.spans[spans_key].

    vocab (Vocab): the pipeline's vocab.
    model (Model[List[Doc], List[Floats2d]]): per doc, (1 + n_tokens, 2) start/end scores, row 0
        "no answer" (`spacy-bertfam.SpanQA.v1`).
    name (str): the component name.
    spans_key (str): where the answer is written and the gold answer read; the group's
        attrs["score"] holds the answer's probability (None for no answer).
    max_answer_tokens (int): the longest answer considered, in tokens (>= 1).
    scorer (Optional[Callable]): scores the answers (`spacy-bertfam.span_qa_scorer.v1`).
    """

    def __init__(self, vocab: Vocab, model: Model, name: str = "span_qa", *, spans_key: str = ANSWER_KEY,
                 max_answer_tokens: int = 30, scorer: Optional[Callable] = None):
        if max_answer_tokens < 1:
            raise ValueError(f"max_answer_tokens must be at least 1, got {max_answer_tokens}")
        self.vocab = vocab
        self.model = model
        self.name = name
        self.cfg = {"spans_key": spans_key, "max_answer_tokens": max_answer_tokens}
        self.scorer = scorer

    def predict(self, docs: Iterable[Doc]) -> List[Answer]:
        """Per doc, the best context span (start, end, P(start) * P(end)) of at most max_answer_tokens
        tokens, or None where "no answer" scores at least as high."""
        docs = list(docs)
        scores = self.model.predict(docs)
        return [self._best(doc, self.model.ops.to_numpy(s)) for doc, s in zip(docs, scores)]

    def _best(self, doc: Doc, scores: np.ndarray) -> Answer:
        n, q, longest = len(doc), question_length(doc), self.cfg["max_answer_tokens"]
        start, end = _log_probs(scores, q).T
        # Best end for each start within max_answer_tokens: rows = starts, columns = lengths.
        starts = np.arange(q, n)
        ends = starts[:, None] + np.arange(longest)[None, :]
        valid = ends < n
        total = np.where(valid, start[1 + starts][:, None] + end[1 + np.minimum(ends, n - 1)], -np.inf)
        if not total.size or total.max() <= start[0] + end[0]:
            return None
        s, length = np.unravel_index(int(total.argmax()), total.shape)
        return int(starts[s]), int(starts[s] + length + 1), float(np.exp(total.max()))

    def set_annotations(self, docs: Iterable[Doc], answers: List[Answer]) -> None:
        """Write each answer to doc.spans[spans_key] (empty for none) and its probability to the
        group's attrs["score"]."""
        key = self.cfg["spans_key"]
        for doc, answer in zip(docs, answers):
            doc.spans[key] = [] if answer is None else [doc[answer[0] : answer[1]]]
            doc.spans[key].attrs["score"] = None if answer is None else answer[2]

    def get_loss(self, examples: Iterable[Example], scores: List[Floats2d]) -> Tuple[float, List[Floats2d]]:
        """Cross-entropy of the gold start and end (row 0 when there is no answer)."""
        validate_examples(examples, "SpanQA.get_loss")
        examples = list(examples)
        loss, grads = 0.0, []
        for eg, s in zip(examples, scores):
            s = self.model.ops.to_numpy(s)
            gold = self._gold_rows(eg)
            log_probs = _log_probs(s, question_length(eg.predicted))
            loss -= float(log_probs[gold, [0, 1]].sum())
            d = np.exp(log_probs)
            d[gold, [0, 1]] -= 1.0
            grads.append(self.model.ops.asarray2f(d / len(examples)))
        return loss / len(examples), grads

    def _gold_rows(self, eg: Example) -> List[int]:
        key = self.cfg["spans_key"]
        if key not in eg.reference.spans:
            raise ValueError(f"A training example has no doc.spans['{key}'] (the gold answer; empty for none)")
        spans = eg.get_aligned_spans_y2x(eg.reference.spans[key], allow_overlap=True)
        if len(eg.reference.spans[key]) and not spans:
            raise ValueError(f"The gold answer {eg.reference.spans[key][0].text!r} does not align to the "
                             "predicted Doc's tokens")
        if not spans:
            return [0, 0]
        if spans[0].start < question_length(eg.predicted):
            raise ValueError(f"The gold answer {spans[0].text!r} lies in the question, not the context")
        return [spans[0].start + 1, spans[0].end]

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp: Optional[Language] = None) -> None:
        """Initialise the model on up to 10 examples' predicted Docs (the head infers its input width)."""
        validate_get_examples(get_examples, "SpanQA.initialize")
        docs = [eg.predicted for eg in islice(get_examples(), 10)]
        self.model.initialize(X=docs)


def _log_probs(scores: np.ndarray, n_question: int) -> np.ndarray:
    """Log-softmax of the start and end columns over "no answer" and the context tokens:
    the question's token rows (1..n_question) get probability 0."""
    x = scores.astype(np.float64, copy=True)
    x[1 : 1 + n_question] = -np.inf
    x -= x.max(axis=0)
    return x - np.log(np.exp(x).sum(axis=0))


@registry.scorers("spacy-bertfam.span_qa_scorer.v1")
def make_span_qa_scorer(spans_key: str = ANSWER_KEY) -> Callable:
    """`spacy-bertfam.span_qa_scorer.v1`: SQuAD exact match and token F1 (qa_exact, qa_f1), see
    `score_answers`.

    spans_key (str): the doc.spans key of the predicted answer; gold answers are read from the
        reference's doc.spans["answers"], else ["answer"].
    """
    def score(examples: Iterable[Example], **kwargs) -> Dict[str, float]:
        return score_answers(examples, spans_key=spans_key)

    return score


def score_answers(examples: Iterable[Example], *, spans_key: str = ANSWER_KEY) -> Dict[str, float]:
    """SQuAD's exact match and token F1, each the best over a question's gold answers
    (an unanswerable question scores 1 only when no answer is given)."""
    exact, f1 = [], []
    for eg in examples:
        predicted = eg.predicted.spans.get(spans_key) if eg.predicted.spans else None
        guess = predicted[0].text if predicted else ""
        golds = answer_texts(eg.reference) or [""]
        exact.append(max(float(_normalise(guess) == _normalise(g)) for g in golds))
        f1.append(max(_token_f1(guess, g) for g in golds))
    if not exact:
        return {"qa_exact": None, "qa_f1": None}
    return {"qa_exact": float(np.mean(exact)), "qa_f1": float(np.mean(f1))}


def _normalise(text: str) -> str:
    """SQuAD's answer normalisation: lower case, no punctuation, articles or extra spaces."""
    text = "".join(c for c in text.lower() if c not in set(string.punctuation))
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
