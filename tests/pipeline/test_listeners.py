"""Listeners on a shared encoder: gradients, frozen encoders, replace_listeners, saving."""
import numpy as np
import pytest
import spacy
import torch
from spacy.tokens import DocBin
from spacy.training import Example
from spacy.util import load_model_from_config
from thinc.api import SGD

from spacy_bertfam.encoders import torch_encoder

from .pipelines import TINY_ENCODER, TRAIN, build, examples, listener, predictions


def encoder_weights(nlp):
    return {k: v.detach().clone() for k, v in torch_encoder(nlp.get_pipe("bert_encoder").model).state_dict().items()}


def changed(before, after):
    return [k for k in before if not torch.equal(before[k], after[k])]


def train(nlp, steps=6, **update_kwargs):
    optimizer = nlp.create_optimizer()
    losses = {}
    for _ in range(steps):
        nlp.update(examples(nlp), sgd=optimizer, losses=losses, **update_kwargs)
    return losses


def pooler(nlp, component):
    return next(n for n in nlp.get_pipe(component).model.walk() if n.name == "encoder_pooler")


def mix_weights(nlp, component):
    return pooler(nlp, component).get_param("mix_weights").copy()


def test_listeners_backprop_into_encoder_and_learn_own_mix(hf_bert_dir):
    mix = {"layers": [1, 2, 3], "combine": "scalar_mix"}
    nlp = build(hf_bert_dir, ner=mix, textcat=mix)
    encoder = nlp.get_pipe("bert_encoder")
    assert encoder.listening_components == ["ner", "textcat"]
    before = encoder_weights(nlp)
    losses = train(nlp)
    assert losses["ner"] > 0 and losses["textcat"] > 0 and losses["bert_encoder"] > 0
    # Everything but the [CLS] pooler, which no listener reads, has learned.
    assert sorted(set(before) - set(changed(before, encoder_weights(nlp)))) == ["pooler.bias", "pooler.weight"]
    ner_mix, textcat_mix = mix_weights(nlp, "ner"), mix_weights(nlp, "textcat")
    assert np.abs(ner_mix).max() > 1e-4 and np.abs(textcat_mix).max() > 1e-4  # both learned
    # Each mix gets its own task's gradient. (Compared as gradients: Adam's first steps move
    # every weight by about the learning rate whatever the gradient, so the weights can agree.)
    nlp.update(examples(nlp), sgd=False)  # accumulate gradients without applying them
    ner_grad, textcat_grad = (pooler(nlp, c).get_grad("mix_weights") for c in ("ner", "textcat"))
    assert np.abs(ner_grad).min() > 0 and np.abs(textcat_grad).min() > 0
    scale = max(np.abs(ner_grad).max(), np.abs(textcat_grad).max())
    assert np.abs(ner_grad - textcat_grad).max() > 0.1 * scale
    # Applied with plain SGD, those gradients move the two mixes apart.
    for component in ("ner", "textcat"):
        nlp.get_pipe(component).finish_update(SGD(1.0, L2=0.0, grad_clip=0.0))
    apart = (mix_weights(nlp, "ner") - ner_mix) - (mix_weights(nlp, "textcat") - textcat_mix)
    assert np.abs(apart).max() > 0.1 * scale


def test_grad_factor_zero_keeps_encoder_fixed(hf_bert_dir):
    nlp = build(hf_bert_dir, ner={"grad_factor": 0.0})
    before = encoder_weights(nlp)
    losses = train(nlp, steps=3)
    assert losses["ner"] > 0
    assert changed(before, encoder_weights(nlp)) == []


def test_frozen_annotating_encoder_with_concat_of_last_four_layers(hf_bert_dir):
    concat = {"width": 128, "layers": [-4, -3, -2, -1], "combine": "concat"}
    nlp = build(hf_bert_dir, ner=concat, textcat={"layers": [-2, -1]})
    before = encoder_weights(nlp)
    ner_before = nlp.get_pipe("ner").model.to_bytes()
    losses = train(nlp, exclude=["bert_encoder"], annotates=["bert_encoder"])
    assert changed(before, encoder_weights(nlp)) == []
    assert nlp.get_pipe("ner").model.to_bytes() != ner_before  # the head still trains
    assert losses["ner"] > 0
    doc = nlp("the cat sat on the mat")
    assert sorted(doc._.bertfam["bert_encoder"].layers) == [0, 1, 2, 3]


