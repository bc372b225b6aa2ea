"""Running `bertfam-pretrain` configs from tests, with small overrides."""
from pathlib import Path
from typing import Any, Dict, List, Optional

from spacy_bertfam.pretraining.cli import run

from ..conftest import ASSETS, TEST_DATA

CONFIGS = Path(__file__).parents[2] / "configs"

# Four styles of text: Austen and Moby-Dick (assets/raw_text), the first 61 chapters of the
# KJV Bible and all of WikiText-2 valid (61 articles) (tests/data/raw_text).
MIXED_SOURCES = [ASSETS / "raw_text" / "janeausten_6novels.txt", ASSETS / "raw_text" / "mobydick.txt",
                 TEST_DATA / "raw_text" / "kjv_bible.genesis-exodus11.txt",
                 TEST_DATA / "raw_text" / "wikitext2_valid.tokens.txt"]

# A WordPiece vocabulary of 2,000 pieces trained on that corpus, so that a learning test's run is
# the same every time: `tokenizers`' trainer picks among pieces of equal count in hash-map order,
# so a vocabulary trained in the test differed by a piece at the cut-off from run to run.
MIXED_VOCAB = TEST_DATA / "pretraining" / "wordpiece_mixed_2000.txt"

TINY_BERT = {
    "objective.n_pieces": 1000, "objective.hidden_width": 32, "objective.n_layers": 2, "objective.n_heads": 2,
    "objective.intermediate_width": 64, "objective.n_positions": 64, "objective.max_length": 48,
    "objective.heldout_instances": 128, "training.batch_size": 16, "training.warmup_steps": 5,
    "training.lr": 0.002, "training.shuffle_buffer": 300, "training.log_every": 1,
}


def pretrain(family: str, text: Path, output: Path, overrides: Optional[Dict[str, Any]] = None,
             **kwargs: Any) -> List[Dict[str, Any]]:
    """`python -m spacy bertfam-pretrain configs/pretrain_<family>.cfg output` on `text`."""
    settings = {"paths.train": str(text), **(overrides or {})}
    return run(CONFIGS / f"pretrain_{family}.cfg", Path(output), settings, **kwargs)


def write_mixed_corpus(path: Path, per_source: int = 100) -> Path:
    """A JSONL corpus whose documents (chapters, articles) alternate between four
    sources — Austen, Moby-Dick, the KJV Bible, WikiText — so that a NotNext B
    often differs in style from A: a signal a tiny model picks up in a few hundred steps.
    It stops with the shortest source: WikiText-2 valid's 61 articles (61 documents of each)."""
    import json
    from itertools import islice

    from spacy_bertfam.pretraining.documents import DocumentReader

    sources = [list(islice(DocumentReader([f], part="all").documents(False), per_source)) for f in MIXED_SOURCES]
    with path.open("w", encoding="utf8") as f:
        for group in zip(*sources):
            for _, text in group:
                f.write(json.dumps({"text": text}) + "\n")
    return path
