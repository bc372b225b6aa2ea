"""Text classification CSV files (`text,category`), e.g. Banking77, as exclusive classes."""
import csv
import random
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc

from ..errors import InputError, input_file


def read_textcat_csv(
    path: Union[str, Path], nlp: Language, *, labels: Optional[Sequence[str]] = None
) -> List[Doc]:
    """One Doc per row with `doc.cats` one-hot over `labels` (default: those in the file). A row
    whose fields beyond the header hold anything (a text with an unquoted comma), or without a
    text or a category, is an error: reading it as the header's fields would drop the rest of
    the row. Other columns are ignored."""
    path = input_file(path)
    with path.open(encoding="utf-8-sig", newline="") as f:  # -sig: a spreadsheet's byte-order mark
        reader = csv.DictReader(f)
        rows = [(reader.line_num, row) for row in reader]  # a quoted field may span lines
    if not rows:
        raise InputError(f"{path}: no rows of text and category")
    if not {"text", "category"} <= set(rows[0][1]):
        raise InputError(f"{path}: expected the columns 'text' and 'category', found {list(rows[0][1])}")
    for line, row in rows:
        if any((field or "").strip() for field in row.get(None, ())):  # DictReader's key for fields beyond the header
            raise InputError(f"{path}:{line}: more fields than the header's; a text holding a comma must be "
                             'quoted, e.g. "I lost my card, please help",lost_card')
        if not (row["category"] or "").strip():  # None: the row ends before the column
            raise InputError(f"{path}:{line}: the row has no category")
        if not (row["text"] or "").strip():
            raise InputError(f"{path}:{line}: the row's text is empty")
    labels = sorted({r["category"] for _, r in rows}) if labels is None else list(labels)
    known = set(labels)
    docs = []
    for line, row in rows:
        if row["category"] not in known:
            raise InputError(f"{path}:{line}: unknown category {row['category']!r}")
        doc = nlp.make_doc(row["text"])
        doc.cats = {label: float(label == row["category"]) for label in labels}
        docs.append(doc)
    return docs


def split_heldout(docs: List[Doc], fraction: float, seed: int) -> Tuple[List[Doc], List[Doc]]:
    """(train, held-out): a seeded random `fraction` of the docs is held out; 0 holds out none
    (a file converted whole, e.g. a separate test set)."""
    if not 0.0 <= fraction < 1.0:
        raise InputError(f"The held-out fraction must be at least 0 and below 1, got {fraction}")
    if fraction == 0.0:
        return list(docs), []
    order = list(range(len(docs)))
    random.Random(seed).shuffle(order)
    n_heldout = round(len(docs) * fraction)
    if not 0 < n_heldout < len(docs):
        raise InputError(f"Holding out {fraction} of {len(docs)} docs leaves one side empty: "
                         f"choose a fraction that keeps docs on both sides")
    heldout = set(order[:n_heldout])
    return [d for i, d in enumerate(docs) if i not in heldout], [docs[i] for i in sorted(heldout)]
