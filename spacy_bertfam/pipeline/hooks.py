"""spaCy user hooks that make token/span/doc `.vector` and `.similarity` use doc.tensor."""
from spacy.tokens import Doc


def _cosine(a, b) -> float:
    """Cosine similarity of two vectors (NumPy or CuPy: no NumPy-only calls)."""
    norm = float(((a * a).sum() * (b * b).sum()) ** 0.5)
    return float((a * b).sum()) / norm if norm else 0.0


def _doc_vector(doc):
    return doc.tensor.mean(axis=0) if len(doc) else doc.tensor.sum(axis=0)


def _span_vector(span):
    return span.doc.tensor[span.start : span.end].mean(axis=0)


def _token_vector(token):
    return token.doc.tensor[token.i]


def _similarity(vector):
    return lambda a, b: _cosine(vector(a), b.vector)


def install_vector_hooks(doc: Doc) -> None:
    """Route `.vector`, `.has_vector` and `.similarity` of the doc, its spans and tokens
    through the contextual vectors in `doc.tensor`."""
    doc.user_hooks["vector"] = _doc_vector
    doc.user_hooks["has_vector"] = lambda d: True
    doc.user_hooks["similarity"] = _similarity(_doc_vector)
    doc.user_span_hooks["vector"] = _span_vector
    doc.user_span_hooks["has_vector"] = lambda s: True
    doc.user_span_hooks["similarity"] = _similarity(_span_vector)
    doc.user_token_hooks["vector"] = _token_vector
    doc.user_token_hooks["has_vector"] = lambda t: True
    doc.user_token_hooks["similarity"] = _similarity(_token_vector)
