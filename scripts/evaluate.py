"""Score one trained pipeline on the workflow's dev sets: `metrics/<name>.json` for the report.

Each task the pipeline has is scored on its own dev set (ner: WNUT-17, textcat: Banking77,
span_qa: SQuAD) with `nlp.evaluate`, which also times it (words/s); the file adds what the
report needs beside the scores: family, setup, parameter count and the pretraining budget.
"""
import argparse
import json
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
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model")
    parser.add_argument("output")
    parser.add_argument("--family", required=True, choices=["bert", "elmo", "gpt"])
    parser.add_argument("--setup", required=True, help="e.g. 'fine-tuned', 'feature-based', 'joint'")
    parser.add_argument("--pretraining", help="the bertfam-pretrain output folder the encoder started from")
    parser.add_argument("--start", default="", help="what the pretraining started from, e.g. all-MiniLM-L6-v2")
    parser.add_argument("--ner", default="corpus/dev/ner.spacy")
    parser.add_argument("--textcat", default="corpus/dev/textcat.spacy")
    parser.add_argument("--qa", default="corpus/dev/qa.spacy")
    parser.add_argument("--limit", type=int, default=0, help="score only the first N examples (0: all)")
    args = parser.parse_args()
    result = evaluate(args.model, {"ner": args.ner, "textcat": args.textcat, "qa": args.qa}, args.limit)
    result.update(model=args.model, family=args.family, setup=args.setup, start=args.start,
                  pretraining=pretraining(args.pretraining))
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    srsly.write_json(args.output, result)
    print(args.output, json.dumps(result["scores"]))


if __name__ == "__main__":
    main()
