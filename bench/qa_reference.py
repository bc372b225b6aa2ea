"""A reference point for span_qa: Hugging Face BertForQuestionAnswering, same budget.

Same MiniLM-L6 weights, the same SQuAD v1.1 questions (articles 0:36 to train, 38:41
to score), the same number of steps and questions per step, peak rate, warm-up,
linear decay, weight decay, clipping and dropout as `configs/qa.cfg` run with
`--training.max_steps STEPS`; scored with the same SQuAD exact/F1 as span_qa.
It uses HF's standard SQuAD recipe (384 pieces, question first, overlapping
windows of the context, [CLS] as "no answer"), not our code.

    .venv/bin/python bench/qa_reference.py --steps 300 --lr 3e-4
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

from spacy_bertfam.pipeline.qa_scoring import _normalise, _token_f1  # noqa: E402
from spacy_bertfam.pretrained import pretrained_path  # noqa: E402

SQUAD = Path(__file__).resolve().parents[2] / "shared" / "data" / "qa" / "squad-v1.1-dev-train-part.json"
RESULTS = Path(__file__).resolve().parent / "results"


def questions(articles):
    data = json.loads(SQUAD.read_text(encoding="utf8"))["data"][articles]
    return [(qa["question"].strip(), p["context"], qa["answers"])
            for art in data for p in art["paragraphs"] for qa in p["qas"]]


def features(tok, items):
    enc = tok([q for q, _, _ in items], [c for _, c, _ in items], truncation="only_second", max_length=384,
              stride=128, return_overflowing_tokens=True, return_offsets_mapping=True, padding="longest")
    starts, ends = [], []
    for i, offsets in enumerate(enc["offset_mapping"]):
        _, _, answers = items[enc["overflow_to_sample_mapping"][i]]
        seq = enc.sequence_ids(i)
        ctx = [k for k, s in enumerate(seq) if s == 1]
        a_start = answers[0]["answer_start"]
        a_end = a_start + len(answers[0]["text"])
        s = e = 0  # [CLS]: the answer is not in this window
        if offsets[ctx[0]][0] <= a_start and offsets[ctx[-1]][1] >= a_end:
            s = next(k for k in ctx if offsets[k][1] > a_start)
            e = max(k for k in ctx if offsets[k][0] < a_end)
        starts.append(s)
        ends.append(e)
    return enc, starts, ends


def predict(model, tok, items, batch=32):
    model.eval()
    best = [(-np.inf, "") for _ in items]
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
            for s in ctx[np.argsort(-sl[ctx])[:20]]:
                for e in ctx[np.argsort(-el[ctx])[:20]]:
                    if s <= e < s + 30 and sl[s] + el[e] > best[q][0]:
                        offsets = enc["offset_mapping"][i]
                        best[q] = (sl[s] + el[e], chunk[q - b][1][offsets[s][0] : offsets[e][1]])
    return [text for _, text in best]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--per_step", type=int, default=13, help="questions per step (~2,000 words, as ours)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dev_questions", type=int, default=0, help="score only the first N (0: all)")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    path = pretrained_path("all-MiniLM-L6-v2")
    tok = BertTokenizerFast.from_pretrained(path)
    model = BertForQuestionAnswering.from_pretrained(path)
    train, dev = questions(slice(0, 36)), questions(slice(38, 41))
    dev = dev[: args.dev_questions or None]
    random.shuffle(train)
    decay = [p for n, p in model.named_parameters() if not n.endswith("bias") and "LayerNorm" not in n]
    rest = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}],
                            lr=args.lr, eps=1e-8)
    schedule = get_linear_schedule_with_warmup(opt, 50, args.steps)
    start = time.time()
    for step in range(args.steps):
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
    train_s = time.time() - start
    guesses = predict(model, tok, dev)
    exact = np.mean([max(float(_normalise(g) == _normalise(a["text"])) for a in answers)
                     for g, (_, _, answers) in zip(guesses, dev)])
    f1 = np.mean([max(_token_f1(g, a["text"]) for a in answers) for g, (_, _, answers) in zip(guesses, dev)])
    result = {"system": "hf_bert_for_qa", "steps": args.steps, "lr": args.lr, "seed": args.seed,
              "qa_exact": float(exact), "qa_f1": float(f1), "train_seconds": round(train_s), "dev_questions": len(dev)}
    print(json.dumps(result))
    RESULTS.mkdir(exist_ok=True)
    with (RESULTS / "qa_reference.jsonl").open("a") as f:
        f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
