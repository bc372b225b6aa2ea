"""`python -m spacy bertfam-pretrain CONFIG OUTPUT`: registered with spaCy's CLI
through the `spacy_cli` entry point. Heavy imports wait until the command runs, so
every other spaCy command stays as fast as before."""
from pathlib import Path
from typing import Any, Dict, List, Optional

import typer
from spacy.cli._util import Arg, Opt, app, parse_config_overrides, show_validation_error

from ..cli_errors import install_excepthook

install_excepthook()  # here because spaCy's CLI imports this module before running any command


@app.command("bertfam-pretrain", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def bertfam_pretrain_cli(
    ctx: typer.Context,
    config_path: Path = Arg(..., help="Pretraining config (configs/pretrain_{bert,gpt,elmo}.cfg)", exists=True, allow_dash=False),
    output_path: Path = Arg(..., help="Output directory: last/ (resumable), final/ (the checkpoint), log.jsonl"),
    gpu_id: int = Opt(-1, "--gpu-id", "-g", help="GPU id, or -1 for CPU (under torchrun: the local rank's GPU)"),
    resume: bool = Opt(False, "--resume", help="Continue the run in OUTPUT_PATH from its last checkpoint"),
    overwrite: bool = Opt(False, "--overwrite", help="Start over: delete the run OUTPUT_PATH holds (last/, final/, log)"),
) -> None:
    """Pretrain a BERT (masked LM + next sentence), GPT (causal LM) or ELMo (biLM)
    model from a config; overrides like `spacy train`, e.g. --training.max_steps 1000.
    Launch with `torchrun --nproc_per_node N -m spacy bertfam-pretrain ...` for
    data-parallel training."""
    overrides = parse_config_overrides(ctx.args)
    with show_validation_error(config_path, hint_fill=False):  # config and checkpoint errors: the message, no traceback
        run(config_path, output_path, overrides, gpu_id=gpu_id, resume=resume, overwrite=overwrite)


def run(config_path: Path, output_path: Path, overrides: Dict[str, Any], *, gpu_id: int = -1,
        resume: bool = False, overwrite: bool = False, stop_after: Optional[int] = None) -> List[Dict[str, Any]]:
    """Resolve the config and pretrain; the command's body, callable from Python."""
    import logging
    import os
    import shutil

    import torch
    from spacy import util
    from spacy.util import registry

    from ..errors import ConfigError
    from . import registry as _registered  # noqa: F401  (the config's functions)
    from .trainer import TrainingSettings, pretrain

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    config = util.load_config(config_path, overrides=overrides, interpolate=True)
    for section in ("corpus", "objective", "training"):
        if section not in config:
            raise ConfigError(f"{config_path} has no [{section}] block")
    resolved = registry.resolve({"corpus": config["corpus"], "objective": config["objective"]})
    try:
        settings = TrainingSettings(**config["training"])
    except TypeError as e:
        raise ConfigError(f"[training] in {config_path}: {e}") from None
    device = torch.device("cpu")
    if gpu_id >= 0:
        if not torch.cuda.is_available():
            raise ConfigError(f"--gpu-id {gpu_id}: torch sees no CUDA device")
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", gpu_id)))
        torch.cuda.set_device(device)
    if overwrite and resume:
        raise ConfigError("--resume continues the run in the output folder and --overwrite deletes it: give one")
    if resume and not output_path.exists():  # said before the folder is made (a killed run's state is checked later)
        raise ConfigError(f"Nothing to resume: {output_path} does not exist; leave out --resume to start a new run")
    if overwrite and int(os.environ.get("RANK", "0")) == 0:
        for name in ("last", "final"):
            shutil.rmtree(output_path / name, ignore_errors=True)
        (output_path / "log.jsonl").unlink(missing_ok=True)
    output_path.mkdir(parents=True, exist_ok=True)
    if int(os.environ.get("RANK", "0")) == 0:
        config.to_disk(output_path / "config.cfg")
    corpus = resolved["corpus"]
    return pretrain(resolved["objective"], corpus.reader("train"), corpus.heldout_readers(), settings,
                    output_path, device=device, resume=resume, stop_after=stop_after)
