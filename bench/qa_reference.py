"""A reference point for span_qa: Hugging Face BertForQuestionAnswering, same budget.

Same MiniLM-L6 weights, the same SQuAD v1.1 questions (articles 0:36 to train, 38:41
to score), the same number of steps and questions per step, peak rate, warm-up,
linear decay, weight decay, clipping and dropout as `configs/qa.cfg` run with
`--training.max_steps STEPS`; scored with the same SQuAD exact/F1 as span_qa.
It uses HF's standard SQuAD recipe (384 pieces, question first, overlapping
windows of the context, [CLS] as "no answer"), not our code. On SQuAD 2.0 data
(unanswerable questions: every window's label is [CLS]) the null score is the
smallest [CLS] start+end score over a question's windows, and the threshold tau on
(best span - null) is chosen on dev as the BERT paper does and as `evaluate-qa
--tune-threshold` does for ours; it also prints HasAns F1 and NoAns accuracy, and
the always-null baseline.

    .venv/bin/python bench/qa_reference.py --steps 300 --lr 3e-4
    .venv/bin/python bench/qa_reference.py --data ../shared/data/qa/squad-v2.0-dev-part-a.json \
        --train-articles 0:24 --dev-articles 24:28 --steps 200 --lr 3e-4
    # SQuAD 2.0 with v1.1 questions of other articles added to the training set (bench/results/qa.md)
    .venv/bin/python bench/qa_reference.py --data ../shared/data/qa/squad-v2.0-dev-part-a.json \
        --train-articles 0:24 --dev-articles 24:28 --steps 845 --lr 3e-4 \
        --extra-train ../shared/data/qa/squad-v1.1-dev-train-part.json:2:4 ...

A run of hours can stop and go on: with `--state DIR` the training state (weights,
optimizer, schedule, random state, step) is written there every 100 steps (`--state-every`), and a
later run with the same arguments continues from it.
"""
import argparse
import json
import os
import random
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import BertForQuestionAnswering, BertTokenizerFast, get_linear_schedule_with_warmup  # noqa: E402

from spacy_bertfam.pipeline.qa_scoring import _best_scores, answerable_auc, best_null_threshold  # noqa: E402
from spacy_bertfam.pretrained import pretrained_path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def questions(path: Path, articles: str):
    """(question, context, answers) of the articles START:END; unanswerable ones have no answers."""
    start, end = (int(x) for x in articles.split(":"))
    data = json.loads(path.read_text(encoding="utf8"))["data"][start:end]
    return [(qa["question"].strip(), p["context"], [] if qa.get("is_impossible") else qa["answers"])
            for art in data for p in art["paragraphs"] for qa in p["qas"]]


def features(tok, items):
    enc = tok([q for q, _, _ in items], [c for _, c, _ in items], truncation="only_second", max_length=384,
              stride=128, return_overflowing_tokens=True, return_offsets_mapping=True, padding="longest")
    starts, ends = [], []
    for i, offsets in enumerate(enc["offset_mapping"]):
        _, _, answers = items[enc["overflow_to_sample_mapping"][i]]
        seq = enc.sequence_ids(i)
        ctx = [k for k, s in enumerate(seq) if s == 1]
        s = e = 0  # [CLS]: no answer, or not in this window
        if not answers:
            starts.append(s)
            ends.append(e)
            continue
        a_start = answers[0]["answer_start"]
        a_end = a_start + len(answers[0]["text"])
        if offsets[ctx[0]][0] <= a_start and offsets[ctx[-1]][1] >= a_end:
            s = next(k for k in ctx if offsets[k][1] > a_start)
            e = max(k for k in ctx if offsets[k][0] < a_end)
        starts.append(s)
        ends.append(e)
    return enc, starts, ends


def predict(model, tok, items, batch=32):
    """Per question: the best span's text and its score minus the null score."""
    model.eval()
    best = [(-np.inf, "") for _ in items]
    null = [np.inf for _ in items]
    for b in range(0, len(items), batch):
        chunk = items[b : b + batch]
        enc, _, _ = features(tok, chunk)
        with torch.no_grad():
            out = model(input_ids=torch.tensor(enc["input_ids"]), attention_mask=torch.tensor(enc["attention_mask"]),
                        token_type_ids=torch.tensor(enc["token_type_ids"]))
        for i in range(len(enc["input_ids"])):
            q = b + enc["overflow_to_sample_mapping"][i]
            ctx = np.array([k for k, s in enumerate(enc.sequence_ids(i)) if s == 1])
            sl, el = out.start_logits[i].numpy(), out.end_logits[i].numpy()
            null[q] = min(null[q], float(sl[0] + el[0]))
            for s in ctx[np.argsort(-sl[ctx])[:20]]:
                for e in ctx[np.argsort(-el[ctx])[:20]]:
                    if s <= e < s + 30 and sl[s] + el[e] > best[q][0]:
                        offsets = enc["offset_mapping"][i]
                        best[q] = (sl[s] + el[e], chunk[q - b][1][offsets[s][0] : offsets[e][1]])
    return [text for _, text in best], [float(score) - n for (score, _), n in zip(best, null)]


