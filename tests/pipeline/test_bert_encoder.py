"""The bert_encoder component: loading, saving, windows, awkward input."""
import shutil
import subprocess
import sys

import numpy as np
import pytest
import spacy
import torch

from spacy_bertfam.encoders import contract_of, torch_encoder
from spacy_bertfam.loaders import checkpoint_loader
from spacy_bertfam.pipeline.encoder import READ_AHEAD_CALLS

TINY_MODEL = {
    "@architectures": "spacy-bertfam.BertEncoder.v1",
    "n_pieces": 120, "hidden_width": 32, "n_layers": 3, "n_heads": 4,
    "intermediate_width": 64, "n_positions": 64, "window": 64, "stride": 48,
}


def tiny_nlp(checkpoint, component=None, **model_overrides):
    nlp = spacy.blank("en")
    config = {"model": {**TINY_MODEL, **model_overrides}, "store_all_layers": True, **(component or {})}
    nlp.add_pipe("bert_encoder", config=config)
    nlp.get_pipe("bert_encoder").initialize(lambda: [], nlp=nlp, encoder_loader=checkpoint_loader(checkpoint))
    return nlp


def bare_outputs(nlp, pieces):
    """Every layer of the bare model on one [CLS] pieces [SEP] sequence."""
    model = nlp.get_pipe("bert_encoder").model
    tok = contract_of(model).tokenizer
    ids = torch.tensor([[tok.piece_id("[CLS]"), *pieces, tok.piece_id("[SEP]")]])
    with torch.no_grad():
        return [layer[0, 1:-1].numpy() for layer in torch_encoder(model).eval()(ids).layers]


# An import hook that fails any import of Hugging Face transformers made from our
# package's code (the peer spacy-transformers, if installed, may import it itself).
NO_TRANSFORMERS_FROM_US = """
import sys, traceback
class _Watch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "transformers" and any(
            "spacy_bertfam" in f.filename for f in traceback.extract_stack()
        ):
            raise ImportError("spacy_bertfam imported transformers")
sys.meta_path.insert(0, _Watch())
"""

TEXT = "the cat sat on the mat and the dog ran to the river bank hello world " * 3


def test_uninitialised_encoder_raises():
    nlp = spacy.blank("en")
    nlp.add_pipe("bert_encoder", config={"model": TINY_MODEL})
    with pytest.raises(ValueError, match="encoder was never initialised"):
        nlp("the cat")
    with pytest.raises(ValueError, match="no weights to initialise from"):
        nlp.initialize()


def test_only_layers_in_use_are_stored(hf_bert_dir):
    nlp = tiny_nlp(hf_bert_dir, component={"store_all_layers": False, "tensor_layer": 1})
    assert sorted(nlp("the cat")._.bertfam["bert_encoder"].layers) == [1]


def test_vector_hooks_use_contextual_vectors(hf_bert_dir):
    nlp = tiny_nlp(hf_bert_dir)
    doc = nlp("the cat sat on the mat")
    np.testing.assert_allclose(doc[1].vector, doc.tensor[1])
    np.testing.assert_allclose(doc[1:3].vector, doc.tensor[1:3].mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(doc.vector, doc.tensor.mean(axis=0), rtol=1e-6)
    a, b = doc.tensor[1], doc.tensor[5]
    assert doc[1].similarity(doc[5]) == pytest.approx(float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)), rel=1e-5)
    assert doc.similarity(nlp("the dog ran")) < 1.0
    plain = tiny_nlp(hf_bert_dir, component={"user_hooks": False})("the cat")
    assert "vector" not in plain.user_hooks


def test_saved_pipeline_loads_without_checkpoint(tmp_path, hf_bert_dir):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(hf_bert_dir, ckpt)
    nlp = tiny_nlp(ckpt)
    before = nlp(TEXT).tensor
    nlp.to_disk(tmp_path / "pipeline")
    shutil.rmtree(ckpt)
    script = NO_TRANSFORMERS_FROM_US + (
        "import numpy, spacy\n"
        f"nlp = spacy.load({str(tmp_path / 'pipeline')!r})\n"
        f"numpy.save({str(tmp_path / 'after.npy')!r}, nlp({TEXT!r}).tensor)\n"
    )
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", script], check=True, env=env)
    after = np.load(tmp_path / "after.npy")
    assert before.shape == (len(nlp(TEXT)), 32)
    np.testing.assert_allclose(after, before, atol=1e-6)
    from_bytes = spacy.blank("en")
    from_bytes.add_pipe("bert_encoder", config={"model": TINY_MODEL})
    from_bytes.from_bytes(nlp.to_bytes())
    np.testing.assert_allclose(from_bytes(TEXT).tensor, before, atol=1e-6)


