"""Reduced precision: bf16 and int8 stay close to fp32, bf16 trains, and both are saved with the pipeline."""
import numpy as np
import pytest
import spacy
from confection import ConfigValidationError

from spacy_bertfam.loaders import checkpoint_loader, pretrained_loader

from ..conftest import make_hf_bert
from .pipelines import TINY_ENCODER, build, examples

TEXT = "Alex moved from Chicago to Berlin to work for Siemens, and the river bank flooded in May."


def _minilm(precision):
    nlp = spacy.blank("en")
    nlp.add_pipe("bert_encoder", config={"store_all_layers": True, "precision": precision})
    nlp.get_pipe("bert_encoder").initialize(lambda: [], nlp=nlp, encoder_loader=pretrained_loader())
    return nlp


def test_bf16_layers_are_close_to_fp32(minilm_dir):
    full, half = _minilm("fp32")(TEXT), _minilm("bf16")(TEXT)
    errors = []
    for layer in range(7):
        a = full._.bertfam["bert_encoder"].layers[layer]
        b = half._.bertfam["bert_encoder"].layers[layer]
        assert b.dtype == np.float32
        errors.append(float(np.linalg.norm(a - b) / np.linalg.norm(a)))
    print("bf16 relative error per layer:", [round(e, 4) for e in errors])
    assert max(errors) < 0.03 and errors[-1] > 0  # bf16 keeps ~3 significant digits; it did run in bf16
    cosine = (full.tensor * half.tensor).sum(1) / np.linalg.norm(full.tensor, axis=1) / np.linalg.norm(half.tensor, axis=1)
    assert cosine.min() > 0.995


def test_bf16_training_lowers_the_loss_and_is_saved(tmp_path):
    nlp = build(make_hf_bert(tmp_path / "bert"), textcat={}, encoder={"precision": "bf16"})
    optimizer = nlp.initialize(lambda: examples(nlp))
    history = []
    for _ in range(30):
        losses = nlp.update(examples(nlp), sgd=optimizer)
        history.append(losses["ner"] + losses["textcat"])
    assert all(np.isfinite(history)) and np.mean(history[-5:]) < 0.5 * np.mean(history[:5]), history
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.get_pipe("bert_encoder").contract.precision == "bf16"
    assert np.array_equal(loaded("the cat sat on the mat").tensor, nlp("the cat sat on the mat").tensor)


