"""The pretraining loop shared by BERT, GPT and ELMo: resumable and data-parallel.

Run state lives in `<output>/last`: a checkpoint in the library's format plus
`training_state.pt` (step, optimiser, schedule, data-stream state, RNG states).
A fresh run first writes its initial model there (rank 0), so every process of a
distributed run starts from the same weights and vocabulary, and a fresh run and a
resumed one take the same path. `<output>/final` is the checkpoint to use.

Data parallelism (torchrun): every process streams the same documents and takes its
share of each global batch; losses are normalised by counts summed over the global
batch, and gradients are summed across processes, so N processes compute the
gradient one process would on the whole batch. Only rank 0 evaluates and writes.
"""
import json
import logging
import os
import pickle
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from tqdm import tqdm

from ..errors import ConfigError
from .documents import DocumentReader
from .objective import Batch, Objective
from .stream import ExampleStream

logger = logging.getLogger("spacy_bertfam")

STATE_FILE = "training_state.pt"


@dataclass
class TrainingSettings:
    """The [training] block of a pretraining config.

    max_steps: optimiser steps; the schedule's length (0: the initial checkpoint alone).
    max_minutes: stop earlier (saving) after this much training time (null: no limit).
    batch_size: sequences per optimiser step (the global batch, over all processes).
    batch_pieces: if set, batches are filled up to this many pieces instead.
    accumulate: micro-batches per step (per process); the same gradient, less memory.
    lr, beta1, beta2, eps, weight_decay: AdamW; weight decay skips biases and LayerNorms.
    warmup_steps: linear warm-up, then linear decay to 0 at max_steps.
    clip: gradient-norm clipping.
    shuffle_buffer: examples in the shuffle buffer.
    log_every, eval_every, checkpoint_every: in steps.
    seed: data order, masking, weights.
    """

    max_steps: int = 10000
    max_minutes: Optional[float] = None
    batch_size: int = 32
    batch_pieces: Optional[int] = None
    accumulate: int = 1
    lr: float = 1e-4
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-6
    weight_decay: float = 0.01
    warmup_steps: int = 1000
    clip: float = 1.0
    shuffle_buffer: int = 10000
    log_every: int = 10
    eval_every: int = 500
    checkpoint_every: int = 500
    seed: int = 0

    def __post_init__(self) -> None:
        at_least = {"max_steps": 0, "batch_size": 1, "accumulate": 1, "shuffle_buffer": 1, "log_every": 1,
                    "eval_every": 1, "checkpoint_every": 1, "warmup_steps": 0}
        wrong = [f"{name} = {getattr(self, name)} (at least {low})" for name, low in at_least.items()
                 if getattr(self, name) < low]
        wrong += [f"{name} = {getattr(self, name)} (above 0)" for name in ("lr", "clip", "max_minutes", "batch_pieces")
                  if getattr(self, name) is not None and getattr(self, name) <= 0]
        if wrong:
            raise ConfigError(f"[training] cannot work with {', '.join(wrong)}")


class Processes:
    """This process's place in a torchrun launch (or a single process)."""

    def __init__(self, device: torch.device):
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.device = device
        self.started = self.world > 1 and not dist.is_initialized()
        if self.started:
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")

    def close(self) -> None:
        """End the process group if this object started it."""
        if self.started:
            dist.destroy_process_group()

    @property
    def main(self) -> bool:
        """Whether this is rank 0, the process that evaluates and writes."""
        return self.rank == 0

    def barrier(self) -> None:
        """Wait for every process (nothing to wait for alone)."""
        if self.world > 1:
            dist.barrier()

    def sum(self, values: Dict[str, float]) -> Dict[str, float]:
        """Each value summed over all processes (the same keys everywhere)."""
        if self.world == 1:
            return values
        keys = sorted(values)
        tensor = torch.tensor([values[k] for k in keys], dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor)
        return dict(zip(keys, tensor.tolist()))

    def sum_gradients(self, model: nn.Module) -> None:
        """Sum the parameters' gradients over all processes, in one flat all-reduce.

        A parameter without a gradient here (an adaptive softmax's cluster that no target of
        this share reached) takes part with zeros where another process has one, and keeps
        none where no process has, as in one process; otherwise the flat tensors would differ
        in size between processes.
        """
        if self.world == 1:
            return
        params = [p for p in model.parameters() if p.requires_grad]
        holders = torch.tensor([p.grad is not None for p in params], dtype=torch.float64, device=self.device)
        dist.all_reduce(holders)
        grads = []
        for p, n_holders in zip(params, holders.tolist()):
            if n_holders:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                grads.append(p.grad)
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()

    def gather(self, obj: Any) -> List[Any]:
        """`obj` from every process, by rank."""
        if self.world == 1:
            return [obj]
        out: List[Any] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out


