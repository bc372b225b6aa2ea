"""ELMo's biLM objective: hand-computed layer 1 and loss; a short pretraining run learns."""

import numpy as np
import pytest
import spacy
import torch

from spacy_bertfam.loaders import checkpoint_loader
from spacy_bertfam.models.elmo import ElmoBiLM, ElmoConfig
from spacy_bertfam.tokenization.characters import batch_char_ids

from ..conftest import ASSETS
from .helpers import pretrain

TINY = dict(char_width=4, filters=[(1, 4), (2, 4)], n_highway=1, cell_width=6, projection_width=3,
            n_layers=1, cell_clip=0.5, projection_clip=0.4, n_words=5, dropout=0.0)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_layer_one_and_lm_loss_by_hand():
    torch.manual_seed(0)
    model = ElmoBiLM(ElmoConfig(**TINY)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.8)
    chars = torch.from_numpy(batch_char_ids([["a", "b", "c"]]))  # <S> a b c </S>
    words = torch.tensor([[0, 2, 3, 4, 1]])
    mask = torch.ones(1, 5, dtype=torch.bool)
    with torch.no_grad():
        out, _ = model(chars, mask)
        fwd_nll, bwd_nll = model.lm_loss(out, words, mask)
    x = model.char_cnn(chars)[0].detach().numpy()
    p = {k: v.detach().numpy() for k, v in model.state_dict().items()}

    def run(prefix, order):
        h, c, outs = np.zeros(3), np.zeros(6), {}
        for t in order:
            z = (p[f"{prefix}.input_linearity.weight"] @ x[t] + p[f"{prefix}.state_linearity.weight"] @ h
                 + p[f"{prefix}.state_linearity.bias"])
            i, f, g, o = np.split(z, 4)
            c = np.clip(sigmoid(i) * np.tanh(g) + sigmoid(f) * c, -0.5, 0.5)
            h = np.clip(p[f"{prefix}.projection.weight"] @ (sigmoid(o) * np.tanh(c)), -0.4, 0.4)
            outs[t] = h
        return np.stack([outs[t] for t in range(5)])

    fwd, bwd = run("forward_layers.0", range(5)), run("backward_layers.0", range(4, -1, -1))
    np.testing.assert_allclose(out.layers[1][0].numpy(), np.concatenate([fwd, bwd], -1), atol=1e-5)
    np.testing.assert_allclose(out.layers[0][0].numpy(), np.concatenate([x, x], -1), atol=1e-6)

    def nll(hidden, targets):
        logits = hidden @ p["softmax.weight"].T + p["softmax.bias"]
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        return -np.mean(logp[np.arange(len(targets)), targets])

    w = words[0].numpy()
    assert float(fwd_nll) == pytest.approx(nll(fwd[:-1], w[1:]), rel=1e-5)
    assert float(bwd_nll) == pytest.approx(nll(bwd[1:], w[:-1]), rel=1e-5)


def test_short_pretraining_lowers_heldout_perplexity(tmp_path):
    text = (ASSETS / "raw_text" / "janeausten_6novels.txt").read_text(encoding="utf8")[:60_000]
    (tmp_path / "austen.txt").write_text(text, encoding="utf8")
    records = pretrain("elmo", tmp_path / "austen.txt", tmp_path / "out", {
        "corpus.split": "passages", "corpus.heldout_every": 10, "objective.char_width": 8,
        "objective.filters": [[1, 16], [2, 16], [3, 16]], "objective.cell_width": 32, "objective.projection_width": 16,
        "objective.n_words": 800, "objective.dropout": 0.0, "objective.sequence_length": 12,
        "training.batch_size": 16, "training.max_steps": 30, "training.eval_every": 30, "training.warmup_steps": 3,
        "training.lr": 0.005})
    before, after = records[0], records[-1]
    message = (f"forward {before['eval_forward_ppl']:.0f}->{after['eval_forward_ppl']:.0f}, "
               f"backward {before['eval_backward_ppl']:.0f}->{after['eval_backward_ppl']:.0f}")
    assert after["eval_forward_ppl"] < 0.7 * before["eval_forward_ppl"], message
    assert after["eval_backward_ppl"] < 0.7 * before["eval_backward_ppl"], message
    # The checkpoint serves elmo_features, which needs no softmax.
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo_features", config={"model": {
        "@architectures": "spacy-bertfam.ElmoBiLM.v1", "char_width": 8, "filters": [[1, 16], [2, 16], [3, 16]],
        "cell_width": 32, "projection_width": 16}})
    nlp.get_pipe("elmo_features").initialize(lambda: [], nlp=nlp, encoder_loader=checkpoint_loader(tmp_path / "out" / "final"))
    assert nlp("It is a truth universally acknowledged.").tensor.shape == (7, 32)