def scores(guesses, margins, dev):
    """SQuAD exact/F1 (v2.0: an empty guess is right for an unanswerable question), with the
    HasAns/NoAns split and the margins' answerability AUC when the data has unanswerable questions."""
    rows = [_best_scores(g, [a["text"] for a in answers] or [""]) for g, (_, _, answers) in zip(guesses, dev)]
    exact, f1 = (np.asarray(c) for c in zip(*rows))
    has = np.asarray([bool(answers) for _, _, answers in dev])
    out = {"qa_exact": float(exact.mean()), "qa_f1": float(f1.mean())}
    if not has.all():
        out.update(qa_hasans_exact=float(exact[has].mean()), qa_hasans_f1=float(f1[has].mean()),
                   qa_noans_accuracy=float(exact[~has].mean()), always_null_f1=float((~has).mean()),
                   qa_answerable_auc=answerable_auc(margins, has))
    return out


def _run_args(args) -> dict:
    """The arguments a continued run must share with the one it continues."""
    return {k: str(v) for k, v in vars(args).items() if k not in ("state", "state_every", "save", "dev_questions")}


def keep_state(args, model, opt, schedule, step: int, seconds: float) -> None:
    args.state.mkdir(parents=True, exist_ok=True)
    state = {"args": _run_args(args), "step": step, "seconds": seconds, "model": model.state_dict(),
             "optimizer": opt.state_dict(), "schedule": schedule.state_dict(), "rng": torch.get_rng_state()}
    torch.save(state, args.state / "state.tmp")
    (args.state / "state.tmp").replace(args.state / "state.pt")


def resume(args, model, opt, schedule) -> tuple[int, float]:
    """(first step, training seconds already spent): from --state's file when there is one."""
    path = args.state / "state.pt" if args.state else None
    if path is None or not path.exists():
        return 0, 0.0
    state = torch.load(path, weights_only=True)
    if state["args"] != _run_args(args):
        raise SystemExit(f"{path} was written by a run with other arguments: {state['args']}. "
                         "Give the same arguments, or another --state folder.")
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    schedule.load_state_dict(state["schedule"])
    torch.set_rng_state(state["rng"])
    print(f"continuing from step {state['step']} ({state['seconds']:.0f} s spent)", flush=True)
    return state["step"], state["seconds"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--per_step", type=int, default=13, help="questions per step (~2,000 words, as ours)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dev_questions", type=int, default=0, help="score only the first N (0: all)")
    parser.add_argument("--data", type=Path, default=ROOT / "assets" / "squad" / "squad-v1.1-dev-train-part.json",
                        help="SQuAD v1.1 or v2.0 JSON")
    parser.add_argument("--train-articles", default="0:36")
    parser.add_argument("--dev-articles", default="38:41")
    parser.add_argument("--extra-train", action="append", default=[], metavar="JSON:START:END",
                        help="also train on these articles of another SQuAD file (repeatable)")
    parser.add_argument("--save", type=Path, help="save the trained model and tokenizer here")
    parser.add_argument("--state", type=Path, help="keep the training state here and continue from it")
    parser.add_argument("--state-every", type=int, default=100, help="steps between writes of --state")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    path = pretrained_path("all-MiniLM-L6-v2")
    tok = BertTokenizerFast.from_pretrained(path)
    model = BertForQuestionAnswering.from_pretrained(path)
    train, dev = questions(args.data, args.train_articles), questions(args.data, args.dev_articles)
    dev = dev[: args.dev_questions or None]
    for extra in args.extra_train:
        extra_path, start, end = extra.rsplit(":", 2)
        train += questions(Path(extra_path), f"{start}:{end}")
    random.shuffle(train)
    decay = [p for n, p in model.named_parameters() if not n.endswith("bias") and "LayerNorm" not in n]
    rest = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}],
                            lr=args.lr, eps=1e-8)
    schedule = get_linear_schedule_with_warmup(opt, 50, args.steps)
    first, done_s = resume(args, model, opt, schedule)
    start = time.time() - done_s
    for step in range(first, args.steps):
        model.train()
        chunk = [train[(step * args.per_step + k) % len(train)] for k in range(args.per_step)]
        enc, s, e = features(tok, chunk)
        out = model(input_ids=torch.tensor(enc["input_ids"]), attention_mask=torch.tensor(enc["attention_mask"]),
                    token_type_ids=torch.tensor(enc["token_type_ids"]),
                    start_positions=torch.tensor(s), end_positions=torch.tensor(e))
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        schedule.step()
        opt.zero_grad()
        if step % 50 == 0:
            print(f"step {step} loss {out.loss.item():.3f} ({time.time() - start:.0f} s)", flush=True)
        if args.state and (step + 1) % args.state_every == 0:
            keep_state(args, model, opt, schedule, step + 1, time.time() - start)
    train_s = time.time() - start
    if args.save:
        model.save_pretrained(args.save)
        tok.save_pretrained(args.save)
    start = time.time()
    guesses, margins = predict(model, tok, dev)
    predict_s = time.time() - start
    result = {"system": "hf_bert_for_qa", "data": args.data.name, "train_articles": args.train_articles,
              "extra_train": args.extra_train, "train_questions": len(train),
              "dev_articles": args.dev_articles, "steps": args.steps, "lr": args.lr, "seed": args.seed,
              "train_seconds": round(train_s), "dev_questions": len(dev),
              "questions_per_second": round(len(dev) / predict_s, 1)}
    if any(not answers for _, _, answers in dev):  # SQuAD 2.0: tau chosen on dev
        tau, _ = best_null_threshold([(m, g, [a["text"] for a in answers])
                                      for m, g, (_, _, answers) in zip(margins, guesses, dev)])
        guesses = [g if m > tau else "" for g, m in zip(guesses, margins)]
        result["null_threshold"] = tau
    result.update(scores(guesses, margins, dev))
    print(json.dumps(result))
    RESULTS.mkdir(exist_ok=True)
    with (RESULTS / "qa_reference.jsonl").open("a") as f:
        f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
