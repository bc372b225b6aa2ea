"""The causal language-model objective (GPT): predict every next piece."""
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import torch
import torch.nn.functional as F

from ..convert import Checkpoint, save_checkpoint
from ..models.gpt import GptConfig, GptDecoder
from ..tokenization import PieceTokenizer, byte_bpe_from_files, train_byte_bpe
from ..tokenization.bpe import END_OF_TEXT
from .loop import LoopSettings, perplexity, train
from .text import batches, blocks, piece_stream, read_text, split_heldout


def causal_lm_loss(model: GptDecoder, batch: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of each piece given the pieces before it; batch (B, T + 1)."""
    hidden = model(batch[:, :-1]).layers[-1]
    logits = model.logits(hidden)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))


@torch.no_grad()
def mean_nll(model: GptDecoder, data: np.ndarray, batch_size: int = 32) -> float:
    """Mean next-piece NLL over blocks (each block scored on its own)."""
    model.eval()
    total, count = 0.0, 0
    for start in range(0, len(data), batch_size):
        batch = torch.from_numpy(data[start : start + batch_size])
        loss = causal_lm_loss(model, batch)
        n = batch[:, 1:].numel()
        total += float(loss) * n
        count += n
    return total / max(count, 1)


def pretrain_gpt(
    output: Path,
    train_files: List[Path],
    *,
    eval_files: Dict[str, Path],
    config: GptConfig,
    settings: LoopSettings,
    vocab: Optional[Path] = None,
    block_size: int = 128,
    batch_size: int = 16,
    heldout_fraction: float = 0.02,
    max_eval_blocks: int = 200,
    seed: int = 0,
) -> List[Dict[str, float]]:
    """Pretrain a GPT decoder from scratch and save it in our checkpoint format.

    vocab: a GPT-2 vocabulary folder (encoder.json + vocab.bpe); None trains a new
        byte-level BPE of `config.n_pieces` pieces on the training text.
    eval_files: extra held-out texts by name (e.g. WikiText-2 test); the last
        `heldout_fraction` of every training file is held out too.
    """
    torch.manual_seed(seed)
    texts = [read_text(f) for f in train_files]
    splits = [split_heldout(t, heldout_fraction) for t in texts]
    train_texts = [a for a, _ in splits]
    if vocab is not None:
        tokenizer: PieceTokenizer = byte_bpe_from_files(vocab / "encoder.json", vocab / "vocab.bpe")
    else:
        tokenizer = train_byte_bpe(train_texts, vocab_size=config.n_pieces)
    if tokenizer.n_pieces != config.n_pieces:
        raise ValueError(f"The vocabulary has {tokenizer.n_pieces} pieces; set n_pieces = {tokenizer.n_pieces}")
    eot = tokenizer.piece_id(END_OF_TEXT)
    length = block_size + 1
    train_data = blocks(piece_stream(tokenizer, train_texts, separator=eot), length)
    evals = {"heldout": blocks(piece_stream(tokenizer, [b for _, b in splits], separator=eot), length)}
    for name, path in eval_files.items():
        evals[name] = blocks(piece_stream(tokenizer, [read_text(path)], separator=eot), length)
    evals = {k: v[:max_eval_blocks] for k, v in evals.items()}
    model = GptDecoder(config)
    rng = np.random.default_rng(seed)
    stream = (torch.from_numpy(b) for b in batches(train_data, batch_size, rng))

    def evaluate(m: GptDecoder) -> Dict[str, float]:
        return {f"{name}_ppl": perplexity(mean_nll(m, data)) for name, data in evals.items()}

    records = train(model, stream, lambda m, b: (causal_lm_loss(m, b), b[:, 1:].numel()), evaluate, settings,
                    log_path=output / "log.jsonl", unit="pieces")
    save_checkpoint(output / "final", Checkpoint("gpt", config, model.state_dict(), tokenizer, "pretrain-gpt"))
    return records
