"""Reading Hugging Face BERT directories (BertModel / BertForPreTraining layouts)."""
from pathlib import Path
from typing import Dict, List

import torch

from ..models.bert import BertConfig
from ..tokenization import load_wordpiece
from .checkpoint import Checkpoint
from .errors import CheckpointError
from .files import check_vocabulary, read_json, read_weights
from .keymap import NO_TRANSPOSE, KeyRow, rename_to_ours


def _affine(ours: str, theirs: str) -> List[KeyRow]:
    """Weight and bias rows of one Linear or LayerNorm."""
    return [
        KeyRow(f"{ours}.weight", f"{theirs}.weight", NO_TRANSPOSE),
        KeyRow(f"{ours}.bias", f"{theirs}.bias", NO_TRANSPOSE),
    ]


# Our name <- Hugging Face name, one tensor (pair) per row; read top to bottom.
KEY_MAP: List[KeyRow] = [
    KeyRow("embeddings.pieces.weight", "embeddings.word_embeddings.weight"),
    KeyRow("embeddings.positions.weight", "embeddings.position_embeddings.weight"),
    KeyRow("embeddings.types.weight", "embeddings.token_type_embeddings.weight"),
    *_affine("embeddings.norm", "embeddings.LayerNorm"),
    *_affine("layers.{i}.attention.query", "encoder.layer.{i}.attention.self.query"),
    *_affine("layers.{i}.attention.key", "encoder.layer.{i}.attention.self.key"),
    *_affine("layers.{i}.attention.value", "encoder.layer.{i}.attention.self.value"),
    *_affine("layers.{i}.attention.output", "encoder.layer.{i}.attention.output.dense"),
    *_affine("layers.{i}.attention_norm", "encoder.layer.{i}.attention.output.LayerNorm"),
    *_affine("layers.{i}.ffn.up", "encoder.layer.{i}.intermediate.dense"),
    *_affine("layers.{i}.ffn.down", "encoder.layer.{i}.output.dense"),
    *_affine("layers.{i}.ffn_norm", "encoder.layer.{i}.output.LayerNorm"),
    *_affine("pooler", "pooler.dense"),
    *_affine("mlm_head.dense", "cls.predictions.transform.dense"),
    *_affine("mlm_head.norm", "cls.predictions.transform.LayerNorm"),
    KeyRow("mlm_head.bias", "cls.predictions.bias"),
    *_affine("nsp_head.classifier", "cls.seq_relationship"),
]

# Buffers and tied copies: the decoder weight is the word embedding matrix (checked
# below) and the decoder bias is the same tensor as cls.predictions.bias.
IGNORED = [r"^embeddings\.position_ids$", r"^cls\.predictions\.decoder\.(weight|bias)$"]

_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                "relu": "relu", "silu": "silu", "swish": "silu"}


def detect(directory: Path) -> bool:
    """Whether `directory` is a Hugging Face BERT checkpoint (config.json with model_type 'bert')."""
    config = directory / "config.json"
    return config.is_file() and read_json(config).get("model_type") == "bert"


def convert_config(hf: Dict) -> BertConfig:
    """Translate a Hugging Face BertConfig dict into ours."""
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise CheckpointError(
            f"position_embedding_type '{hf['position_embedding_type']}' is not supported; "
            "only 'absolute' (learned positions) is"
        )
    act = hf.get("hidden_act", "gelu")
    if act not in _ACTIVATIONS:
        raise CheckpointError(f"hidden_act '{act}' is not supported; expected one of {sorted(_ACTIVATIONS)}")
    try:
        return BertConfig(
            n_pieces=hf["vocab_size"],
            hidden_width=hf["hidden_size"],
            n_layers=hf["num_hidden_layers"],
            n_heads=hf["num_attention_heads"],
            intermediate_width=hf["intermediate_size"],
            n_positions=hf["max_position_embeddings"],
            n_types=hf.get("type_vocab_size", BertConfig.n_types),
            hidden_dropout=hf.get("hidden_dropout_prob", BertConfig.hidden_dropout),
            attention_dropout=hf.get("attention_probs_dropout_prob", BertConfig.attention_dropout),
            layer_norm_eps=hf.get("layer_norm_eps", BertConfig.layer_norm_eps),
            activation=_ACTIVATIONS[act],
            padding_id=hf.get("pad_token_id", 0) or 0,
        )
    except KeyError as e:
        raise CheckpointError(f"config.json lacks the field {e}") from None


def _normalise_names(state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Strip the `bert.` prefix of BertForPreTraining; old TF ports say gamma/beta."""
    out = {}
    for key, tensor in state.items():
        if key.startswith("bert."):
            key = key[len("bert."):]
        key = key.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
        out[key] = tensor
    return out


def read(directory: Path) -> Checkpoint:
    """Read a Hugging Face BERT directory into a `Checkpoint` under our names."""
    source = str(directory)
    config = convert_config(read_json(directory / "config.json"))
    state = _normalise_names(read_weights(directory))
    decoder = state.get("cls.predictions.decoder.weight")
    words = state.get("embeddings.word_embeddings.weight")
    if decoder is not None and words is not None and not torch.equal(decoder, words):
        raise CheckpointError(
            f"{source}: cls.predictions.decoder.weight differs from the word embeddings; "
            "only the tied MLM decoder of BERT is supported"
        )
    ours = rename_to_ours(state, KEY_MAP, ignore=IGNORED, source=source)
    tokenizer = load_wordpiece(directory)
    check_vocabulary(source, config.n_pieces, ours.get("embeddings.pieces.weight"), tokenizer)
    return Checkpoint("bert", config, ours, tokenizer, source)
