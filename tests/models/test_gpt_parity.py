"""Our GPT decoder vs Hugging Face GPT-2 and GPT-1: layers, logits, generation, cache."""
import pytest
import torch

from spacy_bertfam.convert import load_state, read_checkpoint
from spacy_bertfam.models.gpt import GptDecoder, generate, positions_from_mask

from ..conftest import make_hf_gpt

PROMPTS = ["hello world", "The quick brown fox jumps over", "It was the best", "language models predict the next"]


@pytest.fixture(scope="module", params=["gpt2", "gpt1"])
def pair(request, tmp_path_factory):
    gpt1 = request.param == "gpt1"
    directory = make_hf_gpt(tmp_path_factory.mktemp(request.param) / "hf", gpt1=gpt1)
    from transformers import AutoModelForCausalLM

    ref = AutoModelForCausalLM.from_pretrained(str(directory)).eval()
    ckpt = read_checkpoint(directory)
    ours = GptDecoder(ckpt.config).eval()
    load_state(ours, ckpt.state, source=ckpt.source)
    return request.param, ours, ref, ckpt.tokenizer


def padded(tokenizer, texts, side):
    encs = [tokenizer.encode(t).ids for t in texts]
    T = max(len(e) for e in encs)
    ids = torch.zeros(len(encs), T, dtype=torch.long)
    mask = torch.zeros(len(encs), T, dtype=torch.long)
    for i, e in enumerate(encs):
        cols = slice(T - len(e), T) if side == "left" else slice(0, len(e))
        ids[i, cols] = torch.tensor(e)
        mask[i, cols] = 1
    return ids, mask


@pytest.mark.parametrize("side", ["right", "left"])
def test_gpt_layers_and_logits_match_hugging_face(pair, side):
    name, ours, ref, tok = pair
    ids, mask = padded(tok, PROMPTS, side)
    assert mask.sum(1).min() < ids.shape[1]
    positions = positions_from_mask(mask)
    with torch.no_grad():
        out = ours(ids, mask, positions)
        want = ref(input_ids=ids, attention_mask=mask, position_ids=positions, output_hidden_states=True)
        logits = ours.logits(out.layers[-1])
    keep = mask.bool()
    errors = [float((a[keep] - b[keep]).abs().max()) for a, b in zip(out.layers, want.hidden_states)]
    logits_error = float((logits[keep] - want.logits[keep]).abs().max())
    print(f"{name} {side}-padded max-abs per layer {errors}, logits {logits_error}")
    assert len(errors) == 4
    assert max(errors) <= 1e-5 and logits_error <= 1e-5


def test_gpt_greedy_generation_matches_hugging_face(pair):
    name, ours, ref, tok = pair
    # HF's GPT-1 ignores the padding mask when generating: use unpadded prompts there.
    prompt_sets = [[p] for p in PROMPTS] if name == "gpt1" else [PROMPTS]
    for prompts in prompt_sets:
        ids, mask = padded(tok, prompts, "left")
        want = ref.generate(input_ids=ids, attention_mask=mask, max_new_tokens=30, do_sample=False,
                            min_new_tokens=30, pad_token_id=0)[:, ids.shape[1]:]
        got = torch.stack(list(generate(ours, ids, mask, max_new_tokens=30)), dim=1)
        assert got.tolist() == want.tolist()


def test_gpt_cache_equals_full_recomputation(pair):
    _, ours, _, tok = pair
    ids, mask = padded(tok, PROMPTS, "left")
    with torch.no_grad():
        full = ours(ids, mask)
        split = ids.shape[1] - 3
        first = ours(ids[:, :split], mask[:, :split])
        rest = ours(ids[:, split:], mask, cache=first.cache)
    keep = mask[:, split:].bool()
    for a, b in zip(rest.layers, full.layers):
        assert float((a[keep] - b[:, split:][keep]).abs().max()) <= 1e-5
    cached = list(generate(ours, ids, mask, max_new_tokens=10, use_cache=True))
    recomputed = list(generate(ours, ids, mask, max_new_tokens=10, use_cache=False))
    assert [c.tolist() for c in cached] == [r.tolist() for r in recomputed]


def test_sampling_is_seeded_and_checked(pair):
    _, ours, _, tok = pair
    ids, mask = padded(tok, PROMPTS[:2], "left")
    run = lambda seed: [t.tolist() for t in generate(  # noqa: E731
        ours, ids, mask, max_new_tokens=8, temperature=1.0, top_k=20, top_p=0.9,
        generator=torch.Generator().manual_seed(seed))]
    assert run(1) == run(1)
    with pytest.raises(ValueError, match=r"top_p must be in \(0, 1\], got 1.5"):
        list(generate(ours, ids, mask, max_new_tokens=2, temperature=1.0, top_p=1.5))
    with pytest.raises(ValueError, match="max_new_tokens must be >= 0, got -1"):
        list(generate(ours, ids, mask, max_new_tokens=-1))
    with pytest.raises(ValueError, match="exceeds the 64 positions"):
        list(generate(ours, ids, mask, max_new_tokens=64))
