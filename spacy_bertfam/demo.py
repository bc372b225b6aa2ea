"""`python -m spacy_bertfam demo [MODEL]`: what en_bertfam does with a sample text.

One `nlp(text)` gives the entities and the categories (one encoder pass for both);
`ask` answers questions about the same Doc with Spans of it.
"""
from typing import Sequence

import spacy

from .pipeline.questions import ask

TEXT = ("I moved from Chicago to Berlin last month and my new Revolut card still hasn't arrived. "
        "Can you tell me when it will be delivered?")
QUESTIONS = ("Where did I move to?", "What has not arrived?")


def run(model: str = "en_bertfam", text: str = TEXT, questions: Sequence[str] = QUESTIONS) -> str:
    """The report of `model` (a package name or a pipeline folder) on `text`."""
    nlp = spacy.load(model)
    doc = nlp(text)
    lines = [f"{model} ({', '.join(nlp.pipe_names)}) on:", f"  {text}", "", "Entities:"]
    lines += [f"  {ent.text!r} {ent.label_}" for ent in doc.ents] or ["  (none)"]
    if doc.cats:
        lines.append("Top categories:")
        for label, p in sorted(doc.cats.items(), key=lambda item: -item[1])[:3]:
            lines.append(f"  {p:.3f} {label}")
    if "span_qa" in nlp.pipe_names:
        lines.append("Answers (Spans of the same Doc):")
        for answer in ask(nlp, doc, questions):
            found = f"{answer.span.text!r} (p={answer.score:.3f})" if answer.span is not None else "no answer"
            lines.append(f"  {answer.question} -> {found}")
    return "\n".join(lines)