def test_encoder_learns_when_its_last_listener_skips_the_step(hf_bert_dir):
    # ner, the last listener here, skips a batch without entity annotation (a textcat batch of
    # batch_by_task): textcat's gradient still trains the encoder, applied before its next use.
    nlp = build(hf_bert_dir, ner={}, textcat={}, textcat_first=True)
    assert nlp.get_pipe("bert_encoder").listening_components == ["textcat", "ner"]
    cats_only = [Example.from_dict(nlp.make_doc(text), {"cats": ann["cats"]}) for text, ann in TRAIN]
    before = encoder_weights(nlp)
    losses = nlp.update(cats_only, sgd=nlp.create_optimizer())
    assert losses["textcat"] > 0 and losses["ner"] == 0.0  # ner did not run
    nlp("the cat sat")
    assert "embeddings.pieces.weight" in changed(before, encoder_weights(nlp))
    # Likewise with the last listener's component left out of the update.
    before = encoder_weights(nlp)
    nlp.update(examples(nlp), sgd=nlp.resume_training(), exclude=["ner"])
    nlp.to_bytes()
    assert "embeddings.pieces.weight" in changed(before, encoder_weights(nlp))


def test_a_trained_pipeline_can_go_on_with_a_frozen_encoder(hf_bert_dir):
    # The listeners do not keep the last training batch: updating the same examples with the
    # encoder frozen reads the outputs it annotates, not the stale batch of the step before.
    nlp = build(hf_bert_dir, ner={}, textcat={})
    train(nlp, steps=1)
    before = encoder_weights(nlp)
    losses = train(nlp, steps=2, exclude=["bert_encoder"], annotates=["bert_encoder"])
    assert losses["ner"] > 0 and changed(before, encoder_weights(nlp)) == []


def test_a_layer_listed_twice_gets_both_gradient_shares(hf_bert_dir):
    twice = build(hf_bert_dir, ner={"layers": [-1, 3]})  # the same layer of the tiny encoder
    once = build(hf_bert_dir, ner={"layers": [-1]})
    encodings = list(twice.get_pipe("bert_encoder").predict([eg.predicted for eg in examples(twice)]))
    grads = []
    for nlp in (twice, once):
        vectors, backprop = pooler(nlp, "ner")(encodings, True)
        grads.append(backprop([v * 0 + 1 for v in vectors]))
    for d_twice, d_once in zip(*grads):  # the mean of a layer with itself is that layer
        assert list(d_twice) == [3] and np.allclose(d_twice[3], d_once[3]) and np.abs(d_once[3]).max() > 0


def test_listener_width_mismatch_is_explained(hf_bert_dir):
    with pytest.raises(ValueError, match="width 32 does not match.*give 64; set width = 64"):
        build(hf_bert_dir, ner={"layers": [-2, -1], "combine": "concat"})


def test_replace_listeners_gives_identical_predictions(hf_bert_dir, tmp_path):
    nlp = build(hf_bert_dir, ner={"layers": [1, 2, 3]}, textcat={"layers": [-2, -1], "pooling": "first"})
    train(nlp, steps=4)
    want = predictions(nlp)
    nlp.replace_listeners("bert_encoder", "ner", ["model.tok2vec"])
    nlp.replace_listeners("bert_encoder", "textcat", ["model.tok2vec"])
    assert nlp.get_pipe("bert_encoder").listening_components == []
    got = predictions(nlp)
    assert [e for e, _ in got] == [e for e, _ in want]
    for (_, a), (_, b) in zip(got, want):
        assert a == pytest.approx(b, abs=1e-5)
    # The replaced pipeline, with its own encoder copies, saves and loads.
    nlp.remove_pipe("bert_encoder")
    nlp.to_disk(tmp_path / "replaced")
    again = spacy.load(tmp_path / "replaced")
    for (ents, cats), (want_ents, want_cats) in zip(predictions(again), want):
        assert ents == want_ents and cats == pytest.approx(want_cats, abs=1e-5)


def test_disk_and_bytes_round_trips(hf_bert_dir, tmp_path):
    nlp = build(hf_bert_dir, ner={"layers": [1, 2, 3]}, textcat={"layers": [-1]})
    train(nlp, steps=4)
    want = predictions(nlp)
    nlp.to_disk(tmp_path / "pipeline")
    from_disk = spacy.load(tmp_path / "pipeline")
    from_bytes = load_model_from_config(nlp.config, auto_fill=True)
    from_bytes.from_bytes(nlp.to_bytes())
    for other in (from_disk, from_bytes):
        for (ents, cats), (want_ents, want_cats) in zip(predictions(other), want):
            assert ents == want_ents and cats == pytest.approx(want_cats, abs=1e-5)


