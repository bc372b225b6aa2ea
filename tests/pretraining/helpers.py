"""Running `bertfam-pretrain` configs from tests, with small overrides."""
from pathlib import Path
from typing import Any, Dict, List, Optional

from spacy_bertfam.pretraining.cli import run

CONFIGS = Path(__file__).parents[2] / "configs"

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


def write_mixed_corpus(path: Path, raw_text: Path, per_source: int = 100) -> Path:
    """A JSONL corpus whose documents (chapters, articles) alternate between four
    sources — Austen, Moby-Dick, the KJV Bible, WikiText — so that a NotNext B
    often differs in style from A: a signal a tiny model picks up in a few hundred steps."""
    import json
    from itertools import islice

    from spacy_bertfam.pretraining.documents import DocumentReader

    names = ["janeausten_6novels.txt", "mobydick.txt", "kjv_bible.txt", "wikitext2_valid.tokens.txt"]
    sources = [list(islice(DocumentReader([raw_text / n], part="all").documents(False), per_source)) for n in names]
    with path.open("w", encoding="utf8") as f:
        for group in zip(*sources):
            for _, text in group:
                f.write(json.dumps({"text": text}) + "\n")
    return path
