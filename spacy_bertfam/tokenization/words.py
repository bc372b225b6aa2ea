"""What a piece tokenizer sees of a Doc: each token's text, and a sentence pair's first segment.

Sentence pairs: a Doc whose `doc.spans[FIRST_SEGMENT]` holds one span starting at its
first token is a pair, that span being segment A (e.g. a question) and the rest B (its
context); families with a separator encode it as BERT does, [CLS] A [SEP] B [SEP].
"""
from typing import List

from spacy.tokens import Doc

FIRST_SEGMENT = "first_segment"
WORD_MODES = ("text", "space_before")


def token_words(doc: Doc, mode: str) -> List[str]:
    """Each token as the tokenizer sees it.

    mode: "text" (the token's text), or "space_before" (the whitespace before the token,
        then its text, so that byte-level BPE sees " world" as GPT-2 does in running text;
        a pair's second segment starts a sequence of its own, so its first token has none).
        A whitespace token (spaCy's for "  " or "\n\n") hands its last character to the
        word after it, as GPT-2's pre-tokenizer does: "Hello  world" is "Hello", " ",
        " world" and "a\n\nb" is "a", "\n", "\nb" (pieces "Ċ", "b"), as in running text.
    """
    if mode == "text":
        return [t.text for t in doc]
    if mode != "space_before":
        raise ValueError(f"Unknown word mode '{mode}'; expected one of {WORD_MODES}")
    # The whitespace before each token is the previous token's trailing whitespace.
    starts = {0, first_segment_end(doc)}
    words = [("" if t.i in starts else doc[t.i - 1].whitespace_) + t.text for t in doc]
    for t in doc:
        before = t.i - 1
        if t.i not in starts and not t.is_space and doc[before].is_space and not doc[before].whitespace_:
            words[t.i] = words[before][-1] + words[t.i]
            words[before] = words[before][:-1]
    return words


def first_segment_end(doc: Doc) -> int:
    """Tokens in the Doc's first segment; 0 for a Doc that is not a sentence pair."""
    group = doc.spans.get(FIRST_SEGMENT) if doc.spans else None
    if not group:
        return 0
    if len(group) != 1 or group[0].start != 0 or group[0].end >= len(doc):
        raise ValueError(
            f"doc.spans['{FIRST_SEGMENT}'] must hold one span that starts at the first token and "
            f"leaves tokens after it (the second segment); got {[(s.start, s.end) for s in group]} "
            f"in a Doc of {len(doc)} tokens"
        )
    return group[0].end