def adamw(model: nn.Module, s: TrainingSettings) -> torch.optim.Optimizer:
    """AdamW as in BERT: no weight decay on biases and LayerNorm parameters (the 1-d ones)."""
    params = list(model.named_parameters())
    return torch.optim.AdamW(
        [{"params": [p for _, p in params if p.ndim >= 2], "weight_decay": s.weight_decay},
         {"params": [p for _, p in params if p.ndim < 2], "weight_decay": 0.0}],
        lr=s.lr, betas=(s.beta1, s.beta2), eps=s.eps,
    )


def warmup_linear(step: int, warmup: int, total: int) -> float:
    """The learning-rate factor at `step`: linear warm-up over `warmup` steps, then linear decay to 0
    at `total`."""
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def pretrain(
    objective: Objective,
    train: DocumentReader,
    heldout: Dict[str, DocumentReader],
    settings: TrainingSettings,
    output: Path,
    *,
    device: torch.device = torch.device("cpu"),
    resume: bool = False,
    stop_after: Optional[int] = None,
) -> List[Dict[str, Any]]:
    """Train (or resume) and return the logged records.

    heldout: evaluation sets by log prefix (e.g. "eval": the held-out documents).
    stop_after: end after that step as if the job were killed there (no checkpoint
        at that step; for the resume test) — a later `resume=True` run goes on from
        the last checkpoint.
    """
    procs = Processes(device)
    output = Path(output)
    last = output / "last"
    if procs.main:
        _recover(last)
    procs.barrier()
    if not resume and last.exists():
        raise ConfigError(f"{output} holds a run already: resume it (--resume), start it over "
                          "(--overwrite) or choose another output")
    if resume and not (last / STATE_FILE).is_file():
        raise ConfigError(f"Nothing to resume: {last / STATE_FILE} does not exist; leave out --resume to start "
                          "a new run")
    if not resume and procs.main:
        torch.manual_seed(settings.seed)
        model = objective.initial_model(train.documents(repeat=False))
        train.load_state_dict({"epoch": 0, "file": 0, "offset": 0, "index": 0})
        _write(last, objective, model, {"step": 0})
    procs.barrier()
    model = objective.load(last).to(device)
    optimizer = adamw(model, settings)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: warmup_linear(s, settings.warmup_steps, settings.max_steps))
    stream = ExampleStream(train, objective.maker(), settings.shuffle_buffer, settings.seed)
    state = load_training_state(last / STATE_FILE, objective)
    step = state["step"]
    if resume and step >= settings.max_steps:
        raise ConfigError(f"The run in {output} is at step {step} already and max_steps is {settings.max_steps}: "
                          "nothing to train. Raise --training.max_steps to go on")
    if step > 0:
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        stream.load_state_dict(state["stream"])
        restore_rng(state["rng"], procs.rank, settings.seed)
    else:
        torch.manual_seed(settings.seed + 1 + procs.rank)  # dropout differs per process
    log_path = output / "log.jsonl"
    records = _read_log(log_path, step) if procs.main else []
    eval_sets = {name: objective.heldout(reader.documents(repeat=False)) for name, reader in heldout.items()} \
        if procs.main else {}
    if procs.main and step == 0:
        records.append(_log(log_path, {"step": 0, **evaluate_all(objective, model, eval_sets, device)}))
    bar = tqdm(total=settings.max_steps, initial=step, unit="step", dynamic_ncols=True, disable=not procs.main)
    train_seconds = state.get("train_seconds", 0.0)
    units = 0.0
    window_start = time.perf_counter()
    out_of_time = False
    while step < settings.max_steps:
        step += 1
        start = time.perf_counter()
        numbered = stream.batch(settings.batch_size, settings.batch_pieces, objective.length, min_examples=procs.world)
        lr = schedule.get_last_lr()[0]  # this step's rate (after schedule.step() it is the next one's)
        totals, stats, grad_norm = train_step(objective, model, optimizer, numbered, procs, settings)
        schedule.step()
        train_seconds += time.perf_counter() - start
        units += totals[objective.unit]
        if settings.max_minutes is not None:  # decided together, so all processes stop at the same step
            out_of_time = procs.sum({"late": float(train_seconds > settings.max_minutes * 60)})["late"] > 0
        killed = step == stop_after
        done = step == settings.max_steps or out_of_time
        bar.update(1)
        evaluate_now = step % settings.eval_every == 0 or done or killed
        if procs.main and (step % settings.log_every == 0 or evaluate_now):
            speed = units / max(time.perf_counter() - window_start, 1e-9)
            figures = objective.report(stats, totals)
            bar.set_postfix(loss=f"{figures['loss']:.3f}", **{f"{objective.unit}/s": f"{speed:.0f}"})
            record = {"step": step, **figures, "lr": lr, "grad_norm": grad_norm,
                      f"{objective.unit}_per_s": speed, "train_seconds": train_seconds}
            if evaluate_now:
                record.update(evaluate_all(objective, model, eval_sets, device))
                bar.write(json.dumps({k: float(f"{v:.4g}") if isinstance(v, float) else v for k, v in record.items()}))
            records.append(_log(log_path, record))
            units, window_start = 0.0, time.perf_counter()
        if (step % settings.checkpoint_every == 0 or done) and not killed:
            rng = procs.gather(rng_state(device))
            if procs.main:
                _write(last, objective, model, {
                    "step": step, "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
                    "stream": stream.state_dict(), "rng": rng, "train_seconds": train_seconds})
            procs.barrier()
            units, window_start = 0.0, time.perf_counter()  # the speed figure leaves checkpointing out
        if done or killed:
            break
    bar.close()
    if procs.main and (step == settings.max_steps or out_of_time):
        final = output / "final"
        _write(final, objective, model)
        logger.info("Pretrained checkpoint: %s", final)
    procs.barrier()
    procs.close()
    return records


