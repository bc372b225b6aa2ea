"""Questions about any Doc: `ask(nlp, doc, questions)` answers with Spans of that Doc.

Why a function over the pipeline rather than a Doc attribute read by `span_qa`: the
question must be encoded *with* the context ([CLS] question [SEP] context [SEP]), so each
question needs its own pass of the shared encoder over a QA Doc; the asked Doc keeps its
own single pass, its entities and categories. The QA Docs are built from the asked Doc's
own tokens (not re-tokenized text), so answer offsets map back to it exactly; long Docs
are windowed with the question in every window, never truncated.
"""
from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple

from spacy.language import Language
from spacy.tokens import Doc, Span

from ..corpora.squad import make_qa_doc
from ..tokenization.words import FIRST_SEGMENT
from .listener import EncoderListener

ANSWERS_KEY = "answers"


@dataclass
class Answer:
    """The answer to one question: a Span of the asked Doc (None: no answer) and its probability."""

    question: str
    span: Optional[Span]
    score: Optional[float]


def ask(nlp: Language, doc: Doc, questions: Sequence[str], *, component: str = "span_qa",
        spans_key: str = ANSWERS_KEY, batch_size: int = 32) -> List[Answer]:
    """Answer `questions` about `doc` with the pipeline's `component` (a span_qa).

    The answered Spans are also written to doc.spans[spans_key] (label: the question; the
    group's attrs["questions"] and ["scores"] align with its spans; questions without an answer
    are in the returned list only), where displaCy's "span" style renders them. The group is
    replaced at each call, so it shows the last call's answers; nothing else on the Doc changes.
    """
    return ask_all(nlp, [(doc, questions)], component=component, spans_key=spans_key, batch_size=batch_size)[0]


def ask_all(nlp: Language, asks: Iterable[Tuple[Doc, Sequence[str]]], *, component: str = "span_qa",
            spans_key: str = ANSWERS_KEY, batch_size: int = 32) -> List[List[Answer]]:
    """`ask` for several Docs at once; all questions go through `nlp.pipe` in batches."""
    asks = list(asks)
    for doc, questions in asks:
        if isinstance(questions, str):  # a string is a sequence too: it would be asked letter by letter
            raise TypeError(f"ask(): give a Doc and a list of questions, e.g. ask(nlp, doc, [{questions!r}])")
        if not isinstance(doc, Doc):
            raise TypeError(f"ask(): the Doc to ask about must be a spaCy Doc, got {type(doc).__name__}")
    asks = [(doc, list(questions)) for doc, questions in asks]
    qa = nlp.get_pipe(component)
    qa_docs, owners = [], []
    for d, (doc, questions) in enumerate(asks):
        if not doc.text.strip():
            raise ValueError("ask(): the Doc is empty or whitespace: there is nothing to find an answer in")
        for question in questions:
            qa_docs.append(make_qa_doc(nlp, question, doc))
            owners.append((d, question))
    tok2vec = qa.model.get_ref("tok2vec") if qa.model.has_ref("tok2vec") else None
    needed = [component]
    if isinstance(tok2vec, EncoderListener):  # the encoder it listens to runs on the QA Docs too
        if tok2vec.linked_encoder is None:
            raise ValueError(f"ask(): {component}'s listener has no encoder to listen to; add the encoder "
                             f"component (e.g. bert_encoder) before {component}, then initialize the pipeline")
        needed.insert(0, tok2vec.linked_encoder)
    with nlp.select_pipes(enable=needed):
        processed = list(nlp.pipe(qa_docs, batch_size=batch_size))
    answers: List[List[Answer]] = [[] for _ in asks]
    key = qa.cfg["spans_key"]
    for qa_doc, (d, question) in zip(processed, owners):
        n_question = len(qa_doc.spans[FIRST_SEGMENT][0])
        group = qa_doc.spans[key]
        span = asks[d][0][group[0].start - n_question : group[0].end - n_question] if len(group) else None
        answers[d].append(Answer(question, span, group.attrs["score"]))
    for (doc, _), doc_answers in zip(asks, answers):
        found = [a for a in doc_answers if a.span is not None]
        doc.spans[spans_key] = [Span(doc, a.span.start, a.span.end, label=a.question) for a in found]
        doc.spans[spans_key].attrs.update(questions=[a.question for a in found], scores=[a.score for a in found])
    return answers
