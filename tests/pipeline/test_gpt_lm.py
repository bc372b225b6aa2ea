"""The gpt_lm component: features with the causal window rule, LM scores, generation, λ·LM loss."""
import numpy as np
import pytest
import spacy
import torch
from spacy.training import Example

from spacy_bertfam.encoders import torch_encoder
from spacy_bertfam.loaders import checkpoint_loader
from spacy_bertfam.models.gpt import generate

from ..conftest import make_hf_gpt

TINY_GPT = {"@architectures": "spacy-bertfam.GptDecoder.v1", "n_pieces": 300, "hidden_width": 32,
            "n_layers": 3, "n_heads": 4, "intermediate_width": 128, "n_positions": 64,
            "window": 64, "stride": 48, "embedding_dropout": 0.0, "residual_dropout": 0.0,
            "attention_dropout": 0.0}
TEXT = "Hello world, the quick brown fox jumps over the lazy dog. It was the best of times."


@pytest.fixture(scope="module")
def gpt_dir(tmp_path_factory):
    return make_hf_gpt(tmp_path_factory.mktemp("gpt") / "hf")


def gpt_nlp(checkpoint, component=None, **model):
    nlp = spacy.blank("en")
    nlp.add_pipe("gpt_lm", config={"model": {**TINY_GPT, **model}, "store_all_layers": True, **(component or {})})
    nlp.get_pipe("gpt_lm").initialize(lambda: [], nlp=nlp, encoder_loader=checkpoint_loader(checkpoint))
    return nlp


def doc_pieces(nlp, doc):
    words = [(doc[t.i - 1].whitespace_ if t.i else "") + t.text for t in doc]
    return [p for w in nlp.get_pipe("gpt_lm").tokenizer.encode_words([words])[0] for p in w]


def test_pieces_equal_gpt_tokenization_of_running_text(gpt_dir):
    nlp = gpt_nlp(gpt_dir)
    doc = nlp.make_doc(TEXT)
    assert doc_pieces(nlp, doc) == nlp.get_pipe("gpt_lm").tokenizer.encode(TEXT).ids.tolist()


def reference_logprobs(decoder, pieces, starts):
    """Piece j >= 1 after pieces[s:j], s = starts[j - 1]; piece 0 after <|endoftext|> alone."""
    with torch.no_grad():
        first = torch.log_softmax(decoder.logits(decoder(torch.tensor([[0]])).layers[-1])[0, 0], -1)
        scores = [float(first[pieces[0]])]
        for j in range(1, len(pieces)):
            context = torch.tensor([pieces[starts[j - 1]:j]])
            scores.append(float(torch.log_softmax(decoder.logits(decoder(context).layers[-1])[0, -1], -1)[pieces[j]]))
    return np.asarray(scores)


def test_perplexity_is_exp_mean_nll_from_logits(gpt_dir):
    nlp = gpt_nlp(gpt_dir, component={"lm_scores": True})
    doc = nlp(TEXT)
    pieces = doc_pieces(nlp, doc)
    decoder = torch_encoder(nlp.get_pipe("gpt_lm").model).eval()
    expected = reference_logprobs(decoder, pieces, [0] * len(pieces))
    assert doc._.perplexity == pytest.approx(float(np.exp(-expected.mean())), rel=1e-5)
    words = [(doc[t.i - 1].whitespace_ if t.i else "") + t.text for t in doc]
    lengths = [len(w) for w in nlp.get_pipe("gpt_lm").tokenizer.encode_words([words])[0]]
    bounds = np.cumsum([0] + lengths)
    per_token = [expected[a:b].sum() for a, b in zip(bounds[:-1], bounds[1:])]
    assert [t._.logprob for t in doc] == pytest.approx(per_token, rel=1e-4, abs=1e-5)


