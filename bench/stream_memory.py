"""Peak RSS while `nlp.pipe` streams 1,000,000 tokens through the shipped NER pipeline.

The pipeline is configs/ner.cfg (bert_encoder + ner) initialised from MiniLM; the stream
is WNUT-17 (train + dev) followed by the books in assets/raw_text, cut into paragraphs,
repeated until 1M tokens, batch 64. Prints RSS (now, its peak since the stream began — the
pipeline's set-up is left out — and its peak within the last 100k tokens: VmHWM reset after
each reading, and glibc's blocks in use: live memory, without the freed blocks glibc keeps)
every 100k tokens, with and without `drop_outputs`, and the growth after
warm-up (from 300k tokens on: the tweets, then the first books), of the running peak and as
the trend of the windows' peaks; and the tokens of each window's heaviest spaCy batch, since what
the Docs of a batch hold in flight lifts the peak (a running peak rises where the stream's
heaviest batch comes, whether memory grows or not). `--repeat N` streams only the first N tokens, over and
over; `--shuffle` mixes tweets and paragraphs in a seeded random order (in the books'
order Moby-Dick's longer paragraphs come last).
`python bench/stream_memory.py [--tokens 1000000] [--settings keep drop ...]`: a setting is
keep / drop (drop_outputs) with "+free" to have glibc return freed blocks of >= 1 MiB
(processes.return_freed_memory) from the start, and/or "+zone" to run the stream in spaCy's
`nlp.memory_zone()` blocks of `--zone-tokens` tokens (what a long-running service does: the
strings and lexemes of each block's new words are freed at its end; without zones spaCy's
vocabulary grows with every new word), and/or "+bf16" to predict with the encoder's
`precision = "bf16"`, and/or "+top" to have the NER listener read the top layer alone (384 wide)
instead of the shipped config's last four layers concatenated (1,536 wide: every Doc in flight
then holds a quarter of the layers, and the NER its quarter of the listener's output); each prints
its words/s too. Each setting
runs in its own process, which inherits the environment: e.g. `MALLOC_MMAP_THRESHOLD_=4194304`
to measure glibc with a fixed 4 MiB mmap threshold, or
`LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2` to measure jemalloc.
"""
import argparse
import ctypes
import json
import os
import random
import subprocess
import sys
import time
from contextlib import nullcontext
from itertools import cycle
from pathlib import Path
from typing import Optional

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BATCH = 64  # nlp.pipe's batch_size


def rss_mb(field: str = "VmRSS") -> float:
    """The process's resident memory now (VmRSS) or its peak so far (VmHWM), in MB."""
    with open(f"/proc/{os.getpid()}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field)) / 1024


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]


def _mallinfo2():
    """glibc's mallinfo2, or None where there is no glibc 2.33+."""
    try:
        function = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return None
    function.restype = _MallInfo2
    return function


_MALLINFO2 = _mallinfo2()


def glibc_in_use_mb() -> Optional[float]:
    """What glibc's allocator has handed out and not had back (heap blocks in use plus mmapped
    blocks), in MB: live memory, without the freed blocks glibc keeps. None under another
    allocator (e.g. jemalloc preloaded), whose mallinfo2 would read zeros."""
    if _MALLINFO2 is None:
        return None
    info = _MALLINFO2()
    used = info.uordblks + info.hblkhd
    return used / 2**20 if used else None


def restart_peak() -> None:
    """Reset VmHWM to the RSS now (Linux's clear_refs), so the next reading is this window's peak."""
    with open(f"/proc/{os.getpid()}/clear_refs", "w") as f:
        f.write("5")


def texts(repeat: int = 0, shuffle: bool = False):
    """WNUT-17 tweets, then book paragraphs, forever (repeat > 0: only their first `repeat`
    tokens, over and over, to tell growth from new, longer batches; shuffle: tweets and
    paragraphs in a seeded random order, so that what comes late is like what came early)."""
    import spacy

    from spacy_bertfam.corpora.conll import read_conll_ner

    vocab = spacy.blank("en").vocab
    tweets = [d.text for name in ("wnut17train.conll", "emerging.dev.conll")
              for d in read_conll_ner(ROOT / "assets" / "wnut17" / name, vocab)]
    paragraphs = [p.strip() for book in ("janeausten_6novels.txt", "mobydick.txt")
                  for p in (ROOT / "assets" / "raw_text" / book).read_text(encoding="utf8").split("\n\n") if p.strip()]
    pool = tweets + paragraphs
    if shuffle:
        random.Random(0).shuffle(pool)
    if repeat:
        total = np.cumsum([len(t.split()) for t in pool])
        pool = pool[: int(np.searchsorted(total, repeat)) + 1]
    return cycle(pool)


