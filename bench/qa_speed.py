"""Questions/s of span_qa against Hugging Face BertForQuestionAnswering, side by side in one run.

    .venv/bin/python bench/qa_speed.py OURS_PIPELINE HF_MODEL_DIR [--reps 3] [--threads 2]

OURS_PIPELINE: a trained `configs/qa.cfg` pipeline (e.g. model-last of `spacy train`);
HF_MODEL_DIR: a model saved by `bench/qa_reference.py --save`. Both answer the same dev
questions (SQuAD v1.1 part, articles 38:41 by default) from their raw text in 384-position
windows, 32 questions per batch, the systems alternating within each repetition; the time
covers everything from the strings to the answer texts (ours: QA Docs, encoder, head,
decoding; the reference: its tokenizer, model and the usual top-20 start/end search).
Prints the median questions/s of each, the ratio, and each system's EM/F1 on the questions
as a check that both really answered them.
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("ours", type=Path)
    parser.add_argument("reference", type=Path)
    parser.add_argument("--data", type=Path, default=ROOT / "assets" / "squad" / "squad-v1.1-dev-train-part.json")
    parser.add_argument("--dev-articles", default="38:41")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import spacy
    import torch
    from qa_reference import predict, questions, scores
    from transformers import BertForQuestionAnswering, BertTokenizerFast

    from spacy_bertfam.corpora.squad import make_qa_doc

    torch.set_num_threads(args.threads)
    items = questions(args.data, args.dev_articles)
    if not all(answers for _, _, answers in items):
        sys.exit("qa_speed times answerable questions (SQuAD v1.1 style): the dev articles chosen hold "
                 "unanswerable ones, whose scoring needs each system's null margins")
    nlp = spacy.load(args.ours)
    tok = BertTokenizerFast.from_pretrained(args.reference)
    model = BertForQuestionAnswering.from_pretrained(args.reference)

    def ours():
        docs = nlp.pipe((make_qa_doc(nlp, q, c) for q, c, _ in items), batch_size=args.batch)
        return [doc.spans["answer"][0].text if len(doc.spans["answer"]) else "" for doc in docs]

    def reference():
        return predict(model, tok, items, batch=args.batch)[0]

    timings = {"ours": [], "reference": []}
    answers = {}
    for _ in range(args.reps):
        for name, system in (("ours", ours), ("reference", reference)):
            start = time.perf_counter()
            answers[name] = system()
            timings[name].append(len(items) / (time.perf_counter() - start))
    result = {"questions": len(items), "threads": args.threads, "batch": args.batch, "reps": args.reps}
    for name in timings:
        result[name] = {"questions_per_s": round(statistics.median(timings[name]), 1),
                        "all": [round(t, 1) for t in timings[name]],
                        **{k: round(100 * v, 1) for k, v in scores(answers[name], None, items).items()}}
    result["ratio"] = round(result["ours"]["questions_per_s"] / result["reference"]["questions_per_s"], 2)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
