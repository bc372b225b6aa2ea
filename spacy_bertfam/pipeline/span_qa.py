"""`span_qa`: extractive question answering over QA Docs (question + context).

The component reads token vectors through a listener (so it shares the encoder's
forward pass), scores every context token as an answer start and end, and writes the
best span, or none when "no answer" scores higher by `null_threshold` (SQuAD v2; the
BERT paper's tau, chosen on dev data with `tune_null_threshold`), to
`doc.spans["answer"]`; the group's attrs hold its probability ("score"), the best span
even when withheld ("best") and its log-score margin over "no answer" ("margin").
Question tokens are never part of an answer: they are masked out of the softmax in
training and prediction.

"No answer" is learned one of two ways (`no_answer`). "span_softmax" is BERT's: row 0
competes with the context tokens in the start and end softmaxes, and is the gold start
and end of an unanswerable question. "classifier" makes it a separate yes/no decision:
row 0's first column is the logit of "the context answers it", trained on every
question, while the span softmaxes (over context tokens only) learn from answerable
questions alone. On SQuAD 2.0 with a small budget the first taught the spans almost
nothing, since each unanswerable question pushes down the plausible span its question
was written around (bench/results/qa.md).

Docs without a question (ordinary Docs that other components process in the same
pipeline) are left alone, and are missing data in training.
Questions about an ordinary Doc: `spacy_bertfam.ask` (pipeline/questions.py).
"""
from dataclasses import dataclass
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

from ..corpora.squad import ANSWER_KEY, question_length
from ..errors import ConfigError
from ..heads.bi_attention import build_bi_attention
from ..heads.span_logits import build_span_logits
from ..pretrained import packaged_sizes
from ..tokenization.words import first_segment_end
from .qa_scoring import best_null_threshold, threshold_rows

NO_ANSWER_MODES = ("span_softmax", "classifier")


@dataclass
class Prediction:
    """span_qa's reading of one QA Doc.

    best: the best context span (start, end) in tokens of the QA Doc, of at most
        max_answer_tokens tokens.
    score: its probability, P(start) · P(end) (times P(answerable) with the classifier).
    margin: its log-score minus that of "no answer"; it is the answer when margin > tau.
    """

    best: Optional[Tuple[int, int]]
    score: float
    margin: float


@registry.architectures("spacy-bertfam.SpanQA.v1")
def span_qa_v1(tok2vec: Model[List[Doc], List[Floats2d]]) -> Model[List[Doc], List[Floats2d]]:
    """Per doc, (1 + n_tokens, 2) start/end scores; row 0 is "no answer"."""
    model = chain(tok2vec, build_span_logits())
    model.set_ref("tok2vec", tok2vec)
    return model


@registry.architectures("spacy-bertfam.BiAttentionQA.v1")
def bi_attention_qa_v1(tok2vec: Model[List[Doc], List[Floats2d]], hidden_width: int = 128,
                       dropout: float = 0.1) -> Model[List[Doc], List[Floats2d]]:
    """BiDAF's bi-attention head (Seo et al. 2017; the ELMo paper's SQuAD model) over the
    listener's token vectors of a QA Doc, whose question the encoder reads as its own
    sequence where the family has no separator (ELMo, GPT); same scores as SpanQA.v1.

    hidden_width: each direction of the modelling LSTMs; dropout: on their inputs.
    """
    head = build_bi_attention(tok2vec.get_dim("nO"), hidden_width, dropout)
    model = Model("bi_attention_qa", _bi_attention_forward, init=_bi_attention_init, layers=[tok2vec, head])
    model.set_ref("tok2vec", tok2vec)
    return model


def _bi_attention_init(model: Model, X: Optional[List[Doc]] = None, Y=None) -> None:
    model.layers[0].initialize(X=X)


def _bi_attention_forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    tok2vec, head = model.layers
    X, bp_X = tok2vec(docs, is_train)
    scores, bp_scores = head((X, [first_segment_end(doc) for doc in docs]), is_train)
    return scores, lambda d_scores: bp_X(bp_scores(d_scores))


DEFAULT_MODEL = {
    "@architectures": "spacy-bertfam.SpanQA.v1",
    "tok2vec": {"@architectures": "spacy-bertfam.EncoderListener.v1", "upstream": "*",
                "width": packaged_sizes("all-MiniLM-L6-v2")["hidden_width"]},
}


@Language.factory(
    "span_qa",
    default_config={"model": DEFAULT_MODEL, "spans_key": ANSWER_KEY, "max_answer_tokens": 30,
                    "null_threshold": 0.0, "no_answer": "span_softmax",
                    "scorer": {"@scorers": "spacy-bertfam.span_qa_scorer.v1"}},
    default_score_weights={"qa_f1": 1.0, "qa_exact": 0.0},
)
def make_span_qa(nlp: Language, name: str, model: Model, spans_key: str, max_answer_tokens: int,
                 null_threshold: float, no_answer: str, scorer: Optional[Callable]) -> "SpanQA":
    """The `span_qa` factory; its settings are `SpanQA`'s."""
    return SpanQA(nlp.vocab, model, name, spans_key=spans_key, max_answer_tokens=max_answer_tokens,
                  null_threshold=null_threshold, no_answer=no_answer, scorer=scorer)