def run(tokens: int, drop_outputs: bool, free_blocks: bool, repeat: int = 0, shuffle: bool = False,
        zone_tokens: int = 0, precision: str = "fp32", top_layer: bool = False) -> dict:
    import spacy
    from spacy.training import Example

    from spacy_bertfam.processes import return_freed_memory

    if free_blocks:
        return_freed_memory()
    config = spacy.util.load_config(ROOT / "configs" / "ner.cfg")
    config["components"]["bert_encoder"]["drop_outputs"] = drop_outputs
    config["components"]["bert_encoder"]["precision"] = precision
    if top_layer:
        config["components"]["ner"]["model"]["tok2vec"].update({"layers": [-1], "width": 384})
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    example = Example.from_dict(nlp.make_doc("Alex moved to Chicago"), {"entities": [(0, 4, "person"), (14, 21, "location")]})
    nlp.initialize(lambda: [example])
    stream, seen, mark, series = texts(repeat, shuffle), 0, 100_000, []

    def part():
        """Texts until the stream's end or, with zones, this zone's (counted in the tokens
        yielded back: the pipe reads a buffer ahead, so a part runs a little past its end)."""
        end = min(tokens, seen + zone_tokens) if zone_tokens else tokens
        while seen < end:
            yield next(stream)

    start, peak = time.perf_counter(), 0.0
    heaviest = 0  # tokens of the heaviest of spaCy's batches of BATCH Docs in this window
    restart_peak()
    while seen < tokens:
        batch_docs = batch_tokens = 0  # each nlp.pipe (a zone's) starts its batches anew
        with nlp.memory_zone() if zone_tokens else nullcontext():
            for doc in nlp.pipe(part(), batch_size=BATCH):
                seen += len(doc)
                batch_docs, batch_tokens = batch_docs + 1, batch_tokens + len(doc)
                if batch_docs == BATCH:
                    heaviest = max(heaviest, batch_tokens)
                    batch_docs = batch_tokens = 0
                if seen >= mark:
                    window = rss_mb("VmHWM")
                    peak = max(peak, window)
                    in_use = glibc_in_use_mb()
                    series.append((mark, round(rss_mb()), round(peak), round(window), in_use and round(in_use),
                                   heaviest))
                    restart_peak()
                    heaviest = 0
                    mark += 100_000
    return {"series": series, "words_per_s": seen / (time.perf_counter() - start), "strings": len(nlp.vocab.strings)}


def trend(values) -> float:
    """The least-squares line's change from the first value's position to the last, in % of
    the mean: a running peak only rises, so it mixes the heaviest batch seen so far into
    growth; a trend of the windows' peaks does not."""
    x = np.arange(len(values), dtype=float)
    slope = np.polyfit(x, np.asarray(values, dtype=float), 1)[0]
    return 100 * slope * (len(values) - 1) / float(np.mean(values))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--settings", nargs="+", default=["keep", "drop"])
    parser.add_argument("--repeat", type=int, default=0, help="stream the first N tokens over and over")
    parser.add_argument("--shuffle", action="store_true", help="tweets and paragraphs in a seeded random order")
    parser.add_argument("--zone-tokens", type=int, default=10_000,
                        help="with a +zone setting, tokens per nlp.memory_zone() block")
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:  # one setting per process, so the runs do not share memory
        modifiers = args.child.split("+")[1:]
        print(json.dumps(run(args.tokens, args.child.startswith("drop"), "free" in modifiers, args.repeat,
                             args.shuffle, args.zone_tokens if "zone" in modifiers else 0,
                             "bf16" if "bf16" in modifiers else "fp32", "top" in modifiers)))
        return
    for setting in args.settings:
        out = subprocess.run([sys.executable, __file__, "--tokens", str(args.tokens), "--repeat", str(args.repeat),
                              "--zone-tokens", str(args.zone_tokens), "--child", setting] + ["--shuffle"] * args.shuffle,
                             capture_output=True, text=True, check=True).stdout
        result = json.loads(out.strip().splitlines()[-1])
        for column, name in ((1, "RSS"), (2, "peak RSS"), (3, "peak RSS of each 100k-token window"),
                             (4, "glibc's blocks in use")):
            series = [row[column] for row in result["series"]]
            if None in series:  # another allocator
                continue
            warm = series[min(2, len(series) - 1)]
            print(f"{setting}: {name} (MB) every 100k tokens: {series}; growth after the first 300k: "
                  f"{100 * (series[-1] - warm) / warm:+.1f}%", flush=True)
        print(f"{setting}: tokens of the heaviest {BATCH}-Doc batch of each 100k-token window: "
              f"{[row[5] for row in result['series']]}", flush=True)
        windows = [row[3] for row in result["series"]][2:]
        if len(windows) > 2:
            print(f"{setting}: trend of the window peaks after the first 300k (least-squares line, "
                  f"change over those {len(windows) - 1}00k tokens): {trend(windows):+.1f}%", flush=True)
        print(f"{setting}: {result['words_per_s']:,.0f} words/s; {result['strings']:,} strings in the vocab at the end",
              flush=True)


if __name__ == "__main__":
    main()
