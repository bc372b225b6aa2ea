"""SQuAD 2.0 F1 with the no-answer threshold tau chosen on held-out questions.

`evaluate-qa --tune-threshold` chooses tau on the questions it scores (as the BERT paper does on
SQuAD 2.0 dev), which flatters the score. Here dev is given in parts (e.g. by article, from
`convert-squad --articles`): each part is scored at the tau chosen on the other parts, and the
parts' F1 are pooled. The pipeline's own tau is not changed.

    python bench/qa_heldout_threshold.py MODEL dev_24_26.spacy dev_26_28.spacy
"""
import argparse
from pathlib import Path
from typing import List

import numpy as np
import spacy

from spacy_bertfam.corpora.squad import qa_corpus
from spacy_bertfam.pipeline.qa_scoring import ThresholdRow, best_null_threshold, f1_at_threshold, threshold_rows


def part_rows(nlp, path: Path) -> List[ThresholdRow]:
    examples = list(qa_corpus(path)(nlp))
    docs = nlp.pipe([eg.predicted for eg in examples], batch_size=32)
    return threshold_rows(docs, [eg.reference for eg in examples], nlp.get_pipe("span_qa").cfg["spans_key"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("parts", nargs="+", type=Path, help="two or more .spacy files of QA Docs")
    args = parser.parse_args()
    if len(args.parts) < 2:
        parser.error("give dev in two or more parts: each is scored at the tau chosen on the others")
    nlp = spacy.load(args.model)
    parts = [part_rows(nlp, path) for path in args.parts]
    pooled, null = [], []
    for i, (path, rows) in enumerate(zip(args.parts, parts)):
        others = [row for j, part in enumerate(parts) if j != i for row in part]
        tau, _ = best_null_threshold(others)
        own_tau, own_f1 = best_null_threshold(rows)
        f1 = f1_at_threshold(rows, tau)
        always_null = float(np.mean([not golds for _, _, golds in rows]))
        print(f"{path.name}: {len(rows)} questions, always-null {100 * always_null:.1f}; tau from the others "
              f"{tau:.3f}: F1 {100 * f1:.1f} ({100 * (f1 - always_null):+.1f}); its own tau {own_tau:.3f}: "
              f"F1 {100 * own_f1:.1f}")
        pooled.append(f1 * len(rows))
        null.append(always_null * len(rows))
    n = sum(map(len, parts))
    print(f"held-out tau, pooled: F1 {100 * sum(pooled) / n:.1f}, always-null {100 * sum(null) / n:.1f} "
          f"({100 * (sum(pooled) - sum(null)) / n:+.1f})")


if __name__ == "__main__":
    main()
