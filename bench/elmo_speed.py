"""Words/s of an `elmo_features` pipeline's `nlp.pipe`, and where its time goes.

    .venv/bin/python bench/elmo_speed.py [training/ner_elmo/model-best] [--reps 3] [--profile]

The pipeline is the project's ELMo NER pipeline (`spacy project run ner-elmo`; the
sizes of configs/pretrain_elmo.cfg, the default CPU config). Texts: WNUT-17 dev
(tweets) and English prose (the books cut into paragraphs of 50-300 words), at the
pipeline's batch size, on `--threads` torch threads (2). The figure is the median over
`--reps` repetitions. `--profile` prints the torch operators that took the most time
on the prose. `--against COMMIT` compares, in one process and alternating, the ELMo model
code of that commit (`spacy_bertfam/models/elmo/` as git has it there, with the same
weights) with the current one, and prints how far their `doc.tensor`s differ.
`--package-at COMMIT --checkpoint DIR` compares the whole package of that commit with the
current one: each builds an `elmo_features`-only pipeline from the ELMo checkpoint DIR
(e.g. `python -m spacy bertfam-pretrain configs/pretrain_elmo.cfg /tmp/elmo --training.max_steps 1`),
then the two time it in their own processes, alternating, `--pairs` times.
"""
import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
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


def model_code_at(commit: str, folder: Path):
    """`spacy_bertfam/models/elmo/` of `commit`, imported as a sibling package of the current
    one (`spacy_bertfam.models.elmo_at_commit`), so that its relative imports resolve."""
    listing = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", f"{commit}:spacy_bertfam/models/elmo"],
                             capture_output=True, text=True, check=True).stdout.split()
    for name in (n for n in listing if n.endswith(".py")):
        source = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:spacy_bertfam/models/elmo/{name}"],
                                capture_output=True, text=True, check=True).stdout
        (folder / name).write_text(source)
    name = "spacy_bertfam.models.elmo_at_commit"
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py", submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def compare(nlp, commit: str, corpus: Dict[str, List[str]], reps: int) -> None:
    """Words/s with the ELMo model code of `commit` and with the current code, alternating."""
    import numpy as np

    import spacy_bertfam.models  # noqa: F401 (the parent package of the commit's code)

    encoder = next(m for m in nlp.get_pipe("elmo_features").model.walk() if m.shims).shims[0]._model
    current = encoder.encoder
    with tempfile.TemporaryDirectory() as folder:
        then = model_code_at(commit, Path(folder)).ElmoBiLM(current.config)
    then.load_state_dict(current.state_dict())
    versions = {commit: then.eval(), "now": current}
    for name in ("tweets", "prose"):
        tensors, rates = {}, {v: [] for v in versions}
        for version, model in versions.items():
            encoder.encoder = model
            tensors[version] = [doc.tensor for doc in nlp.pipe(corpus[name][:50])]
        for _ in range(reps):
            for version, model in versions.items():
                encoder.encoder = model
                rates[version].append(words_per_second(nlp, corpus[name], 1))
        diff = max(float(np.abs(a - b).max()) for a, b in zip(*tensors.values()))
        medians = {v: statistics.median(r) for v, r in rates.items()}
        print(f"{name}: {commit} {medians[commit]:,.0f}, now {medians['now']:,.0f} words/s "
              f"(x{medians['now'] / medians[commit]:.2f}; each: {[round(r) for r in rates[commit]]} and "
              f"{[round(r) for r in rates['now']]}); doc.tensor of 50 texts within {diff:.1e}", flush=True)
    encoder.encoder = current


def compare_packages(commit: str, checkpoint: str, corpus: Dict[str, List[str]], reps: int, pairs: int,
                     threads: int) -> None:
    """Words/s of the package of `commit` and of the current one, each in its own processes
    (pairs of alternating runs), on pipelines each built itself from `checkpoint`."""
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        (tmp / "then").mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp / "then")], input=archive, check=True)
        (tmp / "texts.json").write_text(json.dumps(corpus))
        roots = {commit: tmp / "then", "now": ROOT}

        def worker(version: str, *args: str) -> str:
            command = [sys.executable, __file__, "--worker", str(roots[version]), str(tmp / version), *args]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"The package of {version} failed ({' '.join(args)}):\n{done.stderr[-3000:]}")
            return done.stdout

        for version in roots:
            worker(version, "--checkpoint", checkpoint)
        rates: Dict[str, List[Dict[str, float]]] = {v: [] for v in roots}
        for _ in range(pairs):
            for version in roots:
                rates[version].append(json.loads(worker(version, "--reps", str(reps), "--threads", str(threads))))
    for name in ("tweets", "prose"):
        then, now = ([r[name] for r in rates[v]] for v in roots)
        ratios = [b / a for a, b in zip(then, now)]
        print(f"{name}: {commit} {[round(r) for r in then]}, now {[round(r) for r in now]} words/s; pairs "
              f"{' '.join(f'x{r:.2f}' for r in ratios)}; ratio of medians x{statistics.median(now) / statistics.median(then):.2f}")


def run_worker(root: str, pipeline: str, checkpoint: str, reps: int, threads: int) -> None:
    """In a process of its own, with the package at `root`: build the pipeline from
    `checkpoint` (when given), or time it on the texts beside it and print JSON."""
    sys.path.insert(0, root)
    import spacy

    import spacy_bertfam

    assert spacy_bertfam.__file__.startswith(root), spacy_bertfam.__file__
    torch.set_num_threads(threads)
    if checkpoint:
        from spacy_bertfam.loaders import checkpoint_loader

        nlp = spacy.blank("en")
        nlp.add_pipe("elmo_features", config={"sort_batches": 64})
        nlp.get_pipe("elmo_features").initialize(lambda: [], nlp=nlp, encoder_loader=checkpoint_loader(checkpoint))
        return nlp.to_disk(pipeline)
    nlp = spacy.load(pipeline)
    corpus = json.loads((Path(pipeline).parent / "texts.json").read_text())
    print(json.dumps({name: words_per_second(nlp, corpus[name], reps) for name in ("tweets", "prose")}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pipeline", nargs="?", default=str(ROOT / "training" / "ner_elmo" / "model-best"))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--against", metavar="COMMIT", help="compare with the ELMo model code of this commit")
    parser.add_argument("--package-at", metavar="COMMIT", help="compare with the whole package of this commit")
    parser.add_argument("--checkpoint", help="the ELMo checkpoint that --package-at builds its pipelines from")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--worker", nargs=2, metavar=("ROOT", "PIPELINE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return run_worker(*args.worker, args.checkpoint, args.reps, args.threads)
    if args.package_at:
        if not args.checkpoint:
            sys.exit("--package-at needs --checkpoint DIR: an ELMo checkpoint both versions build a pipeline from")
        return compare_packages(args.package_at, args.checkpoint, texts(), args.reps, args.pairs, args.threads)
    if not Path(args.pipeline).exists():
        sys.exit(f"No pipeline at {args.pipeline}: make it with `python -m spacy project run ner-elmo` "
                 "(or give the path of another elmo_features pipeline)")
    import spacy

    torch.set_num_threads(args.threads)
    nlp = spacy.load(args.pipeline)
    corpus: Dict[str, List[str]] = texts()
    if args.against:
        return compare(nlp, args.against, corpus, args.reps)
    for name in ("tweets", "prose"):
        print(f"{name}: {words_per_second(nlp, corpus[name], args.reps):,.0f} words/s", flush=True)
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            list(nlp.pipe(corpus["prose"][:100]))
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


if __name__ == "__main__":
    main()
