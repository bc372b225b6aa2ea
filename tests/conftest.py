"""Shared fixtures: tiny random Hugging Face BERT checkpoints and the MiniLM weights."""
from pathlib import Path

import pytest
import torch

from spacy_bertfam.pretrained import pretrained_path

# Tests read data from the repository only: the project's assets/ (WNUT-17, Banking77, the
# books) and tests/data/ (small slices and fixtures, each folder with its source and licence).
REPO = Path(__file__).resolve().parents[1]
ASSETS = REPO / "assets"
TEST_DATA = REPO / "tests" / "data"

TINY_HF_CONFIG = dict(
    vocab_size=120,
    hidden_size=32,
    num_hidden_layers=3,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
    type_vocab_size=2,
    hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1,
)


def write_vocab(path: Path, size: int) -> Path:
    """A WordPiece vocab of `size` entries: specials, letters, a few words and ##pieces."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list("abcdefghijklmnopqrstuvwxyz0123456789.,!?'-")
    words = ["the", "cat", "sat", "on", "mat", "dog", "ran", "hello", "world", "bank", "river"]
    subs = ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"] + ["##ing", "##ed"]
    vocab = (specials + chars + words + subs)
    vocab += [f"[unused{i}]" for i in range(size - len(vocab))]
    assert len(vocab) == size
    path.write_text("\n".join(vocab) + "\n", encoding="utf8")
    return path


def make_hf_bert(directory: Path, *, heads: bool = False, seed: int = 0, **overrides) -> Path:
    """Save a random Hugging Face BERT (BertModel, or BertForPreTraining with heads)."""
    from transformers import BertConfig, BertForPreTraining, BertModel

    torch.manual_seed(seed)
    config = BertConfig(**{**TINY_HF_CONFIG, **overrides})
    model = (BertForPreTraining if heads else BertModel)(config)
    with torch.no_grad():  # LayerNorms start at 1/0; perturb so the map is really tested
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(directory)
    write_vocab(directory / "vocab.txt", config.vocab_size)
    return directory


@pytest.fixture
def hf_bert_dir(tmp_path: Path) -> Path:
    return make_hf_bert(tmp_path / "hf_bert")


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    return pretrained_path("all-MiniLM-L6-v2")


GPT_TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Language models predict the next piece from the ones before it.",
    "Hello world, hello there, general Kenobi!",
    "It was the best of times, it was the worst of times.",
] * 20


def make_hf_gpt(directory: Path, *, gpt1: bool = False, seed: int = 0) -> Path:
    """Save a random small Hugging Face GPT-2 (or GPT-1) LM with a small trained BPE."""
    from tokenizers.implementations import CharBPETokenizer
    from transformers import GPT2Config, GPT2LMHeadModel, OpenAIGPTConfig, OpenAIGPTLMHeadModel

    from spacy_bertfam.tokenization import train_byte_bpe

    directory.mkdir(parents=True)
    if gpt1:
        bpe = CharBPETokenizer(suffix="</w>", lowercase=True, bert_normalizer=True)
        bpe.train_from_iterator(GPT_TEXTS, vocab_size=120, min_frequency=1, special_tokens=["<unk>"],
                                suffix="</w>", show_progress=False)
        bpe._tokenizer.model.save(str(directory))
        n_pieces = bpe.get_vocab_size()
    else:
        tok = train_byte_bpe(GPT_TEXTS, vocab_size=300, min_frequency=1)
        tok.tokenizer.model.save(str(directory))
        n_pieces = tok.n_pieces
    torch.manual_seed(seed)
    sizes = dict(vocab_size=n_pieces, n_positions=64, n_embd=32, n_layer=3, n_head=4)
    if gpt1:
        model = OpenAIGPTLMHeadModel(OpenAIGPTConfig(**sizes))
    else:
        model = GPT2LMHeadModel(GPT2Config(**sizes, bos_token_id=0, eos_token_id=0))
    with torch.no_grad():  # perturb LayerNorms and biases so the map is really tested
        for name, p in model.named_parameters():
            if "ln" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(directory)
    return directory