class SpanQA(TrainablePipe):
    """Extractive QA: writes each QA Doc's best context span, or no answer, to doc.spans[spans_key].

    vocab (Vocab): the pipeline's vocab.
    model (Model[List[Doc], List[Floats2d]]): per doc, (1 + n_tokens, 2) start/end scores, row 0
        "no answer" (`spacy-bertfam.SpanQA.v1`, the cross-encoder head, or
        `spacy-bertfam.BiAttentionQA.v1`).
    name (str): the component name.
    spans_key (str): where the answer is written and the gold answer read; the group's
        attrs["score"] holds the answer's probability (None for no answer).
    max_answer_tokens (int): the longest answer considered, in tokens (>= 1).
    null_threshold (float): tau: the best span is the answer only when its log-score beats
        "no answer" by more than tau (0 = the plain comparison); `tune_null_threshold` sets
        it from dev data, and it is saved with the pipeline.
    no_answer (str): how "no answer" is learned and scored: "span_softmax" (BERT's: a row of
        the span softmaxes) or "classifier" (a separate answerable/unanswerable logit; the
        spans learn from answerable questions only). See the module docstring.
    scorer (Optional[Callable]): scores the answers (`spacy-bertfam.span_qa_scorer.v1`).
    """

    def __init__(self, vocab: Vocab, model: Model, name: str = "span_qa", *, spans_key: str = ANSWER_KEY,
                 max_answer_tokens: int = 30, null_threshold: float = 0.0, no_answer: str = "span_softmax",
                 scorer: Optional[Callable] = None):
        if max_answer_tokens < 1:
            raise ConfigError(f"max_answer_tokens must be at least 1, got {max_answer_tokens}")
        if no_answer not in NO_ANSWER_MODES:
            raise ConfigError(f"no_answer must be one of {', '.join(map(repr, NO_ANSWER_MODES))}, got {no_answer!r}")
        self.vocab = vocab
        self.model = model
        self.name = name
        self.cfg = {"spans_key": spans_key, "max_answer_tokens": max_answer_tokens,
                    "null_threshold": float(null_threshold), "no_answer": no_answer}
        self.scorer = scorer

    def predict(self, docs: Iterable[Doc]) -> List[Optional[Prediction]]:
        """Per doc, its `Prediction`; None for a Doc without a question."""
        docs = list(docs)
        scores = self.model.predict(docs)
        return [self._best(doc, self.model.ops.to_numpy(s)) if first_segment_end(doc) else None
                for doc, s in zip(docs, scores)]

    def _best(self, doc: Doc, scores: np.ndarray) -> Prediction:
        n, q, longest = len(doc), question_length(doc), self.cfg["max_answer_tokens"]
        if n <= q:  # no context tokens
            return Prediction(None, 0.0, -np.inf)
        if not np.isfinite(scores).all():  # would read as "no answer" without a word
            raise ValueError(
                f"span_qa: the model's scores for the question '{doc[:q].text}' are not finite "
                "(NaN or infinity): its weights are damaged or its training diverged. Load "
                "another checkpoint, or train again with a lower learning rate."
            )
        classifier = self.cfg["no_answer"] == "classifier"
        start, end = _log_probs(scores, q, with_null=not classifier).T
        # Best end for each start within max_answer_tokens: rows = starts, columns = lengths.
        starts = np.arange(q, n)
        ends = starts[:, None] + np.arange(longest)[None, :]
        valid = ends < n
        total = np.where(valid, start[1 + starts][:, None] + end[1 + np.minimum(ends, n - 1)], -np.inf)
        s, length = np.unravel_index(int(total.argmax()), total.shape)
        best = (int(starts[s]), int(starts[s] + length + 1))
        if classifier:  # log P(span | answerable) + log-odds of answerable
            answerable = float(scores[0, 0])
            return Prediction(best, float(np.exp(total.max()) * _sigmoid(answerable)),
                              float(total.max() + answerable))
        return Prediction(best, float(np.exp(total.max())), float(total.max() - (start[0] + end[0])))

    def answer(self, prediction: Prediction) -> Optional[Tuple[int, int]]:
        """The answer span of a prediction under the current null_threshold, or None."""
        if prediction.best is None or prediction.margin <= self.cfg["null_threshold"]:
            return None
        return prediction.best

    def set_annotations(self, docs: Iterable[Doc], predictions: List[Optional[Prediction]]) -> None:
        """Write each QA Doc's answer to doc.spans[spans_key] (empty for none); the group's attrs
        get "score" (the answer's probability, None for none), "best" and "margin"."""
        key = self.cfg["spans_key"]
        for doc, prediction in zip(docs, predictions):
            if prediction is None:  # not a QA Doc
                continue
            answer = self.answer(prediction)
            doc.spans[key] = [] if answer is None else [doc[answer[0] : answer[1]]]
            doc.spans[key].attrs.update(score=None if answer is None else prediction.score,
                                        best=prediction.best, margin=prediction.margin)

    def tune_null_threshold(self, docs: Iterable[Doc], golds: Iterable[Doc]) -> Dict[str, float]:
        """Choose tau on processed dev QA Docs (with their gold Docs): the threshold with the best
        SQuAD F1, as the BERT paper does for SQuAD 2.0; it is set and returned with that F1.
        It lives in the component's cfg (cfg.json when saved, which spaCy reads after the
        config when loading); `evaluate-qa --tune-threshold` writes it into the config too."""
        tau, f1 = best_null_threshold(threshold_rows(docs, golds, self.cfg["spans_key"]))
        self.cfg["null_threshold"] = tau
        return {"null_threshold": tau, "qa_f1": f1}

    def get_loss(self, examples: Iterable[Example], scores: List[Floats2d]) -> Tuple[float, List[Floats2d]]:
        """Cross-entropy of the gold start and end (row 0 when there is no answer; with the
        classifier, the spans of answerable questions plus the answerable/unanswerable
        logistic loss), averaged over the batch's QA examples; examples without a question
        get no gradient."""
        examples = list(examples)
        validate_examples(examples, "SpanQA.get_loss")
        n_qa = max(1, sum(1 for eg in examples if first_segment_end(eg.predicted)))
        loss, grads = 0.0, []
        for eg, s in zip(examples, scores):
            if not first_segment_end(eg.predicted):  # no question: not a QA example, missing data
                grads.append(self.model.ops.alloc2f(*s.shape))
                continue
            s = self.model.ops.to_numpy(s)
            gold = self._gold_rows(eg)
            example_loss, d = _LOSSES[self.cfg["no_answer"]](s, gold, question_length(eg.predicted))
            loss += example_loss
            grads.append(self.model.ops.asarray2f(d / n_qa))
        return loss / n_qa, grads

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
        if nlp is not None:
            self._check_encoding(nlp)
        docs = [eg.predicted for eg in islice(get_examples(), 10)]
        self.model.initialize(X=docs)

    def _check_encoding(self, nlp: Language) -> None:
        """SpanQA.v1 reads context vectors that saw the question (BERT's pair encoding); an
        encoder without a separator reads the two apart, and that head would answer blind."""
        listener = self.model.get_ref("tok2vec") if self.model.has_ref("tok2vec") else None
        upstream = getattr(listener, "linked_encoder", None)
        if upstream is None or not any(node.name == "span_logits" for node in self.model.walk()):
            return
        contract = nlp.get_pipe(upstream).contract
        if not contract.pairs:
            raise ConfigError(
                f"{self.name}: spacy-bertfam.SpanQA.v1 scores context tokens that were encoded together with "
                f"the question ([CLS] question [SEP] context [SEP]), but the {contract.family} encoder "
                f"'{upstream}' has no separator and encodes them apart. Use "
                f"spacy-bertfam.BiAttentionQA.v1, which attends from the context to the question "
                f"(configs/qa_{contract.family}.cfg)."
            )


