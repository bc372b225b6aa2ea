"""ELMo's biLM objective: forward and backward word-level LMs over a character-CNN input.

Words are spaCy tokens (the blank English tokenizer, whitespace tokens dropped), so
pretraining sees the tokens the `elmo_features` component will see; the text is cut
into sequences of `sequence_length` words, each wrapped in <S> ... </S>. The softmax
is over the `n_words` most frequent words (+ <S>, </S>, <UNK>); "adaptive" keeps it
cheap for large vocabularies.
"""
from collections import Counter
from pathlib import Path
from typing import Dict, Iterator, List, Sequence, Tuple

import numpy as np
import spacy
import torch

from ..convert import Checkpoint, save_checkpoint
from ..models.elmo import ElmoBiLM, ElmoConfig
from ..tokenization.characters import BOS_TOKEN, EOS_TOKEN, batch_char_ids
from .loop import LoopSettings, perplexity, train
from .text import read_text, split_heldout

UNK = "<UNK>"
Batch = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # char ids, word ids, mask


def words_of(text: str, chunk_chars: int = 200_000) -> List[str]:
    nlp = spacy.blank("en")
    chunks = [text[i : i + chunk_chars] for i in range(0, len(text), chunk_chars)]
    return [t.text for doc in nlp.pipe(chunks) for t in doc if not t.is_space]


def build_vocab(words: Sequence[str], size: int) -> Dict[str, int]:
    vocab = {BOS_TOKEN: 0, EOS_TOKEN: 1, UNK: 2}
    for word, _ in Counter(words).most_common(size - len(vocab)):
        vocab.setdefault(word, len(vocab))
    return vocab


def sequences(words: Sequence[str], length: int) -> List[List[str]]:
    return [list(words[i : i + length]) for i in range(0, len(words) - length + 1, length)]


def make_batch(seqs: Sequence[Sequence[str]], vocab: Dict[str, int], max_chars: int) -> Batch:
    chars = torch.from_numpy(batch_char_ids(seqs, max_chars))
    rows = [[BOS_TOKEN, *s, EOS_TOKEN] for s in seqs]
    T = chars.shape[1]
    ids = torch.tensor([[vocab.get(w, vocab[UNK]) for w in r] + [0] * (T - len(r)) for r in rows])
    mask = torch.tensor([[True] * len(r) + [False] * (T - len(r)) for r in rows])
    return chars, ids, mask


def bilm_loss(model: ElmoBiLM, batch: Batch) -> Tuple[torch.Tensor, int]:
    chars, ids, mask = batch
    out, _ = model(chars, mask)
    fwd, bwd = model.lm_loss(out, ids, mask)
    return fwd + bwd, int(mask.sum())


@torch.no_grad()
def direction_nll(model: ElmoBiLM, data: List[Batch]) -> Tuple[float, float]:
    model.eval()
    totals = np.zeros(2)
    for batch in data:
        out, _ = model(batch[0], batch[2])
        totals += [float(x) for x in model.lm_loss(out, batch[1], batch[2])]
    return tuple(totals / max(len(data), 1))


def pretrain_elmo(
    output: Path,
    train_files: List[Path],
    *,
    config: ElmoConfig,
    settings: LoopSettings,
    sequence_length: int = 20,
    batch_size: int = 32,
    heldout_fraction: float = 0.02,
    max_eval_batches: int = 20,
    seed: int = 0,
) -> List[Dict[str, float]]:
    """Pretrain the biLM from scratch; save it (with its word vocabulary) in our format."""
    torch.manual_seed(seed)
    texts = [split_heldout(read_text(f), heldout_fraction) for f in train_files]
    train_words = [w for t, _ in texts for w in words_of(t)]
    heldout_words = [w for _, h in texts for w in words_of(h)]
    vocab = build_vocab(train_words, config.n_words)
    config.n_words = len(vocab)
    model = ElmoBiLM(config)
    train_seqs = sequences(train_words, sequence_length)
    heldout = [make_batch(s, vocab, config.max_chars)
               for s in _chunk(sequences(heldout_words, sequence_length), batch_size)][:max_eval_batches]
    rng = np.random.default_rng(seed)

    def stream() -> Iterator[Batch]:
        while True:
            order = rng.permutation(len(train_seqs))
            for start in range(0, len(order) - batch_size + 1, batch_size):
                yield make_batch([train_seqs[i] for i in order[start : start + batch_size]], vocab, config.max_chars)

    def evaluate(m: ElmoBiLM) -> Dict[str, float]:
        fwd, bwd = direction_nll(m, heldout)
        return {"forward_ppl": perplexity(fwd), "backward_ppl": perplexity(bwd)}

    records = train(model, stream(), bilm_loss, evaluate, settings, log_path=output / "log.jsonl", unit="words")
    final = output / "final"
    save_checkpoint(final, Checkpoint("elmo", config, model.state_dict(), None, "pretrain-elmo"))
    (final / "words.txt").write_text("\n".join(vocab), encoding="utf8")
    return records


def _chunk(items: List, size: int) -> List[List]:
    return [items[i : i + size] for i in range(0, len(items), size)]
