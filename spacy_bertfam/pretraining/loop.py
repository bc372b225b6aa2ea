"""A small pretraining loop: AdamW, warm-up then linear decay, clipping, progress, held-out checks."""
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch
from torch import nn
from tqdm import tqdm


@dataclass
class LoopSettings:
    """Optimisation settings (defaults suit a small model on a CPU).

    steps: optimiser steps (the schedule's length).
    max_minutes: stop earlier when this much wall time has passed (None: no limit).
    lr, betas, weight_decay, warmup, clip: AdamW, linear warm-up over `warmup`
        steps then linear decay to 0 at `steps`, gradient-norm clipping.
    eval_every: steps between held-out evaluations.
    """

    steps: int = 2000
    max_minutes: Optional[float] = None
    lr: float = 1e-3
    betas: tuple = (0.9, 0.95)
    weight_decay: float = 0.1
    warmup: int = 100
    clip: float = 1.0
    eval_every: int = 200


def adamw(model: nn.Module, settings: LoopSettings) -> torch.optim.Optimizer:
    """AdamW with weight decay on matrices only (not on biases, LayerNorms, embeddings' norms)."""
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": settings.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=settings.lr, betas=settings.betas,
    )


def warmup_linear(step: int, warmup: int, total: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def train(
    model: nn.Module,
    batches: Iterator[Any],
    loss_fn: Callable[[nn.Module, Any], Tuple[torch.Tensor, int]],
    evaluate: Callable[[nn.Module], Dict[str, float]],
    settings: LoopSettings,
    *,
    log_path: Path,
    unit: str = "pieces",
) -> List[Dict[str, float]]:
    """Train until `settings.steps` or `max_minutes` of training (evaluations not
    counted); log every evaluation as JSON lines. `loss_fn` returns the loss and
    the number of units (pieces, words) the batch trained on.

    Returns the evaluation records (the first is before any update).
    """
    optimizer = adamw(model, settings)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: warmup_linear(s, settings.warmup, settings.steps))
    records = [{"step": 0, **evaluate(model)}]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = log_path.open("w", encoding="utf8")
    log.write(json.dumps(records[0]) + "\n")
    start = time.perf_counter()
    eval_seconds = 0.0  # kept out of the speed figure
    seen = 0
    bar = tqdm(total=settings.steps, unit="step", dynamic_ncols=True)
    for step in range(1, settings.steps + 1):
        model.train()
        batch = next(batches)
        loss, units = loss_fn(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings.clip)
        optimizer.step()
        schedule.step()
        seen += units
        elapsed = time.perf_counter() - start - eval_seconds
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.3f}", **{f"{unit}/s": f"{seen / elapsed:.0f}"})
        out_of_time = settings.max_minutes is not None and elapsed > settings.max_minutes * 60
        if step % settings.eval_every == 0 or step == settings.steps or out_of_time:
            eval_start = time.perf_counter()
            scores = evaluate(model)
            eval_seconds += time.perf_counter() - eval_start
            record = {"step": step, "train_loss": loss.item(), f"{unit}_per_s": seen / elapsed,
                      "train_seconds": elapsed, **scores}
            records.append(record)
            log.write(json.dumps(record) + "\n")
            log.flush()
            bar.write(json.dumps(record))
        if out_of_time:
            break
    bar.close()
    log.close()
    return records


def perplexity(mean_nll: float) -> float:
    return math.exp(min(mean_nll, 50.0))