def _span_softmax_loss(scores: np.ndarray, gold: List[int], n_question: int) -> Tuple[float, np.ndarray]:
    """BERT's loss of one question and its gradient: the start and end cross-entropy over
    "no answer" and the context tokens."""
    log_probs = _log_probs(scores, n_question)
    d = np.exp(log_probs)
    d[gold, [0, 1]] -= 1.0
    return -float(log_probs[gold, [0, 1]].sum()), d


def _classifier_loss(scores: np.ndarray, gold: List[int], n_question: int) -> Tuple[float, np.ndarray]:
    """The "classifier" loss of one question and its gradient: logistic loss of row 0's
    answerable logit, plus, when answerable, the start and end cross-entropy over the
    context tokens."""
    answerable = gold != [0, 0]
    logit = float(scores[0, 0])
    p = _sigmoid(logit)
    loss = float(np.logaddexp(0.0, -logit) if answerable else np.logaddexp(0.0, logit))
    d = np.zeros(scores.shape, dtype=np.float64)
    if answerable:
        log_probs = _log_probs(scores, n_question, with_null=False)
        loss -= float(log_probs[gold, [0, 1]].sum())
        d = np.exp(log_probs)
        d[gold, [0, 1]] -= 1.0
    d[0] = [p - float(answerable), 0.0]
    return loss, d


_LOSSES = {"span_softmax": _span_softmax_loss, "classifier": _classifier_loss}


def _sigmoid(x: float) -> float:
    """The logistic function, without overflow for logits far below 0."""
    return float(np.exp(-np.logaddexp(0.0, -x)))


def _log_probs(scores: np.ndarray, n_question: int, with_null: bool = True) -> np.ndarray:
    """Log-softmax of the start and end columns over the context tokens, and "no answer"
    (row 0) unless `with_null` is False: the question's token rows (1..n_question) get
    probability 0."""
    x = scores.astype(np.float64, copy=True)
    x[1 : 1 + n_question] = -np.inf
    if not with_null:
        x[0] = -np.inf
    x -= x.max(axis=0)
    return x - np.log(np.exp(x).sum(axis=0))