def test_drop_outputs_after_last_listener(hf_bert_dir):
    nlp = build(hf_bert_dir, textcat={}, encoder={"drop_outputs": True})
    doc = nlp("the cat sat")
    assert "bert_encoder" not in doc._.bertfam
    assert doc.tensor.shape == (3, 32)  # doc.tensor is kept
    with pytest.raises(ValueError, match="with drop_outputs = true its outputs were deleted once every listener had read them"):
        nlp.get_pipe("ner")(doc)  # a second call finds them gone and says why


def test_drop_outputs_waits_for_every_listener_whatever_the_order(hf_bert_dir):
    """The outputs go when every linked listener has read them, not when the last one linked
    (textcat's) has: components called one by one in another order still find them."""
    nlp = build(hf_bert_dir, textcat={}, encoder={"drop_outputs": True})
    want = nlp("the cat sat")
    doc = nlp.get_pipe("bert_encoder")(nlp.make_doc("the cat sat"))
    doc = nlp.get_pipe("textcat")(doc)
    doc = nlp.get_pipe("textcat")(doc)  # reading twice does not count twice
    assert "bert_encoder" in doc._.bertfam
    doc = nlp.get_pipe("ner")(doc)
    assert "bert_encoder" not in doc._.bertfam
    assert [(e.text, e.label_) for e in doc.ents] == [(e.text, e.label_) for e in want.ents]
    assert doc.cats == pytest.approx(want.cats, abs=1e-6)


def test_drop_outputs_does_not_wait_for_a_disabled_component(hf_bert_dir):
    nlp = build(hf_bert_dir, textcat={}, encoder={"drop_outputs": True})
    with nlp.select_pipes(disable=["ner"]):
        doc = nlp("the cat sat")
    assert doc.cats and "bert_encoder" not in doc._.bertfam
    nlp.disable_pipe("textcat")
    doc = nlp("the cat sat")
    assert "bert_encoder" not in doc._.bertfam


def test_drop_outputs_keeps_outputs_it_did_not_set(hf_bert_dir):
    """Outputs read back from a DocBin are not this encoder's to delete: every listener finds them."""
    nlp = build(hf_bert_dir, textcat={}, encoder={"drop_outputs": True})
    want = nlp("the cat sat")
    doc_bin = DocBin(store_user_data=True)
    doc_bin.add(nlp.get_pipe("bert_encoder")(nlp.make_doc("the cat sat")))
    (doc,) = doc_bin.from_bytes(doc_bin.to_bytes()).get_docs(nlp.vocab)
    doc = nlp.get_pipe("textcat")(nlp.get_pipe("ner")(doc))
    assert "bert_encoder" in doc._.bertfam
    assert doc.cats == pytest.approx(want.cats, abs=1e-6)


def test_listener_needs_encoder_outputs(hf_bert_dir):
    nlp = build(hf_bert_dir)
    with nlp.select_pipes(disable=["bert_encoder"]):
        with pytest.raises(ValueError, match="Doc has no outputs of the encoder 'bert_encoder'"):
            nlp("the cat")


@pytest.mark.parametrize("second_width", [32, 48])
def test_a_wildcard_listener_after_two_encoders_is_refused(hf_bert_dir, second_width):
    """With the advice to name the upstream, whichever encoder its width fits: where it fits one
    only, when spaCy links it (the width check against the other sent the user after the wrong
    width); where it fits both, at first use (spaCy links before it disables a component)."""
    nlp = build(hf_bert_dir)  # ner's listener has upstream "*" and width 32
    second = {**TINY_ENCODER, "hidden_width": second_width}
    advice = "'ner' has upstream '\\*' and follows 2 encoders, .*: set its upstream to the one it should read"
    with pytest.raises(ValueError, match=advice):
        nlp.add_pipe("bert_encoder", name="second", config={"model": second}, before="ner")
        nlp("the cat")
    nlp.remove_pipe("second")  # relinked to the one encoder left
    assert nlp.get_pipe("bert_encoder").listening_components == ["ner"]
    assert len(nlp("the cat")) == 2


def test_a_component_initialised_on_its_own_still_needs_encoder_outputs(hf_bert_dir):
    nlp = build(hf_bert_dir)
    textcat = nlp.add_pipe("textcat", config={"model": {
        "@architectures": "spacy.TextCatReduce.v1", "exclusive_classes": True, "use_reduce_first": False,
        "use_reduce_last": False, "use_reduce_max": False, "use_reduce_mean": True, "tok2vec": listener(),
    }})
    textcat.initialize(lambda: examples(nlp), nlp=nlp)  # zeros stand in for its shape inference
    assert set(nlp("the cat").cats) == {"PET", "PLACE"}
    with pytest.raises(ValueError, match="Doc has no outputs of the encoder 'bert_encoder'"):
        textcat(nlp.make_doc("the cat"))  # no zeros once it has read real outputs
