"""How the cost of `nlp.pipe` grows with document length, for BERT and GPT.

    .venv/bin/python bench/doc_length.py [--lengths 10 100 1000 5000 20000] [--reps 3]

Documents of each length (in spaCy tokens) are cut from the running text of the books
in assets/raw_text, about `--words` words per length. Pipelines:
- bert: configs/ner.cfg (bert_encoder + ner) initialised from MiniLM-L6 (128-piece
  windows, stride 96);
- gpt, gpt+lm: gpt_lm with the default CPU sizes of configs/ner_gpt.cfg (128-piece
  windows, stride 96) and GPT-2's BPE, random weights (speed does not depend on them),
  without and with `lm_scores`.
Windows make the cost linear in length: words/s should stay flat from a few windows
on. The pipelines alternate within each repetition; figures are medians. 2 torch
threads unless told otherwise. Prints a Markdown table; `--json` writes the figures.
"""
import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

import spacy
import torch
from spacy.training import Example

from spacy_bertfam.tokenization.bpe import load_bpe

ROOT = Path(__file__).resolve().parents[1]


def documents(length: int, words: int) -> List[str]:
    """max(1, words // length) documents of `length` whitespace words from the books."""
    text = " ".join((ROOT / "assets" / "raw_text" / name).read_text(encoding="utf8")
                    for name in ("janeausten_6novels.txt", "mobydick.txt")).split()
    n = max(1, words // length)
    return [" ".join(text[k * length:(k + 1) * length]) for k in range(n)]


def bert_pipeline():
    config = spacy.util.load_config(ROOT / "configs" / "ner.cfg")
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    example = Example.from_dict(nlp.make_doc("Alex moved to Chicago"), {"entities": [(0, 4, "person"), (14, 21, "location")]})
    nlp.initialize(lambda: [example])
    return nlp


def gpt_pipeline(lm_scores: bool, vocab: Path):
    config = spacy.util.load_config(ROOT / "configs" / "ner_gpt.cfg")
    model = {**config["components"]["gpt_lm"]["model"], "n_pieces": 50257}
    nlp = spacy.blank("en")
    nlp.add_pipe("gpt_lm", config={"model": model, "lm_scores": lm_scores})
    loader = spacy.registry.misc.get("spacy-bertfam.RandomInit.v1")(vocab=str(vocab))
    nlp.get_pipe("gpt_lm").initialize(lambda: [], nlp=nlp, encoder_loader=loader)
    return nlp


def time_pipe(nlp, texts: List[str], batch_size: int) -> float:
    """words/s of one pass (the texts are made into Docs first: tokenization is not timed)."""
    docs = [nlp.make_doc(t) for t in texts]
    start = time.perf_counter()
    for _ in nlp.pipe(docs, batch_size=batch_size):
        pass
    return sum(len(d) for d in docs) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", type=int, nargs="+", default=[10, 100, 1000, 5000, 20000])
    parser.add_argument("--words", type=int, default=20000, help="words per length")
    parser.add_argument("--systems", nargs="+", default=["bert", "gpt", "gpt+lm"])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        vocab = Path(tmp) / "tokenizer.json"
        load_bpe(ROOT / "tests" / "data" / "gpt2_bpe").save(str(vocab))
        build: Dict[str, Callable] = {"bert": bert_pipeline, "gpt": lambda: gpt_pipeline(False, vocab),
                                      "gpt+lm": lambda: gpt_pipeline(True, vocab)}
        pipelines = {name: build[name]() for name in args.systems}
    figures: Dict[str, Dict[int, float]] = {name: {} for name in pipelines}
    for length in args.lengths:
        texts = documents(length, args.words)
        for nlp in pipelines.values():  # warm-up at this length
            time_pipe(nlp, texts[:2], args.batch_size)
        runs: Dict[str, List[float]] = {name: [] for name in pipelines}
        for _ in range(args.reps):
            for name, nlp in pipelines.items():
                runs[name].append(time_pipe(nlp, texts, args.batch_size))
        for name in pipelines:
            figures[name][length] = statistics.median(runs[name])
        print(f"{length} words: " + ", ".join(f"{n} {figures[n][length]:,.0f}" for n in pipelines), flush=True)
    print(f"\nwords/s by document length ({args.threads} threads, batch {args.batch_size}, median of {args.reps})\n")
    print("| doc length (words) | " + " | ".join(pipelines) + " |")
    print("|---" * (len(pipelines) + 1) + "|")
    for length in args.lengths:
        print(f"| {length:,} | " + " | ".join(f"{figures[n][length]:,.0f}" for n in pipelines) + " |")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
