"""A training step's memory follows the encoder's chunks, not the length of one Doc."""
import subprocess
import sys
from pathlib import Path

import spacy

from spacy_bertfam.encoders import piece_encoder
from spacy_bertfam.pipeline import encoder as encoder_component

from .pipelines import build, examples

BENCH = Path(__file__).parents[2] / "bench" / "memory_long_doc.py"


def test_update_on_one_very_long_doc_stays_under_a_memory_cap():
    # 50 URL-like words of ~400 pieces each: ~20,000 pieces, ~210 windows of MiniLM. Held
    # whole, a training step's activations would need about 10 GB; recomputed chunk by
    # chunk it stays near 2 GB (the full 50,000-piece case: bench/memory_long_doc.py).
    result = subprocess.run([sys.executable, str(BENCH), "--repeat", "200", "--no-ner"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    line = result.stdout.strip().splitlines()[-1]
    print(line)
    pieces = int(line.split("pieces ")[1].split()[0])
    peak = float(line.split("peak RSS ")[1].split()[0])
    assert pieces > 20_000
    assert peak < 3000, line


def test_prediction_gives_freed_pages_back_after_each_chunk_and_training_does_not(hf_bert_dir, monkeypatch):
    nlp = build(hf_bert_dir)
    nlp.get_pipe("bert_encoder").contract.batch_pieces = 64  # several chunks a call
    trims = []
    monkeypatch.setattr(piece_encoder, "trim_freed_memory", lambda: trims.append(1))
    texts = [" ".join(["the cat sat on the mat"] * n) for n in (1, 5, 9, 40)]
    list(nlp.pipe(texts))
    assert len(trims) > 1
    trims.clear()
    nlp("the cat sat")  # one chunk: its pages stay for the next call
    assert trims == []
    nlp.update(examples(nlp))
    assert trims == []


def test_trim_memory_false_gives_nothing_back_is_saved_and_can_be_overridden(hf_bert_dir, monkeypatch, tmp_path):
    trims = []
    for module in (piece_encoder, encoder_component):  # after chunks; between read-ahead buffers
        monkeypatch.setattr(module, "trim_freed_memory", lambda: trims.append(1))
    texts = [" ".join(["the cat sat on the mat"] * n) for n in (1, 5, 9, 40)] * 3

    def run(nlp):
        nlp.get_pipe("bert_encoder").contract.batch_pieces = 64  # several chunks a call, several calls
        list(nlp.pipe(texts))

    nlp = build(hf_bert_dir, encoder={"trim_memory": False})
    run(nlp)
    assert trims == []
    nlp.to_disk(tmp_path / "pipeline")
    run(spacy.load(tmp_path / "pipeline"))
    assert trims == []
    run(spacy.load(tmp_path / "pipeline", config={"components": {"bert_encoder": {"trim_memory": True}}}))
    assert len(trims) > 1
