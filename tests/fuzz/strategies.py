"""Awkward text for every component: the strategies the suite and bench/fuzz.py share."""
from hypothesis import strategies as st

# The cases the issue names, each a text.
SPECIAL = {
    "empty": "",
    "whitespace": " \t\n  \u3000 ",
    "token_10k": "a" * 10_000,
    "token_100k": "x" * 100_000,
    "control": "a\x00b\x07c\x1b[31m d\x7f e\u0085 f",
    "zero_width_bidi": "a\u200bb\u200c\u200dc \u202eabc\u202c \u2066d\u2069 \ufeffe",
    "combining": "e\u0301\u0301\u0301 a\u0308\u0323 " + "o" + "\u0300" * 50,
    "emoji": "I \u2764\ufe0f \U0001f1e9\U0001f1ea \U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f44d\U0001f3fd!",
    "cjk": "\u6771\u4eac\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059\u3002 \ud55c\uad6d\uc5b4 \u4e2d\u6587",
    "mixed_scripts": ("Moscow \u041c\u043e\u0441\u043a\u0432\u0430 \u0627\u0644\u0642\u0627\u0647\u0631\u0629 "
                      "\u05ea\u05dc \u05d0\u05d1\u05d9\u05d1 \u0928\u0908 \u0926\u093f\u0932\u094d\u0932\u0940"),
}
LONG_DOC = "the cat sat on the mat . " * 14_286  # 100,002 tokens

_ALPHABET = st.characters(codec="utf-8", exclude_categories=("Cs",))
# Fragments that stress tokenizers and alignment, glued to random text.
_FRAGMENTS = st.sampled_from([v for k, v in SPECIAL.items() if k not in ("token_10k", "token_100k")]
                             + ["https://a.b/" + "a/" * 30, "\u0301", "\n\n", "Dr.", "U.S.A.", "-", "'s"])
texts = st.one_of(
    st.text(_ALPHABET, max_size=80),
    st.lists(st.one_of(_FRAGMENTS, st.text(_ALPHABET, max_size=12)), max_size=8).map(" ".join),
)
# A batch: some texts, empty ones among them.
batches = st.lists(st.one_of(texts, st.just("")), min_size=1, max_size=6)
