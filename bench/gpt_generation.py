"""Greedy generation speed of our GPT decoder, with and without the key/value cache.

    .venv/bin/python bench/gpt_generation.py [--checkpoint training/gpt_pretrain/final]

Sizes: the default CPU pretraining config (from the checkpoint if given, else random
weights) and GPT-2 small (124M, random weights: speed does not depend on them).
2 torch threads, batch of 1 and of 8 prompts of 16 pieces, 64 new pieces.
"""
import argparse
import time

import torch

from spacy_bertfam.convert import load_state, read_checkpoint
from spacy_bertfam.models.gpt import GptConfig, GptDecoder, generate


def tokens_per_second(model: GptDecoder, batch: int, use_cache: bool, new: int = 64) -> float:
    ids = torch.randint(1, model.config.n_pieces, (batch, 16))
    mask = torch.ones_like(ids)
    list(generate(model, ids, mask, max_new_tokens=4, use_cache=use_cache))  # warm-up
    start = time.perf_counter()
    list(generate(model, ids, mask, max_new_tokens=new, use_cache=use_cache))
    return batch * new / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint")
    args = parser.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    models = {}
    if args.checkpoint:
        ckpt = read_checkpoint(args.checkpoint)
        models["cpu-default (pretrained)"] = GptDecoder(ckpt.config)
        load_state(models["cpu-default (pretrained)"], ckpt.state, source=ckpt.source)
    else:
        models["cpu-default (random)"] = GptDecoder(GptConfig(n_pieces=8000, hidden_width=256, n_layers=4,
                                                              n_heads=4, intermediate_width=1024, n_positions=256))
    models["gpt2-small size (random)"] = GptDecoder(GptConfig())
    print("| model | batch | tokens/s with cache | tokens/s without cache | speed-up |")
    print("|---|---|---|---|---|")
    for name, model in models.items():
        for batch in (1, 8):
            cached = tokens_per_second(model, batch, True)
            full = tokens_per_second(model, batch, False)
            print(f"| {name} | {batch} | {cached:.0f} | {full:.0f} | {cached / full:.1f}× |", flush=True)


if __name__ == "__main__":
    main()