def test_long_text_scores_carry_left_context(gpt_dir):
    window, stride = 16, 8
    nlp = gpt_nlp(gpt_dir, component={"lm_scores": True}, window=window, stride=stride)
    doc = nlp(TEXT + " " + TEXT)
    pieces = doc_pieces(nlp, doc)
    assert len(pieces) > 3 * window
    decoder = torch_encoder(nlp.get_pipe("gpt_lm").model).eval()
    # Piece j is predicted from piece j - 1 in the earliest window [s, s + 16) holding it.
    starts = [max(0, (i - window) // stride + 1) * stride for i in range(len(pieces))]
    assert all(s <= i < s + window and (s == 0 or i >= s - stride + window) for i, s in enumerate(starts))
    expected = reference_logprobs(decoder, pieces, starts)
    assert doc._.perplexity == pytest.approx(float(np.exp(-expected.mean())), rel=1e-4)


def test_lm_scores_do_not_run_the_decoder_again(gpt_dir):
    calls = {}
    for lm_scores in (False, True):
        nlp = gpt_nlp(gpt_dir, component={"lm_scores": lm_scores}, window=16, stride=8)
        shapes = calls[lm_scores] = []
        torch_encoder(nlp.get_pipe("gpt_lm").model).register_forward_hook(
            lambda module, args, out, shapes=shapes: shapes.append(tuple(args[0].shape)))
        list(nlp.pipe([TEXT, TEXT + " " + TEXT, "Hi"]))
    # Only the beginning-of-text piece's own one-position pass is added.
    assert calls[True] == calls[False] + [(1, 1)]


def test_causal_windows_keep_the_most_left_context(gpt_dir):
    window, stride = 8, 4
    nlp = gpt_nlp(gpt_dir, window=window, stride=stride)
    doc = nlp(TEXT)
    pieces = doc_pieces(nlp, doc)
    enc = doc._.bertfam["gpt_lm"]
    decoder = torch_encoder(nlp.get_pipe("gpt_lm").model).eval()
    for j in range(len(pieces)):
        starts = [s for s in range(0, len(pieces), stride) if s <= j < s + window]
        s = starts[0]  # the earliest window holding j gives it the most left context
        with torch.no_grad():
            layers = decoder(torch.tensor([pieces[s : min(s + window, len(pieces))]])).layers
        for i, layer in enumerate(layers):
            np.testing.assert_allclose(enc.layers[i][j], layer[0, j - s].numpy(), atol=1e-5)
    # The token vector of a causal model is its last piece.
    assert nlp.get_pipe("gpt_lm").contract.default_pooling == "last"


def test_generate_streams_greedy_text(gpt_dir):
    nlp = gpt_nlp(gpt_dir)
    pipe = nlp.get_pipe("gpt_lm")
    text = "".join(pipe.generate("The quick brown", 12))
    ids = torch.tensor([pipe.tokenizer.encode("The quick brown").ids.tolist()])
    want = [int(t) for t in generate(torch_encoder(pipe.model), ids, torch.ones_like(ids), max_new_tokens=12)]
    assert text == pipe.tokenizer.decode(want)
    batched = list(pipe.generate(["The quick brown", "hello"], 12))
    assert "".join(step[0] for step in batched) == text
    assert list(pipe.generate("hello", 5, temperature=0.8, top_p=0.9, seed=7)) == list(
        pipe.generate("hello", 5, temperature=0.8, top_p=0.9, seed=7))


@pytest.mark.parametrize("kwargs, message", [
    ({"max_new_tokens": -1}, "max_new_tokens must be >= 0, got -1"),
    ({"max_new_tokens": 3, "temperature": 1.0, "top_p": 0.0}, r"top_p must be in \(0, 1\], got 0.0"),
    ({"max_new_tokens": 60}, "new pieces exceeds the 64 positions"),
])
def test_generate_rejects_bad_arguments(gpt_dir, kwargs, message):
    pipe = gpt_nlp(gpt_dir).get_pipe("gpt_lm")
    with pytest.raises(ValueError, match=message):
        list(pipe.generate("The quick brown fox jumps over the lazy dog", **kwargs))


def _textcat_nlp(checkpoint, lm_weight, n_listeners=1):
    nlp = spacy.blank("en")
    nlp.add_pipe("gpt_lm", config={"model": TINY_GPT, "lm_weight": lm_weight})
    for i in range(n_listeners):
        nlp.add_pipe("textcat", name=f"textcat{i}", config={"model": {
            "@architectures": "spacy.TextCatReduce.v1", "exclusive_classes": True, "use_reduce_first": False,
            "use_reduce_last": True, "use_reduce_max": False, "use_reduce_mean": False,
            "tok2vec": {"@architectures": "spacy-bertfam.EncoderListener.v1", "width": 32, "grad_factor": 0.0}}})
    examples = [Example.from_dict(nlp.make_doc(t), {"cats": {"A": float(i % 2), "B": float(1 - i % 2)}})
                for i, t in enumerate([TEXT, "hello world", "the lazy dog", "It was the best of times."])]
    nlp.config["initialize"]["components"]["gpt_lm"] = {
        "encoder_loader": {"@misc": "spacy-bertfam.CheckpointLoader.v1", "path": str(checkpoint)}}
    torch.manual_seed(0)
    optimizer = nlp.initialize(lambda: examples)
    return nlp, examples, optimizer


def _step(nlp, examples, optimizer):
    before = {k: v.clone() for k, v in torch_encoder(nlp.get_pipe("gpt_lm").model).state_dict().items()}
    losses = nlp.update(examples, sgd=optimizer, drop=0.0)
    after = torch_encoder(nlp.get_pipe("gpt_lm").model).state_dict()
    return losses, {k: after[k] - before[k] for k in before}


def test_lm_loss_trains_decoder_once_per_update(gpt_dir):
    # Listeners send no gradient (grad_factor 0): any change comes from λ·LM loss.
    nlp, examples, opt = _textcat_nlp(gpt_dir, lm_weight=0.0)
    losses, delta = _step(nlp, examples, opt)
    assert all(float(d.abs().max()) == 0.0 for d in delta.values())
    one, examples, opt = _textcat_nlp(gpt_dir, lm_weight=0.5)
    losses_one, delta_one = _step(one, examples, opt)
    assert losses_one["gpt_lm"] > 0  # the LM loss is what the log shows for gpt_lm
    assert "lm_loss" not in one.get_pipe("gpt_lm").model.attrs  # a value of the pass: not saved with the model
    assert float(delta_one["pieces.weight"].abs().max()) > 0
    two, examples, opt = _textcat_nlp(gpt_dir, lm_weight=0.5, n_listeners=2)
    losses_two, delta_two = _step(two, examples, opt)
    assert losses_two["gpt_lm"] == pytest.approx(losses_one["gpt_lm"], rel=1e-6)
    for key in delta_one:
        torch.testing.assert_close(delta_two[key], delta_one[key], atol=1e-7, rtol=1e-5)


def test_lm_weight_given_at_load_time_wins(gpt_dir, tmp_path):
    nlp, examples, opt = _textcat_nlp(gpt_dir, lm_weight=0.5)
    nlp.to_disk(tmp_path / "p")
    off = spacy.load(tmp_path / "p", config={"components": {"gpt_lm": {"lm_weight": 0.0}}})
    assert off.get_pipe("gpt_lm").cfg["lm_weight"] == 0.0
    _, delta = _step(off, examples, off.resume_training())
    assert all(float(d.abs().max()) == 0.0 for d in delta.values())  # no LM loss: nothing trains it
    on = spacy.load(tmp_path / "p")
    _, delta = _step(on, examples, on.resume_training())
    assert float(delta["pieces.weight"].abs().max()) > 0


def test_torch_compile_gives_the_eager_features(gpt_dir):
    eager, compiled = gpt_nlp(gpt_dir), gpt_nlp(gpt_dir, component={"torch_compile": True})
    for text in (TEXT, " ".join([TEXT] * 12)):  # one window, then several (the causal window rule)
        a, b = eager(text)._.bertfam["gpt_lm"].layers, compiled(text)._.bertfam["gpt_lm"].layers
        assert a.keys() == b.keys() and all(np.abs(a[k] - b[k]).max() < 1e-5 for k in a)


@pytest.mark.parametrize("precision,bound,perplexity_rel", [("bf16", 0.03, 0.02), ("int8", 0.02, 0.01)])
def test_reduced_precision_features_and_scores_are_close_to_fp32(gpt_dir, precision, bound, perplexity_rel):
    # bf16 prediction runs a bfloat16 copy of the decoder (within bf16's ~3 digits); int8 a copy
    # whose linear layers multiply in int8 (the feed-forward output in bf16 or fp32; measured
    # 0.0017-0.0022), where the embeddings have no linear layer and stay exact. The LM scores
    # read the copy's top layer.
    full = gpt_nlp(gpt_dir, component={"lm_scores": True})
    reduced = gpt_nlp(gpt_dir, component={"lm_scores": True, "precision": precision})
    for text in (TEXT, " ".join([TEXT] * 12)):
        a, b = full(text), reduced(text)
        layers_a, layers_b = a._.bertfam["gpt_lm"].layers, b._.bertfam["gpt_lm"].layers
        inexact = sorted(layers_a)
        if precision == "int8":
            assert np.array_equal(layers_a[0], layers_b[0])
            inexact = inexact[1:]
        for k in inexact:
            assert layers_b[k].dtype == np.float32
            error = np.linalg.norm(layers_a[k] - layers_b[k]) / np.linalg.norm(layers_a[k])
            assert 0 < error < bound, (k, error)  # it ran in the reduced precision
        assert b._.perplexity == pytest.approx(a._.perplexity, rel=perplexity_rel)


def test_a_prediction_between_streamed_steps_does_not_turn_dropout_on(gpt_dir):
    """thinc's shim leaves the decoder in training mode after a prediction: the next steps of a
    streamed generation ran with dropout and came out different."""
    nlp = gpt_nlp(gpt_dir, embedding_dropout=0.3, residual_dropout=0.3, attention_dropout=0.3)
    pipe = nlp.get_pipe("gpt_lm")
    uninterrupted = list(pipe.generate("The quick brown", 12))
    steps = pipe.generate("The quick brown", 12)
    streamed = [next(steps)]
    nlp("another request")
    assert torch_encoder(pipe.model).training  # what the generation has to cope with
    streamed += list(steps)
    assert streamed == uninterrupted


def test_generation_may_use_every_position(gpt_dir):
    """The last new piece is never fed back, so prompt + new - 1 positions suffice."""
    pipe = gpt_nlp(gpt_dir).get_pipe("gpt_lm")
    n_prompt = len(pipe.tokenizer.encode("The quick brown").ids)
    assert len(list(pipe.generate("The quick brown", 64 - n_prompt + 1))) == 64 - n_prompt + 1
    with pytest.raises(ValueError, match="exceeds the 64 positions"):
        list(pipe.generate("The quick brown", 64 - n_prompt + 2))


def test_a_continuation_ends_at_end_of_text(gpt_dir, monkeypatch):
    import spacy_bertfam.pipeline.gpt_lm as gpt_lm

    pipe = gpt_nlp(gpt_dir).get_pipe("gpt_lm")
    tok = pipe.tokenizer
    eot = tok.piece_id("<|endoftext|>")
    a, b = tok.encode(" dog").ids.tolist()[0], tok.encode(" cat").ids.tolist()[0]
    rows = [[a, eot, b, b], [b, a, a, b]]  # the first prompt's model ends its text at step 2

    def scripted(decoder, batch, mask, *, max_new_tokens, **kwargs):
        for k in range(max_new_tokens):
            yield torch.tensor([row[k] for row in rows[: batch.shape[0]]])

    monkeypatch.setattr(gpt_lm, "generate", scripted)
    steps = list(pipe.generate(["x", "y"], 4))
    assert ["".join(s[i] for s in steps) for i in (0, 1)] == [tok.decode([a]), tok.decode([b, a, a, b])]
    assert steps[1][0] == "" and steps[2][0] == ""
    rows[1] = [b, eot, a, a]
    assert len(list(pipe.generate(["x", "y"], 4))) == 2  # all finished: no more steps
    assert "".join(pipe.generate("x", 4, stop_at_end_of_text=False)) == tok.decode([a, eot, b, b])


def test_lm_scores_of_a_sentence_pair_score_each_segment_as_its_own_text(gpt_dir):
    """GPT encodes a pair's segments as two texts; the scores read the Doc as one stream (the
    second segment's first piece from the first's last row, the rest from its own rows)."""
    nlp = gpt_nlp(gpt_dir, component={"lm_scores": True})
    pair = nlp.make_doc("Who ran? The dog ran fast")
    pair.spans["first_segment"] = [pair[0:3]]
    pair = nlp(pair)
    a, b = nlp("Who ran?"), nlp("The dog ran fast")
    np.testing.assert_allclose(pair._.token_logprobs,
                               np.concatenate([a._.token_logprobs, b._.token_logprobs]), atol=1e-5)
    assert np.isfinite(pair._.perplexity)
