"""What every processed Doc must satisfy, whatever its text."""
import numpy as np
from spacy.language import Language
from spacy.tokens import Doc


def check_doc(doc: Doc, nlp: Language) -> None:
    """One finite vector per token, spans inside the Doc, exclusive categories summing to 1."""
    if nlp.has_pipe("bert_encoder") or nlp.has_pipe("elmo_features") or nlp.has_pipe("gpt_lm"):
        assert doc.tensor.shape[0] == len(doc), (doc.tensor.shape, len(doc))
        assert np.isfinite(doc.tensor).all()
    for ent in doc.ents:
        assert 0 <= ent.start < ent.end <= len(doc)
    if nlp.has_pipe("textcat") and len(doc):  # spaCy's textcat gives an all-empty batch zeros
        assert abs(sum(doc.cats.values()) - 1.0) < 1e-4, doc.cats
    for span in doc.spans.get("answer", []) if doc.spans else []:
        assert 0 <= span.start < span.end <= len(doc)
    if doc.has_extension("perplexity") and doc._.perplexity is not None:
        assert np.isfinite(doc._.perplexity) and np.isfinite(doc._.token_logprobs).all()