def test_fp16_needs_a_gpu_and_unknown_precisions_are_refused(hf_bert_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("bert_encoder", config={"precision": "fp16", "model": TINY_ENCODER})
    encoder = nlp.get_pipe("bert_encoder")
    # Refused as a config error when initialised, so `spacy train` stops before its first step ...
    with pytest.raises(ConfigValidationError, match='precision "fp16" needs a GPU'):
        encoder.initialize(lambda: [], nlp=nlp, encoder_loader=checkpoint_loader(hf_bert_dir))
    # ... and when predicting, e.g. spacy.load(path, config=...) of a pipeline trained elsewhere.
    encoder.contract.request_precision("fp32")
    encoder.initialize(lambda: [], nlp=nlp, encoder_loader=checkpoint_loader(hf_bert_dir))
    encoder.contract.request_precision("fp16")
    with pytest.raises(ConfigValidationError, match='precision "fp16" needs a GPU'):
        nlp("the cat")
    with pytest.raises(ValueError, match="Unknown precision 'int4'"):
        spacy.blank("en").add_pipe("bert_encoder", config={"precision": "int4"})


def test_int8_layers_are_close_to_fp32(minilm_dir):
    full, int8 = _minilm("fp32")(TEXT), _minilm("int8")(TEXT)
    errors = [float(np.linalg.norm(a - b) / np.linalg.norm(a)) for a, b in
              ((full._.bertfam["bert_encoder"].layers[i], int8._.bertfam["bert_encoder"].layers[i]) for i in range(7))]
    print("int8 relative error per layer:", [round(e, 4) for e in errors])
    # The embeddings have no linear layer (exact); each block's linear layers but the
    # feed-forward output are int8 (models/quantize.py), that one bf16 on a CPU with bf16
    # products, else fp32. Measured: 0.009-0.018 per block with it in bf16 (AVX512-BF16), 0.009-0.017
    # in fp32, with each layer's 8 outlier channels in fp32 and the others smoothed; 0.009-0.019 with the
    # outlier channels alone; 0.012-0.036 with neither (0.07-0.17 when activations were
    # quantized per batch).
    assert errors[0] == 0 and 0 < errors[-1] and max(errors) < 0.03
    cosine = (full.tensor * int8.tensor).sum(1) / np.linalg.norm(full.tensor, axis=1) / np.linalg.norm(int8.tensor, axis=1)
    assert cosine.min() > 0.99  # measured 0.997


def test_int8_predicts_after_fp32_training_and_is_saved(tmp_path):
    nlp = build(make_hf_bert(tmp_path / "bert"), textcat={})
    optimizer = nlp.initialize(lambda: examples(nlp))
    for _ in range(3):
        nlp.update(examples(nlp), sgd=optimizer)
    nlp.to_disk(tmp_path / "pipeline")
    fp32 = spacy.load(tmp_path / "pipeline")
    int8 = spacy.load(tmp_path / "pipeline", config={"components": {"bert_encoder": {"precision": "int8"}}})
    before = int8("the cat sat on the mat").tensor
    assert 0 < np.abs(before - fp32("the cat sat on the mat").tensor).max() < 0.1
    int8.to_disk(tmp_path / "int8")
    again = spacy.load(tmp_path / "int8")
    assert again.get_pipe("bert_encoder").contract.precision == "int8"
    assert np.array_equal(again("the cat sat on the mat").tensor, before)
    with pytest.raises(ValueError, match='precision "int8" is for prediction only'):
        int8.update(examples(int8), sgd=int8.resume_training())


@pytest.mark.parametrize("precision", ["int8", "bf16"])
def test_reduced_precision_copy_follows_the_weights(tmp_path, precision):
    # int8 and bf16 predict with a copy of the weights in that precision, made again after
    # an update: predictions follow the new weights (a stale copy would repeat its earlier
    # output exactly).
    nlp = build(make_hf_bert(tmp_path / "bert"), textcat={})
    optimizer = nlp.initialize(lambda: examples(nlp))
    encoder = nlp.get_pipe("bert_encoder")
    encoder.contract.request_precision(precision)
    before = nlp("the cat sat on the mat").tensor
    if precision == "int8":  # int8 does not train
        encoder.contract.request_precision("fp32")
    nlp.update(examples(nlp), sgd=optimizer)
    encoder.contract.request_precision(precision)
    after = nlp("the cat sat on the mat").tensor
    encoder.contract.request_precision("fp32")
    assert not np.array_equal(after, before)
    assert np.abs(after - nlp("the cat sat on the mat").tensor).max() < 0.1
    # Likewise when other weights are loaded into the encoder.
    encoder.contract.request_precision(precision)
    copied = nlp("the cat sat on the mat").tensor  # made with a fresh copy
    other = make_hf_bert(tmp_path / "other", seed=1)
    encoder.initialize(lambda: [], nlp=nlp, encoder_loader=checkpoint_loader(other))
    assert not np.array_equal(nlp("the cat sat on the mat").tensor, copied)


def test_torch_compile_predicts_as_eager_follows_updates_and_is_saved(tmp_path):
    nlp = build(make_hf_bert(tmp_path / "bert"), textcat={})
    optimizer = nlp.initialize(lambda: examples(nlp))
    nlp.update(examples(nlp), sgd=optimizer)
    # Short docs and a windowed long one: encoder calls of several shapes, one compile.
    texts = ["the cat sat on the mat", "river bank", " ".join(["the dog ran to the river bank"] * 30)]
    encoder = nlp.get_pipe("bert_encoder")

    def run():
        docs = list(nlp.pipe(texts))
        return [d.tensor for d in docs], [[(e.start, e.end, e.label_) for e in d.ents] for d in docs], [d.cats for d in docs]

    eager = run()
    encoder.contract.request_compile(True)
    compiled = run()
    assert all(np.abs(a - b).max() < 1e-5 for a, b in zip(eager[0], compiled[0]))
    assert compiled[1] == eager[1]
    assert all(abs(a[k] - b[k]) < 1e-5 for a, b in zip(eager[2], compiled[2]) for k in a)
    # Training runs eagerly and the compiled encoder reads the updated weights.
    nlp.update(examples(nlp), sgd=optimizer)
    after = run()[0]
    encoder.contract.request_compile(False)
    assert not np.array_equal(after[0], compiled[0][0])
    assert all(np.abs(a - b).max() < 1e-5 for a, b in zip(after, run()[0]))
    # A copy of the encoder (replace_listeners) compiles its own from its own weights.
    encoder.contract.request_compile(True)
    shared = run()[1]
    nlp.replace_listeners("bert_encoder", "ner", ["model.tok2vec"])
    assert run()[1] == shared
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline", config={"components": {"bert_encoder": {"torch_compile": True}}})
    assert np.abs(loaded(texts[0]).tensor - after[0]).max() < 1e-5
    loaded.to_disk(tmp_path / "compiled")
    assert spacy.load(tmp_path / "compiled").get_pipe("bert_encoder").contract.torch_compile


def test_elmo_refuses_compile_and_int8_and_int8_refuses_compile(hf_bert_dir):
    with pytest.raises(ValueError, match="torch_compile is for the transformer encoders"):
        spacy.blank("en").add_pipe("elmo_features", config={"torch_compile": True})
    with pytest.raises(ValueError, match='precision "int8" .* is for bert_encoder and gpt_lm'):
        spacy.blank("en").add_pipe("elmo_features", config={"precision": "int8"})
    nlp = spacy.blank("en")
    nlp.add_pipe("bert_encoder", config={"precision": "int8", "torch_compile": True, "model": TINY_ENCODER})
    nlp.get_pipe("bert_encoder").initialize(lambda: [], nlp=nlp, encoder_loader=checkpoint_loader(hf_bert_dir))
    with pytest.raises(ValueError, match='torch_compile does not apply to precision "int8"'):
        nlp("the cat")


@pytest.mark.parametrize("precision,present,warns", [
    ("bf16", {}, True), ("int8", {}, True), ("fp32", {}, False),
    ("bf16", {"avx512_bf16": True}, False), ("int8", {"avx_vnni": True}, False), ("int8", {"avx512_bf16": True}, True),
])
def test_reduced_precision_on_a_cpu_that_emulates_it_warns(hf_bert_dir, monkeypatch, precision, present, warns):
    """An AVX2-only CPU runs bf16 and int8 products 10-50x slower than fp32: the user is told,
    with what to set instead; the setting itself is kept."""
    import warnings

    import torch

    from spacy_bertfam.encoders import contract, cpu_support

    features = {"architecture": "x86_64", "cpu_name": "Test CPU", "avx2": True, **present}
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: features)
    monkeypatch.setattr(cpu_support, "emulated_on_cpu", cpu_support.emulated_on_cpu.__wrapped__)
    monkeypatch.setattr(contract, "fast_on_cpu", cpu_support.fast_on_cpu.__wrapped__)  # the int8 copy's kept layers
    monkeypatch.setattr(cpu_support, "_WARNED", set())
    nlp = spacy.blank("en")
    nlp.add_pipe("bert_encoder", config={"precision": precision, "model": TINY_ENCODER})
    nlp.get_pipe("bert_encoder").initialize(lambda: [], nlp=nlp, encoder_loader=checkpoint_loader(hf_bert_dir))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        doc = nlp("the cat sat")
    slow = [w for w in caught if issubclass(w.category, cpu_support.SlowPrecisionWarning)]
    assert len(doc.tensor) == 3 and nlp.get_pipe("bert_encoder").contract.precision == precision
    if warns:
        assert slow and f'precision "{precision}"' in str(slow[0].message) and "Test CPU" in str(slow[0].message)
        assert 'precision = "fp32"' in str(slow[0].message)
    else:
        assert not slow


