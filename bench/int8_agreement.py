"""How far int8 prediction strays from fp32, and whether it depends on batch mates.

    .venv/bin/python bench/int8_agreement.py PIPELINE [PIPELINE ...] [--dev corpus/dev/ner.spacy]
        [--outlier-channels N]   # input channels per layer kept in fp32 (0: none, as before them)
        [--smoothing A]          # the smoothing's migration strength (0: none, as before it)

For each trained NER pipeline (bert_encoder + ner): WNUT-17 dev F1 in fp32 and int8, the
share of fp32's entities that int8 predicts too, and for each precision the share of docs
whose entities are the same at batch size 1 and 32.
"""
import argparse
from pathlib import Path
from typing import List, Set, Tuple

import spacy
import torch
from spacy.tokens import DocBin
from spacy.training import Example

from spacy_bertfam.models import quantize

ROOT = Path(__file__).resolve().parents[1]
Entities = List[Set[Tuple[int, int, str]]]


def entities(docs) -> Entities:
    return [{(e.start_char, e.end_char, e.label_) for e in doc.ents} for doc in docs]


def measure(path: Path, dev: Path) -> None:
    fp32_ents = None
    for precision in ("fp32", "int8"):
        nlp = spacy.load(path, config={"components": {"bert_encoder": {"precision": precision}}})
        golds = list(DocBin().from_disk(dev).get_docs(nlp.vocab))
        texts = [g.text for g in golds]
        predicted = list(nlp.pipe(texts, batch_size=32))
        f1 = nlp.get_pipe("ner").score([Example(p, g) for p, g in zip(predicted, golds)])["ents_f"]
        batched, alone = entities(predicted), entities(nlp.pipe(texts, batch_size=1))
        fp32_ents = fp32_ents or batched
        n_shared, n_fp32 = sum(len(a & b) for a, b in zip(batched, fp32_ents)), sum(map(len, fp32_ents))
        same = sum(a == b for a, b in zip(batched, alone)) / len(texts)
        print(f"{path} {precision}: F1 {100 * f1:.2f}, entities shared with fp32 {100 * n_shared / max(1, n_fp32):.2f}% "
              f"({n_shared} of {n_fp32}), "
              f"docs with the same entities at batch 1 and 32 {100 * same:.1f}%", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("pipelines", nargs="+", type=Path)
    parser.add_argument("--dev", type=Path, default=ROOT / "corpus" / "dev" / "ner.spacy")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--outlier-channels", type=int, default=quantize.OUTLIER_CHANNELS)
    parser.add_argument("--smoothing", type=float, default=quantize.SMOOTHING)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    quantize.OUTLIER_CHANNELS = args.outlier_channels
    quantize.SMOOTHING = args.smoothing
    for path in args.pipelines:
        measure(path, args.dev)


if __name__ == "__main__":
    main()
