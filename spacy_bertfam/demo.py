"""`python -m spacy_bertfam demo [MODEL] [--html FILE]`: what en_bertfam does with a sample text.

One `nlp(text)` gives the entities and the categories (one encoder pass for both);
`ask` answers questions about the same Doc with Spans of it. `--html` also writes
displaCy's rendering of that Doc's entities and answers.
"""
from pathlib import Path
from typing import Optional, Sequence

import spacy
from spacy import displacy

from .errors import InputError
from .pipeline.questions import ask

TEXT = ("I moved from Chicago to Berlin last month and my new Revolut card still hasn't arrived. "
        "Can you tell me when it will be delivered?")
QUESTIONS = ("Where did I move to?", "What has not arrived?")


def run(model: str = "en_bertfam", text: str = TEXT, questions: Sequence[str] = QUESTIONS,
        html: Optional[Path] = None) -> str:
    """The report of `model` (a package name or a pipeline folder) on `text`; with `html`, the
    Doc's entities and answers rendered by displaCy into that file."""
    if not spacy.util.is_package(model) and not Path(model).is_dir():
        raise InputError(f"No pipeline {model!r}: neither an installed package nor a folder. "
                         + ("Build and install en_bertfam with `python -m spacy project run all` and "
                            "`python -m spacy project run install`, or give a pipeline folder "
                            "(e.g. training/joint/model-last)" if model == "en_bertfam"
                            else "Give a pipeline folder or the name of an installed pipeline package"))
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
    if html is not None:
        parts = [displacy.render(doc, style="ent", page=False)]
        if "answers" in doc.spans:
            parts.append(displacy.render(doc, style="span", options={"spans_key": "answers"}, page=False))
        Path(html).parent.mkdir(parents=True, exist_ok=True)
        Path(html).write_text(f"<html><body><h3>{model}: entities</h3>{parts[0]}<h3>answers</h3>"
                              f"{''.join(parts[1:])}</body></html>", encoding="utf8")
        lines.append(f"displaCy rendering: {html}")
    return "\n".join(lines)
