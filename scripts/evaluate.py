"""Score the workflow's trained pipelines on its dev sets: `metrics/<run>.json` for the report.

`python scripts/evaluate.py configs/runs.yml` scores every run the file lists (or those named
with --only), one after another in this one process: a process per run spent most of its time
starting torch. Each task a pipeline has is scored on its own dev set (ner: WNUT-17, textcat:
Banking77, span_qa: SQuAD) with `nlp.evaluate`, which also times it (words/s); the file adds
what the report needs beside the scores: family, setup, parameter count and the pretraining
budget.
"""
import argparse
import json
import sys
from pathlib import Path
from typing import Dict, Optional

import spacy
import srsly
from spacy.training import Corpus

from spacy_bertfam.corpora.squad import qa_corpus
from spacy_bertfam.encoders import torch_encoder
from spacy_bertfam.pipeline.encoder import EncoderComponent

TASKS = {"ner": "ner", "textcat": "textcat", "partial_textcat": "textcat", "span_qa": "qa"}
KEEP = {"ner": ("ents_p", "ents_r", "ents_f"),
        "textcat": ("cats_score", "cats_micro_f", "cats_macro_f"),
        "qa": ("qa_exact", "qa_f1")}


def n_params(nlp) -> int:
    """Weights of the encoder(s) (torch) and of the heads (thinc)."""
    total = 0
    for _, component in nlp.pipeline:
        if isinstance(component, EncoderComponent):
            total += sum(p.numel() for p in torch_encoder(component.model).parameters())
        elif hasattr(component, "model"):  # thinc weights, and torch ones inside wrapped heads
            for node in component.model.walk():
                total += sum(node.get_param(name).size for name in node.param_names if node.has_param(name))
                total += sum(p.numel() for shim in node.shims for p in shim._model.parameters())
    return total


def pretraining(path: Optional[str]) -> Optional[Dict]:
    """Steps and minutes of a bertfam-pretrain run, from its log."""
    if not path:
        return None
    lines = (Path(path) / "log.jsonl").read_text().splitlines()
    last = json.loads(lines[-1])
    return {"steps": last["step"], "minutes": round(last.get("train_seconds", 0.0) / 60, 1)}


def evaluate(model: str, dev: Dict[str, str], limit: int) -> Dict[str, Dict]:
    nlp = spacy.load(model)
    scores = {}
    for factory in nlp.pipe_factories.values():
        task = TASKS.get(factory)
        if task is None:
            continue
        if task == "qa":
            examples = list(qa_corpus(Path(dev["qa"]), limit=limit)(nlp))
        else:
            examples = list(Corpus(dev[task], limit=limit)(nlp))
        result = nlp.evaluate(examples)
        scores[task] = {**{k: result[k] for k in KEEP[task]}, "words_per_s": result["speed"],
                        "examples": len(examples)}
    return {"scores": scores, "params": n_params(nlp), "pipeline": nlp.pipe_names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", help="YAML: run name -> family, setup, pretraining, start (configs/runs.yml)")
    parser.add_argument("--only", nargs="+", metavar="RUN", help="score only these runs of the file")
    parser.add_argument("--training", default="training", help="where training/<run>/model-last are")
    parser.add_argument("--metrics", default="metrics", help="where metrics/<run>.json are written")
    parser.add_argument("--ner", default="corpus/dev/ner.spacy")
    parser.add_argument("--textcat", default="corpus/dev/textcat.spacy")
    parser.add_argument("--qa", default="corpus/dev/qa.spacy")
    parser.add_argument("--limit", type=int, default=0, help="score only the first N examples (0: all)")
    args = parser.parse_args()
    runs = srsly.read_yaml(args.runs)
    unknown = sorted(set(args.only or ()) - set(runs))
    if unknown:
        sys.exit(f"--only names runs that {args.runs} does not list: {unknown}; it has {sorted(runs)}")
    for name in args.only or runs:
        run = runs[name]
        model = Path(args.training) / name / "model-last"
        result = evaluate(str(model), {"ner": args.ner, "textcat": args.textcat, "qa": args.qa}, args.limit)
        result.update(model=model.as_posix(), family=run["family"], setup=run["setup"], start=run.get("start", ""),
                      pretraining=pretraining(run.get("pretraining")))
        output = Path(args.metrics) / f"{name}.json"
        output.parent.mkdir(parents=True, exist_ok=True)
        srsly.write_json(output, result)
        print(output, json.dumps(result["scores"]), flush=True)


if __name__ == "__main__":
    main()