@pytest.mark.parametrize("bf16_products", [True, False])
def test_int8_multiplies_the_feed_forward_output_in_bf16_where_the_cpu_has_bf16_products(
        hf_bert_dir, monkeypatch, bf16_products):
    """int8 keeps each block's feed-forward output projection out of int8: in bfloat16 on a CPU
    with bf16 products (as close to fp32's entities, twice as fast), else in float32."""
    import torch
    from torch import nn

    from spacy_bertfam.encoders import contract, cpu_support
    from spacy_bertfam.models.layers.feedforward import FeedForward
    from spacy_bertfam.models.quantize import CastLinear, Int8Linear

    features = {"architecture": "x86_64", "avx512_vnni": True, "avx512_bf16": bf16_products}
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: features)
    monkeypatch.setattr(contract, "fast_on_cpu", cpu_support.fast_on_cpu.__wrapped__)
    nlp = spacy.blank("en")
    nlp.add_pipe("bert_encoder", config={"precision": "int8", "model": TINY_ENCODER})
    nlp.get_pipe("bert_encoder").initialize(lambda: [], nlp=nlp, encoder_loader=checkpoint_loader(hf_bert_dir))
    doc = nlp("the cat sat")
    assert np.isfinite(doc.tensor).all() and len(doc.tensor) == 3
    shim = next(m for m in nlp.get_pipe("bert_encoder").model.walk() if m.shims).shims[0]
    blocks = [m for m in shim._copied_model.modules() if isinstance(m, FeedForward)]
    assert blocks and all(isinstance(b.up, Int8Linear) for b in blocks)
    if bf16_products:
        assert all(isinstance(b.down, CastLinear) and b.down.weight.dtype == torch.bfloat16 for b in blocks)
    else:
        assert all(isinstance(b.down, nn.Linear) and b.down.weight.dtype == torch.float32 for b in blocks)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_prediction_multiplies_in_a_bounded_set_of_row_counts(hf_bert_dir, capfd, precision):
    """oneDNN keeps a compiled product per shape (`models.layers.linear`): over texts of many
    lengths the encoder's linear layers must show it only the padded row counts."""
    import torch

    if not torch.backends.mkldnn.is_available() or (
            precision == "bf16" and not torch.ops.mkldnn._is_mkldnn_bf16_supported()):
        pytest.skip("no oneDNN products of this precision on this CPU")
    nlp = spacy.blank("en")
    nlp.add_pipe("bert_encoder", config={"precision": precision, "model": TINY_ENCODER})
    nlp.get_pipe("bert_encoder").initialize(lambda: [], nlp=nlp, encoder_loader=checkpoint_loader(hf_bert_dir))
    texts = [" ".join(["Berlin is a city in Germany ."] * k) for k in (1, 2, 3, 5, 8, 13, 21, 40)]
    capfd.readouterr()
    with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
        docs = list(nlp.pipe(texts, batch_size=3))
    problems = [line.split(",")[-2] for line in capfd.readouterr().out.splitlines()
                if ",exec," in line and ",inner_product," in line]
    rows = {int(p[2:].split("ic")[0]) for p in problems}
    assert len(problems) >= 8 and all(len(doc.tensor) == len(doc) for doc in docs)
    assert all(n in (1, 2, 4, 8, 16, 32) or n % 64 == 0 for n in rows), rows
