"""elmo_features: the shared contract over ELMo, stateless vectors, the per-task scalar mix."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import spacy
import torch
from spacy.tokens import DocBin

from spacy_bertfam.convert import Checkpoint, read_checkpoint, save_checkpoint
from spacy_bertfam.encoders import DocEncoding, EncoderContract, torch_encoder
from spacy_bertfam.loaders import checkpoint_loader
from spacy_bertfam.models.elmo import ElmoBiLM, ElmoConfig
from spacy_bertfam.pooling import build_pooler, link_pooler
from spacy_bertfam.tokenization.characters import batch_char_ids

from ..conftest import TEST_DATA
from .pipelines import TRAIN

FIXTURE = TEST_DATA / "elmo_test_fixture"
FIXTURE_MODEL = {"@architectures": "spacy-bertfam.ElmoBiLM.v1", "char_width": 4,
                 "filters": [[1, 4], [2, 8], [3, 16], [4, 32], [5, 64]], "n_highway": 2,
                 "cell_width": 64, "projection_width": 16}


def elmo_nlp(precision: str = "fp32"):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo_features", config={"model": FIXTURE_MODEL, "store_all_layers": True, "precision": precision})
    nlp.get_pipe("elmo_features").initialize(lambda: [], nlp=nlp, encoder_loader=checkpoint_loader(FIXTURE))
    return nlp


def test_component_equals_stateless_bilm():
    nlp = elmo_nlp()
    doc = nlp("The cat sat on the mat .")
    bilm = torch_encoder(nlp.get_pipe("elmo_features").model).eval()
    with torch.no_grad():
        out, _ = bilm(torch.from_numpy(batch_char_ids([[t.text for t in doc]])))
    enc = doc._.bertfam["elmo_features"]
    assert sorted(enc.layers) == [0, 1, 2]
    for i, layer in enumerate(out.layers):
        np.testing.assert_allclose(enc.layers[i], layer[0, 1:-1].numpy(), atol=1e-6)


def test_batch_composition_does_not_change_vectors():
    nlp = elmo_nlp()
    texts = ["The cat sat on the mat .", "A much longer sentence with many more words than the others in it .", "Hi"]
    alone = [nlp(t).tensor for t in texts]
    together = [d.tensor for d in nlp.pipe(reversed(texts), batch_size=3)][::-1]
    for a, b in zip(alone, together):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_bf16_prediction_is_close_to_fp32():
    """bf16 runs the biLM under autocast; fp32 prediction writes the LSTM's gates into reused
    memory (`out=` products, which autocast does not cast): each must take its own path."""
    texts = ["The cat sat on the mat .", "A much longer sentence with many more words than the others in it .", "Hi"]
    full = np.concatenate([d.tensor for d in elmo_nlp("fp32").pipe(texts)])
    half = np.concatenate([d.tensor for d in elmo_nlp("bf16").pipe(texts)])
    error = float(np.linalg.norm(half - full) / np.linalg.norm(full))
    assert 0 < error < 0.03  # bf16 keeps ~3 significant digits; it did run in bf16


def test_long_document_is_processed_whole():
    nlp = elmo_nlp()
    doc = nlp("the cat sat on the mat . " * 2858)
    assert len(doc) >= 20000 and doc.tensor.shape == (len(doc), 32) and np.isfinite(doc.tensor).all()


def test_scalar_mix_formula_and_gradients():
    rng = np.random.default_rng(0)
    layers = {k: rng.normal(size=(5, 4)).astype("f") for k in range(3)}
    enc = DocEncoding(layers=layers, token_lengths=np.ones(5, dtype=np.int64), token_pieces=np.arange(5))
    pooler = build_pooler(width=4, pooling=None, layers=[0, 1, 2], combine="scalar_mix")
    link_pooler(pooler, EncoderContract(family="elmo", n_layers=3, width=4, default_pooling="mean"), where="test")
    s, gamma = np.asarray([0.5, -1.0, 2.0], dtype="f"), 1.7
    pooler.set_param("mix_weights", s.copy())
    pooler.set_param("gamma", np.asarray([gamma], dtype="f"))
    (out,), backprop = pooler([enc], is_train=True)
    w = np.exp(s) / np.exp(s).sum()
    np.testing.assert_allclose(out, gamma * sum(w[k] * layers[k] for k in range(3)), rtol=1e-5)
    d_out = rng.normal(size=out.shape).astype("f")
    (d_enc,) = backprop([d_out])
    loss = lambda s_, g_: float((g_ * sum((np.exp(s_) / np.exp(s_).sum())[k] * layers[k] for k in range(3)) * d_out).sum())  # noqa: E731
    eps = 1e-3
    numeric_s = [(loss(s + eps * np.eye(3)[k], gamma) - loss(s - eps * np.eye(3)[k], gamma)) / (2 * eps) for k in range(3)]
    numeric_g = (loss(s, gamma + eps) - loss(s, gamma - eps)) / (2 * eps)
    np.testing.assert_allclose(pooler.get_grad("mix_weights"), numeric_s, rtol=1e-2, atol=1e-3)
    np.testing.assert_allclose(pooler.get_grad("gamma")[0], numeric_g, rtol=1e-2)
    np.testing.assert_allclose(d_enc[1], gamma * w[1] * d_out, rtol=1e-5)


def test_spacy_train_ner_elmo(tmp_path):
    config = ElmoConfig(char_width=4, filters=[(1, 8), (2, 8)], n_highway=1, cell_width=16, projection_width=8)
    torch.manual_seed(0)
    save_checkpoint(tmp_path / "elmo", Checkpoint("elmo", config, ElmoBiLM(config).state_dict(), None, "test"))
    assert read_checkpoint(tmp_path / "elmo").family == "elmo"
    nlp = spacy.blank("en")
    docs = [nlp.make_doc(t) for t, _ in TRAIN]
    for doc, (_, ann) in zip(docs, TRAIN):
        doc.ents = [doc.char_span(s, e, label=label) for s, e, label in ann["entities"]]
    DocBin(docs=docs * 4).to_disk(tmp_path / "train.spacy")
    cfg = Path(__file__).parents[2] / "configs" / "ner_elmo.cfg"
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "train", str(cfg), "--output", str(tmp_path / "out"),
         "--paths.train", str(tmp_path / "train.spacy"), "--paths.dev", str(tmp_path / "train.spacy"),
         "--paths.elmo_checkpoint", str(tmp_path / "elmo"),
         "--components.elmo_features.model.char_width=4", "--components.elmo_features.model.filters=[[1,8],[2,8]]",
         "--components.elmo_features.model.cell_width=16", "--components.elmo_features.model.projection_width=8",
         "--components.ner.model.tok2vec.width=16",
         "--training.max_epochs=0", "--training.max_steps=6", "--training.eval_frequency=3"],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trained = spacy.load(tmp_path / "out" / "model-last")
    pooler = next(n for n in trained.get_pipe("ner").model.walk() if n.name == "encoder_pooler")
    assert np.abs(pooler.get_param("mix_weights")).max() > 0  # the NER scalar mix learned
    assert trained("the cat sat").tensor.shape == (3, 16)
