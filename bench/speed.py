"""Inference speed of ours (fp32, bf16, int8; fp32 and bf16 also with `torch_compile`) and
spacy-transformers (fp32), side by side in one run.

    .venv/bin/python bench/speed.py [--reps 3] [--accuracy] [--systems ...]   # needs the [peer] extra

One process holds every system's NER pipeline (bert_encoder/transformer + ner, MiniLM-L6
weights, built from configs/ner.cfg and bench/peer_ner.cfg) and times `nlp.pipe` on the
same texts, the systems alternating within each repetition; the figure is the median
over repetitions, in words per second, on `--threads` torch threads (2). Texts: WNUT-17 dev (tweets)
at batch 8 and 32; English prose, the books cut into paragraphs of 50-300 words; and
documents of 2,000 words cut from the books. The machine's fp32 and bf16 matmul peaks
are measured too (the faster of torch's `mm` and oneDNN's linear product), and the
encoder's useful GFLOP/s (the arithmetic of its windows' real pieces over the time of its
forward passes, both taken inside the timed `nlp.pipe` runs) is given as a share of the
fp32 peak. For ours it also prints the encoder's share of the
`nlp.pipe` time and the words/s the rest of the pipeline (tokenizer, alignment, listener,
NER head, spaCy) allows on its own: the ceiling that no encoder speed-up can pass, and the
ratio to the peer that the pipeline would reach with its encoder at 100% of its precision's
matmul peak (the same arithmetic; the rest as measured): the ceiling of faster kernels.

--accuracy: the trained pipelines of the project (training/ner_bert, training/textcat_bert,
model-best) scored on corpus/dev at each precision: WNUT-17 dev F1, Banking77 held-out
accuracy, and how many predicted entities int8/bf16 share with fp32.
Results: bench/results/speed_precision.{json,md}.
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import torch

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
OURS = ("ours_fp32", "ours_bf16", "ours_int8", "ours_fp32_compiled", "ours_bf16_compiled")
SYSTEMS = (*OURS, "peer_fp32")


def matmul_peak(dtype: torch.dtype, n: int = 2048, reps: int = 10, kernel: str = "torch") -> float:
    """GFLOP/s of an n×n matmul in `dtype`, best of `reps`: `torch.mm` (its BLAS for fp32, MKL
    here), or "onednn", the linear product our encoder predicts with on a CPU (`models.layers.linear`)."""
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    product = torch.mm if kernel == "torch" else (
        lambda x, w: torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], ""))
    product(a, b)
    best = min(_timed(product, a, b) for _ in range(reps))
    return 2 * n**3 / best / 1e9


def matmul_peaks(dtypes: Dict[str, torch.dtype]) -> Dict[str, float]:
    """Per precision the faster of torch's and oneDNN's matmul (each also given alone): a
    share of peak counts against the best kernel the machine has."""
    onednn = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    peaks = {}
    for name, dtype in dtypes.items():
        peaks[f"{name} torch.mm"] = matmul_peak(dtype)
        if onednn:
            peaks[f"{name} oneDNN"] = matmul_peak(dtype, kernel="onednn")
        peaks[name] = max(v for k, v in peaks.items() if k.startswith(f"{name} "))
    return peaks


def _timed(fn, *args, **kwargs) -> float:
    start = time.perf_counter()
    list(fn(*args, **kwargs))
    return time.perf_counter() - start


def texts() -> Dict[str, List[str]]:
    import spacy

    from spacy_bertfam.corpora.conll import read_conll_ner

    vocab = spacy.blank("en").vocab
    tweets = [d.text for d in read_conll_ner(ROOT / "assets" / "wnut17" / "emerging.dev.conll", vocab)]
    books = [(ROOT / "assets" / "raw_text" / b).read_text(encoding="utf8") for b in ("janeausten_6novels.txt", "mobydick.txt")]
    paragraphs = [" ".join(p.split()) for book in books for p in book.split("\n\n")]
    prose = [p for p in paragraphs if 50 <= len(p.split()) <= 300][:400]
    words = " ".join(books).split()
    long_docs = [" ".join(words[i : i + 2000]) for i in range(100_000, 100_000 + 12 * 2000, 2000)]
    return {"tweets": tweets, "prose": prose, "2000_words": long_docs}


def pipelines(names) -> Dict:
    import spacy
    from spacy.training import Example

    from spacy_bertfam.pretrained import pretrained_path

    example_text, ents = "Alex moved to Chicago", [(0, 4, "person"), (14, 21, "location")]
    built = {}
    for name in names:
        if name == "peer_fp32":
            config = spacy.util.load_config(ROOT / "bench" / "peer_ner.cfg",
                                            overrides={"paths.minilm": str(pretrained_path("all-MiniLM-L6-v2"))})
        else:
            config = spacy.util.load_config(ROOT / "configs" / "ner.cfg")
            config["components"]["bert_encoder"]["precision"] = name.split("_")[1]
            config["components"]["bert_encoder"]["torch_compile"] = name.endswith("_compiled")
        nlp = spacy.util.load_model_from_config(config, auto_fill=True)
        example = Example.from_dict(nlp.make_doc(example_text), {"entities": ents})
        nlp.initialize(lambda example=example: [example])
        built[name] = nlp
    return built


class EncoderMeter:
    """Times the encoder's forward (the torch part of `bert_encoder`'s prediction: windows in,
    per-piece layers out) inside `nlp.pipe`, on the batches the pipeline forms, and counts its
    useful arithmetic: multiply-adds × 2 of each window's real pieces (padding is waste, not
    work), linear layers and attention scores and sums."""

    def __init__(self, nlp):
        from spacy_bertfam.encoders import torch_encoder

        model = nlp.get_pipe("bert_encoder").model
        config = torch_encoder(model).config
        h, inner = config.hidden_width, config.intermediate_width
        self.per_piece, self.per_pair, self.n_layers = 2 * (4 * h * h + 2 * h * inner), 2 * 2 * h, config.n_layers
        self.seconds = self.flops = 0.0
        shim = model.shims[0]
        predict = shim.predict

        def timed(inputs):
            start = time.perf_counter()
            out = predict(inputs)
            self.seconds += time.perf_counter() - start
            self.flops += self.useful_flops(inputs.args[1])
            return out

        shim.predict = timed

    def useful_flops(self, mask: torch.Tensor) -> float:
        lengths = mask.sum(1).double()
        return self.n_layers * float(self.per_piece * lengths.sum() + self.per_pair * (lengths**2).sum())

    def reading(self) -> tuple:
        """(seconds, flops) since the last reading."""
        out = (self.seconds, self.flops)
        self.seconds = self.flops = 0.0
        return out


def measure(reps: int, threads: int, names) -> Dict:
    torch.set_num_threads(threads)
    data, systems = texts(), pipelines(names)
    ours = [s for s in systems if s in OURS]
    runs = [("tweets", 8), ("tweets", 32), ("prose", 32), ("2000_words", 32)]
    words = {name: sum(len(systems["ours_fp32"].make_doc(t)) for t in ts) for name, ts in data.items()}
    for nlp in systems.values():  # warm-up: first calls, int8 copies, compiling, kernel caches
        for name, _ in runs:
            list(nlp.pipe(data[name][:64], batch_size=32))
    meters = {system: EncoderMeter(systems[system]) for system in ours}
    times: Dict = {(s, run): [] for s in systems for run in runs}
    encoder_rates: Dict = {(s, run): [] for s in ours for run in runs}
    encoder_seconds: Dict = {(s, run): [] for s in ours for run in runs}
    for rep in range(reps):
        for run in runs:
            for system, nlp in systems.items():
                if system in meters:
                    meters[system].reading()
                times[(system, run)].append(_timed(nlp.pipe, data[run[0]], batch_size=run[1]))
                if system in meters:
                    seconds, flops = meters[system].reading()
                    encoder_rates[(system, run)].append(flops / seconds / 1e9)
                    encoder_seconds[(system, run)].append(seconds)
        print(f"repetition {rep + 1}/{reps} done", flush=True)
    dtypes = {"fp32": torch.float32}
    if any("bf16" in s for s in systems):  # emulated bf16 (no AVX512-BF16) takes minutes at this size
        dtypes["bf16"] = torch.bfloat16
    peak = matmul_peaks(dtypes)
    rows = []
    for system in systems:
        for run in runs:
            median = statistics.median(times[(system, run)])
            row = {"system": system, "texts": run[0], "batch_size": run[1], "words": words[run[0]],
                   "words_per_s": words[run[0]] / median}
            if system in ours:
                row["encoder_gflops"] = statistics.median(encoder_rates[(system, run)])
                row["share_of_fp32_peak"] = row["encoder_gflops"] / peak["fp32"]
                total, encoder = times[(system, run)], encoder_seconds[(system, run)]
                row["encoder_share_of_time"] = statistics.median(e / t for e, t in zip(encoder, total))
                row["rest_words_per_s"] = words[run[0]] / statistics.median(t - e for e, t in zip(encoder, total))
            rows.append(row)
    return {"threads": threads, "reps": reps, "matmul_peak_gflops": peak, "rows": rows}


def accuracy(ner_path: Path, textcat_path: Path) -> List[Dict]:
    import spacy
    from spacy.tokens import DocBin
    from spacy.training import Example

    results = []
    for task, path, dev in (("ner", ner_path, "corpus/dev/ner.spacy"), ("textcat", textcat_path, "corpus/dev/textcat.spacy")):
        fp32_ents = None
        for precision in ("fp32", "bf16", "int8"):
            nlp = spacy.load(path, config={"components": {"bert_encoder": {"precision": precision}}})
            golds = list(DocBin().from_disk(ROOT / dev).get_docs(nlp.vocab))
            start = time.perf_counter()
            examples = [Example(p, g) for p, g in zip(nlp.pipe(g.text for g in golds), golds)]
            row = {"task": task, "precision": precision, "seconds": time.perf_counter() - start}
            scores = nlp.get_pipe(task).score(examples)
            if task == "ner":
                ents = [{(e.start_char, e.end_char, e.label_) for e in eg.predicted.ents} for eg in examples]
                row["ents_f"] = scores["ents_f"]
                fp32_ents = fp32_ents or ents
                row["ents_shared_with_fp32"] = (sum(len(a & b) for a, b in zip(ents, fp32_ents))
                                                / max(1, sum(len(b) for b in fp32_ents)))
            else:
                row["cats_acc"] = sum(max(eg.predicted.cats, key=eg.predicted.cats.get) ==
                                      max(eg.reference.cats, key=eg.reference.cats.get) for eg in examples) / len(examples)
                row["cats_macro_f"] = scores["cats_macro_f"]
            print(row, flush=True)
            results.append(row)
    return results


def at_peak(row: Dict, peaks: Dict[str, float]) -> Optional[float]:
    """Words/s the row's pipeline would reach with its encoder at 100% of its precision's
    matmul peak and the rest of the pipeline as measured: the ceiling of faster kernels.
    None where no peak applies (the peer; int8, whose peak is not measured)."""
    precision = row["system"].split("_")[1]
    if "encoder_gflops" not in row or precision not in peaks:
        return None
    share, words_per_s = row["encoder_share_of_time"], row["words_per_s"]
    flops_per_word = row["encoder_gflops"] * 1e9 * share / words_per_s
    return 1 / (flops_per_word / (peaks[precision] * 1e9) + (1 - share) / words_per_s)


def table(result: Dict) -> List[str]:
    rows = result["rows"]
    peer = {(r["texts"], r["batch_size"]): r["words_per_s"] for r in rows if r["system"] == "peer_fp32"}
    lines = [f"{result['threads']} torch thread(s); median of {result['reps']} alternating repetitions. Matmul peak: "
             + ", ".join(f"{k} {v:.0f}" for k, v in result["matmul_peak_gflops"].items()) + " GFLOP/s.",
             "", "| system | texts | batch | words/s | × peer fp32 | encoder GFLOP/s | % of fp32 peak "
             "| encoder's share of the time | words/s without the encoder (× peer) | × peer at the matmul peak |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        base = peer[(r["texts"], r["batch_size"])]
        ratio = r["words_per_s"] / base
        enc = f"{r['encoder_gflops']:.0f} | {100 * r['share_of_fp32_peak']:.0f}%" if "encoder_gflops" in r else "— | —"
        enc += (f" | {100 * r['encoder_share_of_time']:.0f}% | {r['rest_words_per_s']:,.0f} "
                f"({r['rest_words_per_s'] / base:.1f}×)" if "rest_words_per_s" in r else " | — | —")
        ceiling = at_peak(r, result["matmul_peak_gflops"])
        enc += f" | {ceiling / base:.2f}" if ceiling else " | —"
        lines.append(f"| {r['system']} | {r['texts']} | {r['batch_size']} | {r['words_per_s']:,.0f} | {ratio:.2f} | {enc} |")
    if result.get("accuracy"):
        lines += ["", "| task | precision | WNUT-17 F1 / B77 acc. | entities shared with fp32 |", "|---|---|---|---|"]
        for a in result["accuracy"]:
            score = a.get("ents_f", a.get("cats_acc"))
            shared = f"{100 * a['ents_shared_with_fp32']:.1f}%" if "ents_shared_with_fp32" in a else "—"
            lines.append(f"| {a['task']} | {a['precision']} | {100 * score:.1f} | {shared} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--accuracy", action="store_true")
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS),
                        help="ours_fp32 and peer_fp32 are always measured (the ratios' bases)")
    parser.add_argument("--name", default="speed_precision", help="results go to bench/results/NAME.{json,md}")
    parser.add_argument("--skip-speed", action="store_true", help="reuse the speed figures of the last run")
    parser.add_argument("--ner", type=Path, default=ROOT / "training" / "ner_bert" / "model-best")
    parser.add_argument("--textcat", type=Path, default=ROOT / "training" / "textcat_bert" / "model-best")
    args = parser.parse_args()
    out = RESULTS / f"{args.name}.json"
    result = json.loads(out.read_text()) if args.skip_speed else measure(args.reps, args.threads, sorted(
        {"ours_fp32", "peer_fp32", *args.systems}, key=SYSTEMS.index))
    if not args.skip_speed:
        result["command"] = " ".join(["bench/speed.py", *sys.argv[1:]])
    out.write_text(json.dumps(result, indent=1))  # kept even if the accuracy part fails
    if args.accuracy:
        result["accuracy"] = accuracy(args.ner, args.textcat)
        out.write_text(json.dumps(result, indent=1))
    lines = table(result)
    print("\n".join(lines))
    command = result.get("command", " ".join(["bench/speed.py", *sys.argv[1:]]))
    (RESULTS / f"{args.name}.md").write_text("# Inference speed by precision, ours vs spacy-transformers\n\n"
                                            f"    .venv/bin/python {command}\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