def load_training_state(path: Path, objective: Objective) -> Dict[str, Any]:
    """Read `training_state.pt` without unpickling arbitrary code (torch's weights-only
    loader), allowing only NumPy arrays and the objective's own example types."""
    numpy_types = [np.ndarray, np.dtype, _np_reconstruct(),
                   *(getattr(np.dtypes, name) for name in dir(np.dtypes) if name.endswith("DType"))]
    try:
        with torch.serialization.safe_globals([*numpy_types, *objective.state_types]):
            return torch.load(path, weights_only=True)
    except pickle.UnpicklingError as e:
        raise ConfigError(f"{path} holds something other than a training state; refusing to unpickle it: {e}") from None


def _np_reconstruct():
    core = getattr(np, "_core", None) or np.core  # NumPy 2 renamed the module
    return core.multiarray._reconstruct


def rng_state(device: torch.device) -> Dict[str, Any]:
    """This process's torch RNG states (dropout), CPU and, on a GPU, CUDA."""
    return {"cpu": torch.get_rng_state(), "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None}


def restore_rng(states: List[Dict[str, Any]], rank: int, seed: int) -> None:
    """Restore this process's torch RNG states from a checkpoint's (one per rank); a rank the
    checkpoint lacks gets a new seed."""
    if rank >= len(states):  # resumed with more processes than before: new dropout streams
        torch.manual_seed(seed + 1 + rank)
        return
    torch.set_rng_state(states[rank]["cpu"])
    if states[rank]["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(states[rank]["cuda"])


def train_step(objective: Objective, model: nn.Module, optimizer: torch.optim.Optimizer, numbered: List[Any],
               procs: Processes, settings: TrainingSettings) -> Tuple[Dict[str, float], Dict[str, float], float]:
    """One optimiser step on a global batch: this process's share of it, in
    `accumulate` micro-batches, each loss divided by counts of the whole global batch.

    Returns the global counts, the summed statistics and the gradient norm.
    """
    if len(numbered) < procs.world:
        # Every process sees the same global batch, so all of them stop here together.
        raise ConfigError(
            f"A global batch of {len(numbered)} examples cannot give each of {procs.world} processes "
            f"a share: raise training.batch_size to at least {procs.world}, or start fewer processes"
        )
    mine = numbered[procs.rank :: procs.world]
    micro = [objective.collate(mine[k :: settings.accumulate]) for k in range(settings.accumulate)
             if mine[k :: settings.accumulate]]
    totals = procs.sum(_add([b["counts"] for b in micro]))
    model.train()
    optimizer.zero_grad(set_to_none=True)
    stats: List[Dict[str, float]] = []
    for batch in micro:
        loss, batch_stats = objective.loss(model, _to(batch, procs.device), totals)
        loss.backward()
        stats.append(batch_stats)
    procs.sum_gradients(model)
    grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), settings.clip))
    optimizer.step()
    return totals, procs.sum(_add(stats)), grad_norm


