"""Extractive QA data: question + context Docs, SQuAD JSON -> .spacy, and their reader.

A QA Doc is the question's tokens followed by the context's, with the question marked
as `doc.spans["first_segment"]` (so a BERT encoder reads the pair as
[CLS] question [SEP] context [SEP]) and the gold answer as `doc.spans["answer"]` (empty
when the question has none, SQuAD v2). All gold answers, for scoring, are in
`doc.spans["answers"]`.
"""
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc, DocBin
from spacy.training import Corpus, Example
from spacy.util import registry

from ..errors import InputError, input_file
from ..tokenization.words import FIRST_SEGMENT, first_segment_end

ANSWER_KEY = "answer"
ALL_ANSWERS_KEY = "answers"
TEXTS_ATTR = "texts"  # doc.spans[ALL_ANSWERS_KEY].attrs: the answers as the dataset wrote them


def make_qa_doc(nlp: Language, question: str, context: Union[str, Doc]) -> Doc:
    """The Doc `span_qa` answers: the question's tokens, then the context's. A context Doc
    keeps its own tokens (not re-tokenized), so answer offsets map back to it exactly."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"every question must be a non-empty string, got {question!r}")
    if not isinstance(context, (str, Doc)):
        raise ValueError(f"the context must be a string or a Doc, got {type(context).__name__}")
    if not (context if isinstance(context, str) else context.text).strip():
        raise ValueError("The context is empty or whitespace: there is nothing to find an answer in")
    if isinstance(context, str):
        c_doc = nlp.make_doc(context)
    else:
        c_doc = Doc(nlp.vocab, words=[t.text for t in context], spaces=[bool(t.whitespace_) for t in context])
    q_doc = nlp.make_doc(question.strip())
    doc = Doc.from_docs([q_doc, c_doc], ensure_whitespace=True)
    doc.spans[FIRST_SEGMENT] = [doc[: len(q_doc)]]
    return doc


def question_length(doc: Doc) -> int:
    """Number of question tokens at the start of a QA Doc (a clear error if unmarked)."""
    n = first_segment_end(doc)
    if not n:
        raise ValueError(
            f"This Doc has no question: span_qa reads Docs made by make_qa_doc(nlp, question, context), "
            f"whose doc.spans['{FIRST_SEGMENT}'] marks the question"
        )
    return n


@dataclass
class SquadReport:
    """What the conversion did, so nothing is dropped silently."""

    questions: int = 0
    unanswerable: int = 0
    answers: int = 0
    widened: int = 0  # answers whose characters cut a token, widened to whole tokens


def read_squad(
    path: Union[str, Path], nlp: Language, *, articles: Optional[Tuple[int, int]] = None
) -> Tuple[List[Doc], SquadReport]:
    """One QA Doc per question of a SQuAD v1.1/v2.0 JSON file.

    articles: (start, end) slice of the file's articles (split train/dev by article).
    An answer whose text is not at its `answer_start` in the context raises an InputError
    naming it; one whose characters cut a token is widened to whole tokens and counted.
    """
    path = input_file(path)
    try:
        data = json.loads(path.read_text(encoding="utf8"))["data"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise InputError(f"{path}: not SQuAD JSON (a 'data' list of articles): {e}") from None
    if articles is not None:
        data = data[articles[0] : articles[1]]
    report = SquadReport()
    docs = []
    for article in data:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            for qa in paragraph["qas"]:
                try:
                    doc = make_qa_doc(nlp, qa["question"], context)
                except ValueError as e:
                    raise InputError(f"Question {qa.get('id', '?')} of article {article.get('title', '?')!r}: {e}") from None
                offset = len(doc.text) - len(context)  # where the context starts in the Doc
                spans = [_answer_span(doc, offset, a, qa.get("id", ""), report) for a in qa.get("answers", [])]
                if not spans:
                    report.unanswerable += 1
                doc.spans[ANSWER_KEY] = spans[:1]
                doc.spans[ALL_ANSWERS_KEY] = spans
                # The official texts: SQuAD's EM/F1 compare with these, not with a widened span.
                doc.spans[ALL_ANSWERS_KEY].attrs[TEXTS_ATTR] = [a["text"] for a in qa.get("answers", [])]
                report.questions += 1
                report.answers += len(spans)
                docs.append(doc)
    return docs, report


def _answer_span(doc: Doc, offset: int, answer: dict, qid: str, report: SquadReport):
    text, start = answer["text"], answer["answer_start"]
    context = doc.text[offset:]
    if context[start : start + len(text)] != text:
        raise InputError(f"Question {qid}: the answer {text!r} is not at character {start} of its context")
    span = doc.char_span(offset + start, offset + start + len(text.rstrip()), alignment_mode="expand")
    if span is None:
        raise InputError(f"Question {qid}: the answer {text!r} covers no token")
    if span.text != text.strip():
        report.widened += 1
    return span


def write_squad(path: Union[str, Path], output: Union[str, Path], nlp: Language,
                articles: Optional[Tuple[int, int]] = None) -> SquadReport:
    """Convert a SQuAD JSON file into a .spacy file of QA Docs (see `read_squad`); returns what the
    conversion did."""
    docs, report = read_squad(path, nlp, articles=articles)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    DocBin(docs=docs, attrs=["ORTH"]).to_disk(output)
    return report


@registry.readers("spacy-bertfam.QACorpus.v1")
def qa_corpus(path: Path, limit: int = 0, shuffle: bool = False) -> Callable[[Language], Iterable[Example]]:
    """Examples from a .spacy file (or a folder of them) whose QA Docs keep the question mark-up.

    spaCy's own Corpus re-tokenizes the text into a bare Doc, losing
    doc.spans["first_segment"]; here the predicted side of a QA Doc keeps the reference
    tokens and it. Other Docs (NER or textcat examples of a corpus that mixes tasks) are
    read as spaCy's Corpus reads them.
    """
    corpus = Corpus(path, limit=limit, shuffle=shuffle)

    def read(nlp: Language) -> Iterator[Example]:
        for eg in corpus(nlp):
            reference = eg.reference
            if not first_segment_end(reference):
                yield eg
                continue
            predicted = Doc(nlp.vocab, words=[t.text for t in reference],
                            spaces=[bool(t.whitespace_) for t in reference])
            predicted.spans[FIRST_SEGMENT] = [predicted[: question_length(reference)]]
            yield Example(predicted, reference)

    return read


def answer_texts(doc: Doc, keys: Sequence[str] = (ALL_ANSWERS_KEY, ANSWER_KEY)) -> List[str]:
    """The gold answers of a reference QA Doc (all of them when the converter kept them): the
    dataset's own texts where the converter kept them, as SQuAD's scorer reads them (an answer
    that cuts a token, e.g. "school" of "schools", is a widened span but still its text)."""
    for key in keys:
        if key in doc.spans:
            group = doc.spans[key]
            return list(group.attrs[TEXTS_ATTR]) if TEXTS_ATTR in group.attrs else [s.text for s in group]
    return []
