"""Print the pretraining figures of bench/pretrain_figures.sh as a Markdown table.

For each run under bench/runs: held-out figures at step 0 and at the end, the
training speed (mean of the logged pieces/s) and the training time.
"""
import json
import sys
from pathlib import Path
from statistics import mean

RUNS = Path(__file__).parent / "runs"
SHOWN = ["eval_mlm_loss", "eval_mlm_acc", "eval_nsp_acc", "eval_mlm_ppl"]


def summary(name: str) -> str:
    records = [json.loads(line) for line in (RUNS / name / "log.jsonl").read_text().splitlines() if line.strip()]
    before, after = records[0], [r for r in records if "eval_loss" in r][-1]
    speeds = [r["pieces_per_s"] for r in records if "pieces_per_s" in r]
    cells = [f"{before[k]:.3f} → {after[k]:.3f}" for k in SHOWN]
    return (f"| {name} | {after['step']} | {after['train_seconds'] / 60:.1f} | {mean(speeds):,.0f} | "
            + " | ".join(cells) + " |")


def main(names) -> None:
    print("| run | steps | train min | pieces/s | held-out MLM loss | MLM acc | NSP acc | MLM ppl |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        print(summary(name))


if __name__ == "__main__":
    main(sys.argv[1:] or ["bert_scratch", "minilm_adapted"])