def evaluate_all(objective: Objective, model: nn.Module, sets: Dict[str, List[Batch]],
                 device: torch.device) -> Dict[str, float]:
    """Every evaluation set's figures, each under its name as prefix."""
    out: Dict[str, float] = {}
    for name, batches in sets.items():
        out.update({f"{name}_{k}": v for k, v in evaluate(objective, model, batches, device).items()})
    return out


@torch.no_grad()
def evaluate(objective: Objective, model: nn.Module, batches: List[Batch], device: torch.device) -> Dict[str, float]:
    """The objective's report on fixed evaluation batches (eval mode, no gradients)."""
    model.eval()
    totals = _add([b["counts"] for b in batches])
    stats = _add([objective.loss(model, _to(b, device), totals)[1] for b in batches])
    return objective.report(stats, totals)


def _write(directory: Path, objective: Objective, model: nn.Module, state: Optional[Dict[str, Any]] = None) -> None:
    """Replace `directory` with a new checkpoint (and training state), never leaving it
    half-written: written beside it, then renamed (`_recover` undoes a kill between the renames)."""
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    objective.save(model, tmp)
    if state is not None:
        torch.save(state, tmp / STATE_FILE)
    old = directory.with_name(directory.name + ".old")
    shutil.rmtree(old, ignore_errors=True)  # left by a run killed while deleting it
    if directory.exists():
        directory.rename(old)
    tmp.rename(directory)
    shutil.rmtree(old, ignore_errors=True)


def _recover(directory: Path) -> None:
    """Put back the previous checkpoint where a write was killed between its two renames."""
    old = directory.with_name(directory.name + ".old")
    if not directory.exists() and old.exists():
        old.rename(directory)
        logger.warning("Recovered %s from %s (a checkpoint write had been interrupted)", directory, old)


def _read_log(path: Path, step: int) -> List[Dict[str, Any]]:
    """The records up to `step` (a resumed run drops what the killed run logged after
    its checkpoint; a run that restarts at step 0 starts a new log)."""
    if not path.exists():
        return []
    records = [json.loads(line) for line in path.read_text(encoding="utf8").splitlines() if line.strip()]
    records = [r for r in records if 0 < step and r["step"] <= step]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf8")
    return records


def _log(path: Path, record: Dict[str, Any]) -> Dict[str, Any]:
    with path.open("a", encoding="utf8") as f:
        f.write(json.dumps(record) + "\n")
    return record


def _add(dicts: List[Dict[str, float]]) -> Dict[str, float]:
    out: Dict[str, float] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0.0) + v
    return out


def _to(batch: Batch, device: torch.device) -> Batch:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}

