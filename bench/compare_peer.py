"""spacy-bertfam vs spacy-transformers 1.4, side by side: same MiniLM weights, heads, data, budget.

Runs whose bench/runs/<name>/model-last exists are evaluated again, not retrained.

    .venv/bin/python bench/compare_peer.py                 # accuracy + speed (about 2.5 h on 2 cores)
    .venv/bin/python bench/compare_peer.py --only speed --systems ours peer [--reps 3]
    .venv/bin/python bench/compare_peer.py --only accuracy --seeds 0 --tasks textcat

Four systems: `ours` (configs/{ner,textcat}.cfg as shipped: the listener
concatenates the last four layers), `ours_top_layer` (the same configs with the
listener on the top layer alone, which is all the peer's listener sees), `ours_bf16`
(the shipped configs trained and run with `precision = "bf16"`) and `peer`
(bench/peer_{ner,textcat}.cfg). Results are merged into bench/results/*.json by
system/task/seed, so a partial run updates only what it measured.

Needs the [peer] extra (`bash .ci/setup peer`). Accuracy: `spacy train` (NER: 5 epochs of
WNUT-17 train, scored on WNUT-17 dev; textcat: 2 epochs of Banking77 train with a
seed-0 random 10% held out, scored on it), then `spacy evaluate`. Speed, each
system in its own process with 2 torch threads: nlp.pipe words/s at batch sizes 8
and 32 over WNUT-17 dev, training words/s over batches of ~1000 words of WNUT-17
train, and peak RSS; with --reps N the systems' processes alternate N times and each figure
is the median. Results go to bench/results/ as JSON and a Markdown table.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpus"
RUNS = ROOT / "bench" / "runs"
RESULTS = ROOT / "bench" / "results"
ASSETS = ROOT / "assets"  # copies of ../shared/data, with licences
THREADS = "2"

# "ours" is the shipped configs (listeners concatenate the last four layers);
# "ours_top_layer" reads the top layer alone, as the peer's listener does.
SYSTEMS = ("ours", "ours_top_layer", "ours_bf16", "peer")
DATA = {
    "ner": (CORPUS / "wnut17_train.spacy", CORPUS / "wnut17_dev.spacy"),
    "textcat": (CORPUS / "banking77" / "train.spacy", CORPUS / "banking77" / "dev.spacy"),
}


def env() -> Dict[str, str]:
    e = dict(os.environ, OMP_NUM_THREADS=THREADS, MKL_NUM_THREADS=THREADS, HF_HUB_OFFLINE="1",
             TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return e


def minilm() -> str:
    from spacy_bertfam.pretrained import pretrained_path

    return str(pretrained_path("all-MiniLM-L6-v2"))


def setup(system: str, task: str) -> Tuple[Path, Dict[str, Any]]:
    """The config file and overrides that make up one system for one task."""
    if system == "peer":
        return ROOT / "bench" / f"peer_{task}.cfg", {"paths.minilm": minilm()}
    overrides: Dict[str, Any] = {}
    if system == "ours_top_layer":
        listener = f"components.{task}.model.tok2vec"
        overrides = {f"{listener}.layers": [-1], f"{listener}.combine": "scalar_mix",
                     f"{listener}.width": 384}
    if system == "ours_bf16":  # the shipped configs, trained and run under bf16 autocast
        overrides = {"components.bert_encoder.precision": "bf16"}
    return ROOT / "configs" / f"{task}.cfg", overrides


def prepare_corpora() -> None:
    run = lambda *a: subprocess.run([sys.executable, "-m", "spacy_bertfam", *a], check=True)  # noqa: E731
    if not DATA["ner"][0].exists():
        run("convert-ner", str(ASSETS / "wnut17/wnut17train.conll"), str(DATA["ner"][0]))
        run("convert-ner", str(ASSETS / "wnut17/emerging.dev.conll"), str(DATA["ner"][1]))
    if not DATA["textcat"][0].exists():
        run("convert-textcat", str(ASSETS / "banking77/train.csv"), str(CORPUS / "banking77"),
            "--heldout", "0.1", "--seed", "0")


def train_and_evaluate(system: str, task: str, seed: int) -> Dict:
    out = RUNS / f"{system}_{task}_s{seed}"
    train, dev = DATA[task]
    config, overrides = setup(system, task)
    cmd = [sys.executable, "-m", "spacy", "train", str(config), "--output", str(out),
           "--paths.train", str(train), "--paths.dev", str(dev), "--system.seed", str(seed)]
    for key, value in overrides.items():
        cmd += [f"--{key}", json.dumps(value)]
    timing = out / "train_seconds.json"
    if (out / "model-last").exists():  # finished earlier: evaluate it again, keep its timing
        seconds = json.loads(timing.read_text()) if timing.exists() else None
    else:
        start = time.perf_counter()
        subprocess.run(cmd, check=True, env=env(), stdout=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        timing.write_text(json.dumps(seconds))
    metrics = out / "metrics.json"
    subprocess.run([sys.executable, "-m", "spacy", "evaluate", str(out / "model-last"), str(dev),
                    "--output", str(metrics)], check=True, env=env(), stdout=subprocess.DEVNULL)
    scores = json.loads(metrics.read_text())
    if task == "ner":
        picked = {"p": scores["ents_p"], "r": scores["ents_r"], "f": scores["ents_f"]}
    else:
        picked = {"acc": scores["cats_micro_f"], "macro_f": scores["cats_macro_f"]}
    return {"system": system, "task": task, "seed": seed, "train_seconds": seconds, **picked}


def speed_worker(system: str) -> Dict:
    """Runs in its own process: inference and training speed, peak RSS."""
    import random

    import spacy
    import torch
    from spacy.tokens import DocBin
    from spacy.training import Example
    from spacy.training.batchers import minibatch_by_words
    from thinc.api import fix_random_seed

    torch.set_num_threads(int(THREADS))
    fix_random_seed(0)
    path, overrides = setup(system, "ner")
    config = spacy.util.load_config(path, overrides={
        "paths.train": str(DATA["ner"][0]), "paths.dev": str(DATA["ner"][1]), **overrides},
        interpolate=False)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    train_docs = list(DocBin().from_disk(DATA["ner"][0]).get_docs(nlp.vocab))
    examples = [Example(nlp.make_doc(d.text), d) for d in train_docs]
    optimizer = nlp.initialize(lambda: examples[:200])
    texts = [d.text for d in DocBin().from_disk(DATA["ner"][1]).get_docs(nlp.vocab)]
    n_words = sum(len(nlp.make_doc(t)) for t in texts)
    result = {"system": system}
    for batch_size in (8, 32):
        list(nlp.pipe(texts[:64], batch_size=batch_size))  # warm-up
        best = float("inf")
        for _ in range(2):
            start = time.perf_counter()
            list(nlp.pipe(texts, batch_size=batch_size))
            best = min(best, time.perf_counter() - start)
        result[f"infer_wps_bs{batch_size}"] = n_words / best
    result["rss_infer_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    random.Random(0).shuffle(examples)
    batches = list(minibatch_by_words(examples, size=1000, tolerance=0.2, discard_oversize=False))
    for batch in batches[:3]:  # warm-up
        nlp.update(batch, sgd=optimizer, drop=0.1)
    timed = batches[3:43]
    words = sum(len(eg.reference) for batch in timed for eg in batch)
    start = time.perf_counter()
    for batch in timed:
        nlp.update(batch, sgd=optimizer, drop=0.1)
    result["train_wps"] = words / (time.perf_counter() - start)
    result["rss_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def measure_speed(system: str) -> Dict:
    out = subprocess.run([sys.executable, __file__, "--speed-worker", system], check=True, env=env(),
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def mean(values: List[float]) -> float:
    return sum(values) / len(values)


def merge(path: Path, new: List[Dict], key: Tuple[str, ...]) -> List[Dict]:
    """Earlier results stay unless this run measured the same thing again."""
    old = json.loads(path.read_text()) if path.exists() else []
    fresh = {tuple(r[k] for k in key) for r in new}
    merged = [r for r in old if tuple(r[k] for k in key) not in fresh] + new
    path.write_text(json.dumps(merged, indent=2))
    return merged


def accuracy_table(accuracy: List[Dict]) -> List[str]:
    systems = [s for s in SYSTEMS if any(r["system"] == s for r in accuracy)]
    lines = ["| task | metric | " + " | ".join(f"{s} (per seed) | {s} mean" for s in systems) + " |",
             "|---|---|" + "---|---|" * len(systems)]
    for task, metrics in (("ner", ("p", "r", "f")), ("textcat", ("acc", "macro_f"))):
        for metric in metrics:
            row = [task, metric]
            for system in systems:
                runs = sorted((r for r in accuracy if r["system"] == system and r["task"] == task),
                              key=lambda r: r["seed"])
                vals = [r[metric] for r in runs]
                row += [", ".join(f"{v:.4f}" for v in vals) or "-", f"{mean(vals):.4f}" if vals else "-"]
            lines.append("| " + " | ".join(row) + " |")
    for task in ("ner", "textcat"):
        for system in systems:
            secs = [r["train_seconds"] for r in accuracy
                    if r["system"] == system and r["task"] == task and r["train_seconds"] is not None]
            if secs:
                lines.append(f"\n{system} {task}: spacy train wall time per run {mean(secs):.0f} s")
    return lines


def speed_table(speed: List[Dict]) -> List[str]:
    lines = ["| system | infer words/s bs=8 | infer words/s bs=32 | train words/s | peak RSS infer (MB) | peak RSS train (MB) |",
             "|---|---|---|---|---|---|"]
    by = {r["system"]: r for r in speed}
    for system in (s for s in SYSTEMS if s in by):
        r = by[system]
        lines.append(f"| {system} | {r['infer_wps_bs8']:.0f} | {r['infer_wps_bs32']:.0f} | "
                     f"{r['train_wps']:.0f} | {r['rss_infer_mb']:.0f} | {r['rss_peak_mb']:.0f} |")
    for ours in ("ours", "ours_top_layer", "ours_bf16"):
        if {ours, "peer"} <= set(by):
            ratio = lambda k, ours=ours: by[ours][k] / by["peer"][k]  # noqa: E731
            lines.append(f"\n{ours}/peer: inference {ratio('infer_wps_bs8'):.2f}× (bs 8), "
                         f"{ratio('infer_wps_bs32'):.2f}× (bs 32); training {ratio('train_wps'):.2f}×")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=["accuracy", "speed"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--tasks", nargs="+", default=["ner", "textcat"])
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--speed-worker", choices=SYSTEMS)
    parser.add_argument("--reps", type=int, default=1, help="speed: alternate the systems' processes N times")
    args = parser.parse_args()
    if args.speed_worker:
        print(json.dumps(speed_worker(args.speed_worker)))
        return
    prepare_corpora()
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "accuracy"):
        accuracy = []
        for task in args.tasks:
            for seed in args.seeds:
                for system in args.systems:
                    accuracy.append(train_and_evaluate(system, task, seed))
                    print(json.dumps(accuracy[-1]), flush=True)
        accuracy = merge(RESULTS / "accuracy.json", accuracy, ("system", "task", "seed"))
        (RESULTS / "accuracy.md").write_text("\n".join(accuracy_table(accuracy)) + "\n")
    if args.only in (None, "speed"):
        runs = [[measure_speed(system) for system in args.systems] for _ in range(args.reps)]
        speed = [{"system": system, "reps": args.reps,
                  **{k: statistics.median(rep[i][k] for rep in runs) for k in runs[0][i] if k != "system"}}
                 for i, system in enumerate(args.systems)]
        speed = merge(RESULTS / "speed.json", speed, ("system",))
        (RESULTS / "speed.md").write_text("\n".join(speed_table(speed)) + "\n")
    for name in ("accuracy.md", "speed.md"):
        if (RESULTS / name).exists():
            print((RESULTS / name).read_text())


if __name__ == "__main__":
    main()
