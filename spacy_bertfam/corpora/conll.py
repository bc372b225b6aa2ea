"""CoNLL-style NER files: one `token<TAB or space>tag` a line, sentences apart.

Written because `spacy convert -c ner` does not treat a line holding only a tab as
a sentence break: in WNUT-17 most breaks are such lines, and it silently glues
tweets together. Here any blank or whitespace-only line ends a sentence, and
`-DOCSTART-` lines are skipped. IOB1 tags (an I- opening an entity, as in
wikigold) are read as BIO, and how many entities an I- opened is counted, so that a
converter can say so (in a BIO file they are tagging errors worth knowing about).
"""
from pathlib import Path
from typing import Iterator, List, NamedTuple, Tuple, Union

from spacy.tokens import Doc
from spacy.vocab import Vocab

from ..errors import InputError, input_file


def _sentences(path: Path) -> Iterator[List[Tuple[str, str, int]]]:
    sentence: List[Tuple[str, str, int]] = []
    with path.open(encoding="utf8") as f:
        for number, line in enumerate(f, start=1):
            stripped = line.strip()
            if not stripped:
                if sentence:
                    yield sentence
                sentence = []
                continue
            if stripped.startswith("-DOCSTART-"):
                continue
            parts = stripped.split()
            if len(parts) < 2:
                raise InputError(f"{path}:{number}: expected 'token tag', found {line.rstrip()!r}")
            sentence.append((parts[0], parts[-1], number))
    if sentence:
        yield sentence


class ConllNer(NamedTuple):
    docs: List[Doc]
    opened_by_i: int  # entities whose first tag was I- (IOB1), read as B-


def _bio(tags: List[str], path: Path, numbers: List[int]) -> Tuple[List[str], int]:
    """Turn IOB1 into BIO: an I- tag that does not continue its type becomes B-
    (returned with how many did)."""
    out, opened = [], 0
    previous = "O"
    for tag, number in zip(tags, numbers):
        if tag != "O" and not tag.startswith(("B-", "I-")):
            raise InputError(f"{path}:{number}: tag {tag!r} is not O, B-TYPE or I-TYPE")
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            tag = "B-" + tag[2:]
            opened += 1
        out.append(tag)
        previous = tag
    return out, opened


def read_conll(path: Union[str, Path], vocab: Vocab) -> ConllNer:
    """One Doc per sentence, entities set from the tags, and the count of I- openings."""
    path = input_file(path)
    docs, opened_by_i = [], 0
    for sentence in _sentences(path):
        words = [w for w, _, _ in sentence]
        numbers = [n for _, _, n in sentence]
        tags, opened = _bio([t for _, t, _ in sentence], path, numbers)
        opened_by_i += opened
        docs.append(Doc(vocab, words=words, spaces=[True] * (len(words) - 1) + [False], ents=tags))
    return ConllNer(docs, opened_by_i)


def read_conll_ner(path: Union[str, Path], vocab: Vocab) -> List[Doc]:
    """One Doc per sentence, entities set from the tags."""
    return read_conll(path, vocab).docs