def test_window_covering_doc_equals_bare_model(hf_bert_dir):
    nlp = tiny_nlp(hf_bert_dir)
    doc = nlp("the cat sat on the mat")
    enc = doc._.bertfam["bert_encoder"]
    pieces = nlp.get_pipe("bert_encoder").contract.tokenizer.encode_words([[t.text for t in doc]])[0]
    bare = bare_outputs(nlp, [p for word in pieces for p in word])
    assert sorted(enc.layers) == [0, 1, 2, 3]
    for i, layer in enumerate(bare):
        np.testing.assert_allclose(enc.layers[i], layer, atol=1e-5)


def test_small_windows_average_overlaps(hf_bert_dir):
    window, stride = 8, 4  # 6 content pieces per window, starting every 4
    nlp = tiny_nlp(hf_bert_dir, window=window, stride=stride)
    doc = nlp("the cat sat on the mat the dog ran on the river bank")
    enc = doc._.bertfam["bert_encoder"]
    ids = [p for w in nlp.get_pipe("bert_encoder").contract.tokenizer.encode_words([[t.text for t in doc]])[0] for p in w]
    n = len(ids)
    assert n == 13
    sums = [np.zeros((n, 32), dtype=np.float32) for _ in range(4)]
    counts = np.zeros(n)
    for start in (0, 4, 8):  # windows [0,6) [4,10) [8,13)
        end = min(start + 6, n)
        for i, layer in enumerate(bare_outputs(nlp, ids[start:end])):
            sums[i][start:end] += layer
        counts[start:end] += 1
    assert counts.tolist() == [1, 1, 1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 1]
    for i in range(4):
        np.testing.assert_allclose(enc.layers[i], sums[i] / counts[:, None], atol=1e-5)


def test_first_last_doc_tensor_is_twice_as_wide_also_for_an_empty_doc(hf_bert_dir):
    nlp = tiny_nlp(hf_bert_dir, component={"tensor_pooling": "first_last", "tensor_layer": -1})
    doc, empty = nlp("the cat sat"), nlp("")
    enc = doc._.bertfam["bert_encoder"]
    top = enc.layers[max(enc.layers)]
    firsts = np.cumsum(enc.token_lengths) - enc.token_lengths
    lasts = np.cumsum(enc.token_lengths) - 1
    np.testing.assert_allclose(doc.tensor, np.hstack([top[enc.token_pieces[firsts]], top[enc.token_pieces[lasts]]]))
    assert doc.tensor.shape == (3, 64) and empty.tensor.shape == (0, 64)


def test_long_document_is_encoded_completely(hf_bert_dir):
    nlp = tiny_nlp(hf_bert_dir)
    doc = nlp("the cat sat on the mat . " * 2860)  # 20,020 tokens
    assert len(doc) >= 20000
    assert doc.tensor.shape == (len(doc), 32)
    assert np.isfinite(doc.tensor).all()
    assert (np.abs(doc.tensor).sum(axis=1) > 0).all()


@pytest.mark.parametrize(
    "text",
    ["", "   ", "\n\n\t ", "x" * 10000, "control\x00\x07\x1b chars", "mixed 東京 русский 🙂 عربي text",
     "a \u200b b", " leading and trailing "],
)
def test_awkward_input_gives_vectors(hf_bert_dir, text):
    nlp = tiny_nlp(hf_bert_dir)
    doc = nlp(text)
    enc = doc._.bertfam["bert_encoder"]
    assert doc.tensor.shape == (len(doc), 32)
    assert np.isfinite(doc.tensor).all()
    assert len(enc.token_lengths) == len(doc)
    assert (enc.token_lengths >= 1).all()


def test_batch_equals_single_docs(hf_bert_dir):
    nlp = tiny_nlp(hf_bert_dir)
    texts = ["the cat", "the dog ran on the river bank " * 20, "hello world", ""]
    batched = [d.tensor for d in nlp.pipe(texts, batch_size=4)]
    for text, vec in zip(texts, batched):
        np.testing.assert_allclose(nlp(text).tensor, vec, atol=1e-5)


