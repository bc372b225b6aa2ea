"""A short demo: MiniLM weights in our BERT, contextual similarities in a spaCy pipeline."""
from typing import List

import spacy

from .loaders import pretrained_loader

SENTENCES = [
    "A man is playing a guitar on stage.",
    "Someone performs music with a guitar.",
    "The stock market fell sharply on Monday.",
    "Shares dropped as investors sold their holdings.",
    "A cat is sleeping on the sofa.",
]

BANK = ["She sat on the bank of the river.", "He deposited cash at the bank.",
        "The bank raised its interest rates."]


def build_pipeline() -> spacy.language.Language:
    """A blank English pipeline whose `bert_encoder` holds the packaged all-MiniLM-L6-v2 weights
    (they must be installed)."""
    nlp = spacy.blank("en")
    encoder = nlp.add_pipe("bert_encoder")
    encoder.initialize(lambda: [], nlp=nlp, encoder_loader=pretrained_loader("all-MiniLM-L6-v2"))
    return nlp


def run(sentences: List[str] = SENTENCES) -> str:
    """Return the demo's report: sentence similarities, then 'bank' in three contexts."""
    nlp = build_pipeline()
    docs = list(nlp.pipe(sentences))
    lines = ["Sentence similarity (cosine of mean token vectors, top layer):"]
    for i, s in enumerate(sentences):
        lines.append(f"  [{i}] {s}")
    lines.append("      " + "".join(f"[{j}]   " for j in range(len(docs))))
    for i, doc in enumerate(docs):  # .similarity: cosine of the contextual vectors (pipeline/hooks.py)
        lines.append(f"  [{i}] " + " ".join(f"{doc.similarity(other):.2f} " for other in docs))
    bank_docs = list(nlp.pipe(BANK))
    bank = [next(t for t in doc if t.lower_ == "bank") for doc in bank_docs]
    lines.append("\nThe word 'bank' in context (cosine between its token vectors):")
    for i in range(len(BANK)):
        for j in range(i + 1, len(BANK)):
            lines.append(f"  {bank[i].similarity(bank[j]):.2f}  {BANK[i]!r} vs {BANK[j]!r}")
    return "\n".join(lines)
