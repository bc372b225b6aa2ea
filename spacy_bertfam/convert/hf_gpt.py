"""Reading Hugging Face GPT-2 (`gpt2`) and GPT-1 (`openai-gpt`) directories."""
from pathlib import Path
from typing import Dict, List

import torch

from ..models.gpt import GptConfig
from ..tokenization import load_bpe
from .checkpoint import Checkpoint
from .errors import CheckpointError
from .files import check_vocabulary, read_json, read_weights
from .keymap import TRANSPOSE, KeyRow, rename_to_ours


def _affine(ours: str, theirs: str, transpose: bool = False) -> List[KeyRow]:
    return [KeyRow(f"{ours}.weight", f"{theirs}.weight", transpose),
            KeyRow(f"{ours}.bias", f"{theirs}.bias", transpose)]


def _fused_qkv(i: str = "{i}") -> List[KeyRow]:
    """GPT's Conv1D `c_attn` holds query, key and value side by side, stored [in, 3·out]."""
    rows = []
    for k, name in enumerate(("query", "key", "value")):
        rows.append(KeyRow(f"layers.{i}.attention.{name}.weight", f"h.{i}.attn.c_attn.weight", TRANSPOSE, (k, 3)))
        rows.append(KeyRow(f"layers.{i}.attention.{name}.bias", f"h.{i}.attn.c_attn.bias", TRANSPOSE, (k, 3)))
    return rows


# Blocks are named alike in GPT-1 and GPT-2; ln_1/ln_2 sit before the sublayers in
# GPT-2 and after them in GPT-1, which our block's `pre_norm` switch accounts for.
_BLOCKS: List[KeyRow] = [
    *_fused_qkv(),
    *_affine("layers.{i}.attention.output", "h.{i}.attn.c_proj", TRANSPOSE),
    *_affine("layers.{i}.attention_norm", "h.{i}.ln_1"),
    *_affine("layers.{i}.ffn.up", "h.{i}.mlp.c_fc", TRANSPOSE),
    *_affine("layers.{i}.ffn.down", "h.{i}.mlp.c_proj", TRANSPOSE),
    *_affine("layers.{i}.ffn_norm", "h.{i}.ln_2"),
]

GPT2_KEY_MAP: List[KeyRow] = [
    KeyRow("pieces.weight", "wte.weight"),
    KeyRow("positions.weight", "wpe.weight"),
    *_BLOCKS,
    *_affine("final_norm", "ln_f"),
]

GPT1_KEY_MAP: List[KeyRow] = [
    KeyRow("pieces.weight", "tokens_embed.weight"),
    KeyRow("positions.weight", "positions_embed.weight"),
    *_BLOCKS,
]

# Causal-mask buffers of older releases, and the LM head tied to the embeddings
# (checked to be equal below).
IGNORED = [r"^h\.\d+\.attn\.(bias|masked_bias)$", r"^lm_head\.weight$", r"^position_ids$"]

# In Hugging Face's GPT-2 "gelu" is exact and "gelu_new" the tanh approximation;
# in its GPT-1 code (`afn`) "gelu" already means the tanh approximation.
_GPT2_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}
_GPT1_ACTIVATIONS = {"gelu": "gelu_tanh", "relu": "relu", "silu": "silu", "swish": "silu"}


def detect(directory: Path) -> bool:
    """Whether `directory` is a Hugging Face GPT-2 or GPT-1 checkpoint (config.json with model_type
    'gpt2' or 'openai-gpt')."""
    config = directory / "config.json"
    return config.is_file() and read_json(config).get("model_type") in ("gpt2", "openai-gpt")


def convert_config(hf: Dict) -> GptConfig:
    """Translate a Hugging Face GPT-2 or GPT-1 config dict into our GptConfig (GPT-1: post-norm blocks,
    its `afn` activation names)."""
    gpt1 = hf.get("model_type") == "openai-gpt"
    acts = _GPT1_ACTIVATIONS if gpt1 else _GPT2_ACTIVATIONS
    act = hf.get("afn" if gpt1 else "activation_function", "gelu" if gpt1 else "gelu_new")
    if act not in acts:
        raise CheckpointError(f"activation '{act}' is not supported; expected one of {sorted(acts)}")
    try:
        width = hf["n_embd"]
        return GptConfig(
            n_pieces=hf["vocab_size"],
            hidden_width=width,
            n_layers=hf["n_layer"],
            n_heads=hf["n_head"],
            intermediate_width=hf.get("n_inner") or 4 * width,
            n_positions=hf["n_positions"],
            embedding_dropout=hf.get("embd_pdrop", GptConfig.embedding_dropout),
            residual_dropout=hf.get("resid_pdrop", GptConfig.residual_dropout),
            attention_dropout=hf.get("attn_pdrop", GptConfig.attention_dropout),
            layer_norm_eps=hf.get("layer_norm_epsilon", GptConfig.layer_norm_eps),
            activation=acts[act],
            pre_norm=not gpt1,
        )
    except KeyError as e:
        raise CheckpointError(f"config.json lacks the field {e}") from None


def read(directory: Path) -> Checkpoint:
    """Read a Hugging Face GPT2LMHeadModel / GPT2Model / OpenAIGPT(LMHead)Model directory."""
    source = str(directory)
    hf = read_json(directory / "config.json")
    config = convert_config(hf)
    gpt1 = not config.pre_norm
    state = {k[len("transformer."):] if k.startswith("transformer.") else k: v
             for k, v in read_weights(directory).items()}
    embeddings = state.get("tokens_embed.weight" if gpt1 else "wte.weight")
    head = state.get("lm_head.weight")
    if head is not None and embeddings is not None and not torch.equal(head, embeddings):
        raise CheckpointError(f"{source}: lm_head.weight differs from the token embeddings; "
                              "only GPT's tied LM head is supported")
    ours = rename_to_ours(state, GPT1_KEY_MAP if gpt1 else GPT2_KEY_MAP, ignore=IGNORED, source=source)
    tokenizer = load_bpe(directory, gpt1=gpt1)
    check_vocabulary(source, config.n_pieces, ours.get("pieces.weight"), tokenizer)
    return Checkpoint("gpt", config, ours, tokenizer, source)
