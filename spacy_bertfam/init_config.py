"""`python -m spacy_bertfam init-config`: a training config whose encoder fits a checkpoint.

Like `spacy init config`, but the pipeline's shared encoder is the checkpoint's family
(`bert_encoder`, `gpt_lm` or `elmo_features`) with the checkpoint's sizes read from it,
not retyped, its listeners sized to match, and the checkpoint as the encoder's loader.
"""
import inspect
from pathlib import Path
from typing import Dict, List, Union

from confection import Config
from spacy.cli.init_config import init_config as spacy_init_config

from . import architectures
from .convert import read_checkpoint
from .encoders.contract import COMPONENTS
from .errors import ConfigError
from .pretrained import PACKAGED, checkpoint_path

# Per family: its architecture (the component is `COMPONENTS[family]`).
FAMILIES = {
    "bert": ("spacy-bertfam.BertEncoder.v1", architectures.bert_encoder_v1),
    "gpt": ("spacy-bertfam.GptDecoder.v1", architectures.gpt_decoder_v1),
    "elmo": ("spacy-bertfam.ElmoBiLM.v1", architectures.elmo_bilm_v1),
}
TASKS = ("ner", "textcat", "textcat_multilabel")


def init_config(checkpoint: Union[str, Path], pipeline: List[str]) -> Config:
    """A `spacy train` config: the checkpoint's encoder shared by `pipeline`'s components.

    checkpoint: a checkpoint directory (any format `read_checkpoint` reads) or the name
        of a packaged model ("all-MiniLM-L6-v2").
    pipeline: task components, from "ner", "textcat", "textcat_multilabel". Beside another
        task, "textcat" is `partial_textcat`: on a corpus whose examples are annotated for one
        task each, spaCy's exclusive textcat would read a Doc without cats as "every class is 0".
    """
    unknown = [p for p in pipeline if p not in TASKS]
    if unknown or not pipeline or len(set(pipeline)) != len(pipeline):
        problem = f"unknown {unknown}" if unknown else "each task once" if pipeline else "no task"
        qa = ". span_qa pipelines start from configs/qa.cfg or configs/qa_bidaf.cfg" if "span_qa" in pipeline else ""
        raise ConfigError(f"init-config makes pipelines of {list(TASKS)}, each task once; got {pipeline} "
                          f"({problem}){qa}")
    ckpt = read_checkpoint(checkpoint_path(str(checkpoint)))
    name, (architecture, build) = COMPONENTS[ckpt.family], FAMILIES[ckpt.family]
    config = spacy_init_config(lang="en", pipeline=pipeline, optimize="efficiency")
    components = config["components"]
    components.pop("tok2vec", None)  # absent when no component shares it (textcat alone)
    components[name] = {"factory": name, "model": {"@architectures": architecture, **_sizes(ckpt.config, build)}}
    listener = _listener(ckpt.family, name, ckpt.config)
    for task in pipeline:
        model = components[task]["model"]
        if task == "ner":
            model["tok2vec"] = listener
        else:  # spaCy's efficient textcat has no tok2vec: use one that reads the encoder
            components[task]["model"] = {"@architectures": "spacy.TextCatReduce.v1",
                                         "exclusive_classes": task == "textcat", "use_reduce_first": False,
                                         "use_reduce_last": False, "use_reduce_max": False, "use_reduce_mean": True,
                                         "tok2vec": listener}
    if "textcat" in pipeline and len(pipeline) > 1:
        components["textcat"]["factory"] = "partial_textcat"
        components["textcat"]["scorer"] = {"@scorers": "spacy-bertfam.textcat_scorer.v1"}
    config["nlp"]["pipeline"] = [name, *pipeline]
    config["initialize"]["components"] = {name: {"encoder_loader": _loader(checkpoint)}}
    # Fine-tuning rates of pretrained encoders, not the from-scratch 1e-3.
    config["training"]["optimizer"]["learn_rate"] = {"@schedules": "warmup_linear.v1", "warmup_steps": 250,
                                                     "total_steps": 20000, "initial_rate": 5e-5}
    return Config(config)


def _sizes(model_config, build) -> Dict:
    """The architecture's arguments that the checkpoint's config fixes."""
    accepted = inspect.signature(build).parameters
    sizes = {k: v for k, v in model_config.to_dict().items() if k in accepted}
    if "filters" in sizes:  # JSON/config lists, not tuples
        sizes["filters"] = [list(f) for f in sizes["filters"]]
    if "window" in accepted:  # the default window, unless the checkpoint has fewer positions
        default = accepted["window"].default
        window = min(default, sizes["n_positions"])
        sizes.update(window=window, stride=window * accepted["stride"].default // default)
    return sizes


def _listener(family: str, upstream: str, model_config) -> Dict:
    """What the family's listeners read by default: BERT the last four layers concatenated (the
    paper's best feature-based setting), ELMo a scalar mix of every layer, GPT the top layer."""
    if family == "elmo":
        width = 2 * model_config.projection_width
        layers, combine = list(range(model_config.n_layers + 1)), "scalar_mix"
    else:
        width = model_config.hidden_width
        layers, combine = ([-4, -3, -2, -1], "concat") if family == "bert" and model_config.n_layers >= 4 else ([-1], "concat")
    return {"@architectures": "spacy-bertfam.EncoderListener.v1", "upstream": upstream, "layers": layers,
            "combine": combine, "width": width * len(layers) if combine == "concat" else width}


def _loader(checkpoint: Union[str, Path]) -> Dict:
    if str(checkpoint) in PACKAGED and not Path(checkpoint).exists():
        return {"@misc": "spacy-bertfam.PretrainedLoader.v1", "name": str(checkpoint)}
    return {"@misc": "spacy-bertfam.CheckpointLoader.v1", "path": str(Path(checkpoint).resolve())}
