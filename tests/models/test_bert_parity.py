"""Numerical parity of our BERT with Hugging Face BertModel."""
import pytest
import torch

from spacy_bertfam.convert import load_state, read_checkpoint
from spacy_bertfam.models.bert import BertEncoder

from ..helpers import max_abs_masked, padded_batch

VARIED_SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "I deposited my paycheck at the bank on Friday.",
    "They had a picnic on the river bank.",
    "Can you believe it's already December?",
    "Transformers encode every token in context.",
    "Paris is the capital of France.",
    "She didn't want to go, but she went anyway!",
    "42 is the answer to life, the universe, and everything.",
    "Dr. Smith arrived at 3:45 p.m. with two colleagues.",
    "Natural-language processing has improved dramatically since 2018.",
    "Héllo naïve café — accents should be stripped for uncased models.",
    "Why do cats purr?",
    "Breaking: markets tumble as rates rise again.",
    "My phone number is 555-0199, call me maybe.",
    "The mitochondria is the powerhouse of the cell.",
    "A",
    "Running, runner, ran: morphology matters for word pieces.",
    "Email me at someone@example.com or visit https://example.org/page?id=7.",
    "It was the best of times, it was the worst of times, it was the age of wisdom, "
    "it was the age of foolishness, it was the epoch of belief.",
    "Unbelievably, the antidisestablishmentarianism debate continued.",
    "東京は日本の首都です。",
    "Emoji in text 🙂🚀 are rare but real.",
]


def _hf_hidden(directory, ids, mask, types):
    from transformers import BertModel

    model = BertModel.from_pretrained(str(directory)).eval()
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True)
    return list(out.hidden_states), out.pooler_output


def _ours(directory):
    ckpt = read_checkpoint(directory)
    model = BertEncoder(ckpt.config).eval()
    load_state(model, ckpt.state, source=ckpt.source, optional=("mlm_head.", "nsp_head."))
    return model, ckpt.tokenizer


def assert_parity(directory, texts, pairs=(), *, tolerance: float, n_layers: int):
    """Every layer and the pooler of ours vs Hugging Face, on real positions only."""
    model, tok = _ours(directory)
    ids, mask, types = padded_batch(tok, texts, pairs)
    assert mask.sum(1).min() < ids.shape[1]  # the batch really is padded
    ref, ref_pooled = _hf_hidden(directory, ids, mask, types)
    with torch.no_grad():
        out = model(ids, mask, types)
    errors = max_abs_masked(out.layers, ref, mask)
    print(f"{directory.name} max-abs per layer:", errors)
    assert len(errors) == n_layers
    assert max(errors) <= tolerance, errors
    assert float((out.pooled - ref_pooled).abs().max()) <= tolerance
    return types


def test_bert_parity_random_config_pairs_and_padding(hf_bert_dir):
    texts = ["the cat sat on the mat", "hello", "the dog ran on the river bank ok"]
    types = assert_parity(hf_bert_dir, texts, ["hello world", "the cat", ""], tolerance=1e-5, n_layers=4)
    assert types.max() == 1  # two segments


def test_bert_parity_minilm(minilm_dir):
    assert len(VARIED_SENTENCES) >= 20
    assert_parity(minilm_dir, VARIED_SENTENCES, tolerance=1e-4, n_layers=7)


def test_bert_padding_invariance(minilm_dir):
    model, tok = _ours(minilm_dir)
    ids, mask, types = padded_batch(tok, VARIED_SENTENCES[:6])
    with torch.no_grad():
        batched = model(ids, mask, types)
        for i in range(ids.shape[0]):
            n = int(mask[i].sum())
            alone = model(ids[i : i + 1, :n], mask[i : i + 1, :n], types[i : i + 1, :n])
            for layer_b, layer_a in zip(batched.layers, alone.layers):
                assert torch.allclose(layer_b[i, :n], layer_a[0], atol=1e-5, rtol=0)


def test_bert_rejects_too_long_sequence(hf_bert_dir):
    model, _ = _ours(hf_bert_dir)
    with pytest.raises(ValueError, match="exceeds the 64 positions"):
        model(torch.zeros(1, 65, dtype=torch.long))
