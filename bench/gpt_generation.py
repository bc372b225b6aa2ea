"""Greedy generation speed of our GPT decoder against Hugging Face `generate`, same weights.

    .venv/bin/python bench/gpt_generation.py [--reps 3]      # needs the [peer] extra

Sizes: the default CPU pretraining config (configs/pretrain_gpt.cfg) and GPT-2 small
(124M), both with random weights (speed does not depend on them): a Hugging Face
GPT2LMHeadModel is built and its weights are mapped into ours with the checkpoint key
map, so both decode the same model; the greedy pieces are checked to be identical.
2 torch threads, batches of 1 and 8 prompts of 16 pieces, 64 new pieces; the systems
alternate within each repetition, the figure is the median. Ours is also timed without
its key/value cache. Results: bench/results/gpt_generation.md.
"""
import argparse
import statistics
import time
from functools import partial
from pathlib import Path
from typing import Callable, Dict, List

import torch

from spacy_bertfam.convert.hf_gpt import GPT2_KEY_MAP, IGNORED, convert_config
from spacy_bertfam.convert.keymap import rename_to_ours
from spacy_bertfam.models.gpt import GptDecoder, generate

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results" / "gpt_generation.md"
NEW = 64


def both_models(**sizes):
    """A random Hugging Face GPT-2 LM of these sizes and our decoder holding its weights."""
    from transformers import GPT2Config, GPT2LMHeadModel

    hf = GPT2LMHeadModel(GPT2Config(**sizes)).eval()
    ours = GptDecoder(convert_config(hf.config.to_dict()))
    ours.load_state_dict(rename_to_ours(hf.transformer.state_dict(), GPT2_KEY_MAP, ignore=IGNORED))
    return hf, ours.eval()


def ours_greedy(model: GptDecoder, ids: torch.Tensor, use_cache: bool = True) -> torch.Tensor:
    return torch.stack(list(generate(model, ids, torch.ones_like(ids), max_new_tokens=NEW, use_cache=use_cache)), 1)


def hf_greedy(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW, min_new_tokens=NEW,
                             do_sample=False, pad_token_id=0)
    return out[:, ids.shape[1]:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    models = {
        "cpu-default size": both_models(vocab_size=8000, n_embd=256, n_layer=4, n_head=4, n_inner=1024, n_positions=256),
        "GPT-2 small size": both_models(),
    }
    rows = ["| model | batch | ours, cache | Hugging Face `generate` | ours / HF | ours, no cache | same pieces |",
            "|---|---|---|---|---|---|---|"]
    for name, (hf, ours) in models.items():
        for batch in (1, 8):
            ids = torch.randint(1, ours.config.n_pieces, (batch, 16))
            systems: Dict[str, Callable[[], torch.Tensor]] = {
                "ours": partial(ours_greedy, ours, ids), "hf": partial(hf_greedy, hf, ids),
                "no_cache": partial(ours_greedy, ours, ids, use_cache=False)}
            same = torch.equal(systems["ours"](), systems["hf"]())  # also the warm-up
            times: Dict[str, List[float]] = {k: [] for k in systems}
            for _ in range(args.reps):
                for key, run in systems.items():
                    start = time.perf_counter()
                    run()
                    times[key].append(time.perf_counter() - start)
            speed = {k: batch * NEW / statistics.median(v) for k, v in times.items()}
            rows.append(f"| {name} | {batch} | {speed['ours']:.0f} | {speed['hf']:.0f} | "
                        f"{speed['ours'] / speed['hf']:.2f}× | {speed['no_cache']:.0f} | {'yes' if same else 'no'} |")
            print(rows[-1], flush=True)
    RESULTS.write_text("# Greedy generation, tokens/s (`python bench/gpt_generation.py`)\n\n"
                       "2 torch threads, prompts of 16 pieces, 64 new pieces, median of "
                       f"{args.reps} alternating repetitions.\n\n" + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