def test_length_chunks_equal_single_docs(hf_bert_dir):
    # A small piece budget splits the batch into several encoder calls by length.
    nlp = tiny_nlp(hf_bert_dir, batch_pieces=40)
    texts = [" ".join(["the cat sat on the mat"] * n) for n in (1, 5, 2, 9, 1, 3, 12, 2, 1, 4, 7, 1)]
    model = nlp.get_pipe("bert_encoder").model
    docs = [nlp.make_doc(t) for t in texts]
    from spacy_bertfam.tokenization.alignment import align_tokens
    from spacy_bertfam.tokenization.windows import plan_windows

    pieces = align_tokens(contract_of(model).tokenizer, [[t.text for t in d] for d in docs], unk_id=1)
    plan = plan_windows([p.ids for p in pieces], window=64, stride=48, prefix=[2], suffix=[3],
                        padding_id=0, batch_pieces=40)
    assert len(plan.chunks) > 3
    batched = model.predict(docs)
    for doc, enc in zip(docs, batched):
        alone = model.predict([doc])[0]
        for layer in enc.layers:
            np.testing.assert_allclose(enc.layers[layer], alone.layers[layer], atol=1e-5)


def test_window_larger_than_positions_is_rejected(hf_bert_dir):
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match="window 65 exceeds the 64 positions"):
        nlp.add_pipe("bert_encoder", config={"model": {**TINY_MODEL, "window": 65}})
    with pytest.raises(ValueError, match="stride 63 must be between 1 and the window's 62"):
        nlp.add_pipe("bert_encoder", config={"model": {**TINY_MODEL, "stride": 63}})


def test_read_ahead_is_bounded_by_tokens(hf_bert_dir):
    # nlp.pipe reads ahead sort_batches batches, but never much more than
    # READ_AHEAD_CALLS × batch_pieces tokens: each buffered Doc holds its outputs until
    # the buffer is yielded, so long texts would otherwise grow memory with their length.
    nlp = tiny_nlp(hf_bert_dir, {"sort_batches": 4}, batch_pieces=40)
    assert READ_AHEAD_CALLS == 2
    encoder = nlp.get_pipe("bert_encoder")

    def most_read_ahead(text):
        pulled, ahead = [0], []

        def stream():
            for _ in range(40):
                pulled[0] += 1
                yield nlp.make_doc(text)

        for i, doc in enumerate(encoder.pipe(stream(), batch_size=8)):
            assert doc._.bertfam["bert_encoder"] is not None
            ahead.append(pulled[0] - i)
        assert len(ahead) == 40
        return max(ahead)

    # 30 tokens each: a buffer holds 2 docs, since a third would pass 2 × 40 tokens; that
    # third one, read to find out, starts the next buffer (3 read ahead, not 4 × 8).
    assert most_read_ahead("the cat sat on the mat " * 5) == 3
    # 2 tokens each: the doc count (4 batches of 8) is the bound.
    assert most_read_ahead("the cat") == 32


def test_an_encoder_call_holds_at_most_max_docs(hf_bert_dir):
    # ELMo sets max_docs (the rows of its LSTM steps); any family honours it in nlp.pipe.
    nlp = tiny_nlp(hf_bert_dir)
    encoder = nlp.get_pipe("bert_encoder")
    encoder.contract.max_docs = 3
    calls, predict = [], encoder.predict
    encoder.predict = lambda docs: calls.append(len(docs)) or predict(docs)
    texts = ["the cat", "the cat sat on the mat", "hello"] * 4
    docs = list(nlp.pipe(texts, batch_size=12))
    assert calls == [3, 3, 3, 3]
    encoder.contract.max_docs = None
    calls.clear()
    again = list(nlp.pipe(texts, batch_size=12))
    assert calls == [12]
    assert all(np.allclose(a.tensor, b.tensor, atol=1e-5) for a, b in zip(again, docs))


def test_a_kept_doc_holds_only_its_own_outputs(hf_bert_dir):
    # Each Doc's stored layers are its own arrays, not views of the batch's: a view would keep
    # the whole batch's outputs alive for as long as one of its Docs is kept.
    nlp = tiny_nlp(hf_bert_dir)
    docs = list(nlp.pipe(["the cat sat on the mat", "hello river bank", "the dog ran"], batch_size=3))
    layers = [doc._.bertfam["bert_encoder"].layers for doc in docs]
    assert len(layers[0]) == 4
    for k in layers[0]:
        rows = [stored[k] for stored in layers]
        assert all(r.base is None or r.base.size == r.size for r in rows)
        assert not any(np.shares_memory(a, b) for i, a in enumerate(rows) for b in rows[i + 1:])
