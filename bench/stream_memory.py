"""Peak RSS while `nlp.pipe` streams 1,000,000 tokens through the shipped NER pipeline.

The pipeline is configs/ner.cfg (bert_encoder + ner) initialised from MiniLM; the stream
is WNUT-17 (train + dev) followed by the books in assets/raw_text, cut into paragraphs,
repeated until 1M tokens, batch 64. Prints RSS every 100k tokens, with and without
`drop_outputs`, and the growth after warm-up (the first 100k tokens).
`python bench/stream_memory.py [--tokens 1000000]`
"""
import argparse
import json
import os
import subprocess
import sys
from itertools import cycle
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def texts():
    """WNUT-17 tweets, then book paragraphs, forever."""
    import spacy

    from spacy_bertfam.corpora.conll import read_conll_ner

    vocab = spacy.blank("en").vocab
    tweets = [d.text for name in ("wnut17train.conll", "emerging.dev.conll")
              for d in read_conll_ner(ROOT / "assets" / "wnut17" / name, vocab)]
    paragraphs = [p.strip() for book in ("janeausten_6novels.txt", "mobydick.txt")
                  for p in (ROOT / "assets" / "raw_text" / book).read_text(encoding="utf8").split("\n\n") if p.strip()]
    return cycle(tweets + paragraphs)


def run(tokens: int, drop_outputs: bool) -> list:
    import spacy
    from spacy.training import Example

    config = spacy.util.load_config(ROOT / "configs" / "ner.cfg")
    config["components"]["bert_encoder"]["drop_outputs"] = drop_outputs
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    example = Example.from_dict(nlp.make_doc("Alex moved to Chicago"), {"entities": [(0, 4, "person"), (14, 21, "location")]})
    nlp.initialize(lambda: [example])
    stream, seen, mark, series = texts(), 0, 100_000, []

    def limited():
        nonlocal seen
        for text in stream:
            if seen >= tokens:
                return
            yield text

    for doc in nlp.pipe(limited(), batch_size=64):
        seen += len(doc)
        if seen >= mark:
            series.append((mark, round(rss_mb())))
            mark += 100_000
    return series


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--child", choices=["keep", "drop"])
    args = parser.parse_args()
    if args.child:  # one setting per process, so the two runs do not share memory
        print(json.dumps(run(args.tokens, args.child == "drop")))
        return
    for setting in ("keep", "drop"):
        out = subprocess.run([sys.executable, __file__, "--tokens", str(args.tokens), "--child", setting],
                             capture_output=True, text=True, check=True).stdout
        series = json.loads(out.strip().splitlines()[-1])
        first, last = series[0][1], series[-1][1]
        print(f"drop_outputs={setting == 'drop'}: RSS (MB) every 100k tokens: {[r for _, r in series]}; "
              f"growth after the first 100k: {100 * (last - first) / first:+.1f}%")


if __name__ == "__main__":
    main()
