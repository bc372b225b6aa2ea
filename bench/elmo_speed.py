"""Words/s of an `elmo_features` pipeline's `nlp.pipe`, and where its time goes.

    .venv/bin/python bench/elmo_speed.py [training/ner_elmo/model-best] [--reps 3] [--profile]

The pipeline is the project's ELMo NER pipeline (`spacy project run ner-elmo`; the
sizes of configs/pretrain_elmo.cfg, the default CPU config). Texts: WNUT-17 dev
(tweets) and English prose (the books cut into paragraphs of 50-300 words), at the
pipeline's batch size, on `--threads` torch threads (2). The figure is the median over
`--reps` repetitions. `--profile` prints the torch operators that took the most time
on the prose. Comparing two versions of the code: run this script with each on
PYTHONPATH, in turn.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from speed import texts  # noqa: E402


def words_per_second(nlp, docs: List[str], reps: int) -> float:
    n_words = sum(len(t.split()) for t in docs)
    list(nlp.pipe(docs[:32]))  # warm-up
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in nlp.pipe(docs):
            pass
        times.append(time.perf_counter() - start)
    return n_words / statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pipeline", nargs="?", default=str(ROOT / "training" / "ner_elmo" / "model-best"))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if not Path(args.pipeline).exists():
        sys.exit(f"No pipeline at {args.pipeline}: make it with `python -m spacy project run ner-elmo` "
                 "(or give the path of another elmo_features pipeline)")
    import spacy

    torch.set_num_threads(args.threads)
    nlp = spacy.load(args.pipeline)
    corpus: Dict[str, List[str]] = texts()
    for name in ("tweets", "prose"):
        print(f"{name}: {words_per_second(nlp, corpus[name], args.reps):,.0f} words/s", flush=True)
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            list(nlp.pipe(corpus["prose"][:100]))
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


if __name__ == "__main__":
    main()
