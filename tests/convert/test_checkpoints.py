"""Checkpoint reading: our format, Hugging Face BERT, and every documented error."""
import json
import logging

import pytest
import torch
from safetensors.torch import load_file, save_file

from spacy_bertfam.architectures import bert_encoder_v1
from spacy_bertfam.convert import CheckpointError, load_state, read_checkpoint, save_checkpoint
from spacy_bertfam.convert.hf_bert import KEY_MAP
from spacy_bertfam.convert.keymap import rename_to_ours, rename_to_theirs
from spacy_bertfam.loaders import checkpoint_loader
from spacy_bertfam.models.bert import BertEncoder, BertForPretraining

from ..conftest import make_hf_bert

HEADS = ("mlm_head.", "nsp_head.")


def _edit_weights(directory, edit):
    path = directory / "model.safetensors"
    state = load_file(str(path))
    edit(state)
    save_file(state, str(path))


def test_heads_load_when_present(tmp_path):
    from transformers import BertForPreTraining

    directory = make_hf_bert(tmp_path / "hf", heads=True)
    ckpt = read_checkpoint(directory)
    model = BertForPretraining(ckpt.config).eval()
    load_state(model, ckpt.state, source=ckpt.source, optional=HEADS)
    ref = BertForPreTraining.from_pretrained(str(directory)).eval()
    ids = torch.tensor([[2, 50, 51, 3, 52, 3]])
    types = torch.tensor([[0, 0, 0, 0, 1, 1]])
    with torch.no_grad():
        mlm, nsp = model.heads(model(ids, type_ids=types))
        want = ref(input_ids=ids, token_type_ids=types)
    assert float((mlm - want.prediction_logits).abs().max()) <= 1e-5
    assert float((nsp - want.seq_relationship_logits).abs().max()) <= 1e-5


def test_missing_heads_are_logged(hf_bert_dir, caplog):
    ckpt = read_checkpoint(hf_bert_dir)
    with caplog.at_level(logging.WARNING, logger="spacy_bertfam"):
        load_state(BertForPretraining(ckpt.config), ckpt.state, source="tiny", optional=HEADS)
    assert "tiny has no weights for mlm_head, nsp_head: freshly initialised" in caplog.text


def test_our_format_round_trip(hf_bert_dir, tmp_path):
    ckpt = read_checkpoint(hf_bert_dir)
    save_checkpoint(tmp_path / "ours", ckpt)
    again = read_checkpoint(tmp_path / "ours")
    assert again.family == "bert" and again.config == ckpt.config
    assert again.state.keys() == ckpt.state.keys()
    assert all(torch.equal(again.state[k], ckpt.state[k]) for k in ckpt.state)
    assert again.tokenizer.encode("the cat").ids.tolist() == ckpt.tokenizer.encode("the cat").ids.tolist()


def test_key_map_round_trip(hf_bert_dir):
    theirs = load_file(str(hf_bert_dir / "model.safetensors"))
    theirs.pop("embeddings.position_ids", None)
    ours = rename_to_ours(theirs, KEY_MAP)
    assert set(ours) == set(BertEncoder(read_checkpoint(hf_bert_dir).config).state_dict())
    back = rename_to_theirs(ours, KEY_MAP)
    assert back.keys() == theirs.keys()


def test_missing_directory():
    with pytest.raises(CheckpointError, match="Checkpoint not found: /no/such/dir"):
        read_checkpoint("/no/such/dir")


def test_unrecognised_directory(tmp_path):
    with pytest.raises(CheckpointError, match="holds no checkpoint that spacy-bertfam can read"):
        read_checkpoint(tmp_path)


def test_missing_weights_file(hf_bert_dir):
    (hf_bert_dir / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="missing weights: expected model.safetensors or pytorch_model.bin"):
        read_checkpoint(hf_bert_dir)


def test_pytorch_bin_weights_are_read(hf_bert_dir):
    state = load_file(str(hf_bert_dir / "model.safetensors"))
    torch.save(state, hf_bert_dir / "pytorch_model.bin")
    (hf_bert_dir / "model.safetensors").unlink()
    assert len(read_checkpoint(hf_bert_dir).state) == len(state) - ("embeddings.position_ids" in state)


def test_missing_tokenizer(hf_bert_dir):
    (hf_bert_dir / "vocab.txt").unlink()
    with pytest.raises(FileNotFoundError, match="expected tokenizer.json or vocab.txt"):
        read_checkpoint(hf_bert_dir)


def test_unknown_key(hf_bert_dir):
    _edit_weights(hf_bert_dir, lambda s: s.__setitem__("encoder.layer.0.adapter.weight", torch.zeros(2)))
    with pytest.raises(CheckpointError, match="unknown key.*'?encoder.layer.0.adapter.weight"):
        read_checkpoint(hf_bert_dir)


def test_missing_key(hf_bert_dir):
    _edit_weights(hf_bert_dir, lambda s: s.pop("encoder.layer.1.attention.self.key.bias"))
    ckpt = read_checkpoint(hf_bert_dir)
    with pytest.raises(CheckpointError, match=r"missing key\(s\) 'layers.1.attention.key.bias'"):
        load_state(BertEncoder(ckpt.config), ckpt.state, source="x", optional=HEADS)


def test_shape_mismatch_names_key_and_shapes(hf_bert_dir):
    _edit_weights(hf_bert_dir, lambda s: s.__setitem__("encoder.layer.2.intermediate.dense.weight", torch.zeros(60, 32)))
    ckpt = read_checkpoint(hf_bert_dir)
    with pytest.raises(CheckpointError, match=r"shape mismatch for 'layers.2.ffn.up.weight': checkpoint \(60, 32\), model \(64, 32\)"):
        load_state(BertEncoder(ckpt.config), ckpt.state, source="x", optional=HEADS)


def test_vocab_disagrees_with_embedding_matrix(hf_bert_dir):
    lines = (hf_bert_dir / "vocab.txt").read_text().splitlines()
    (hf_bert_dir / "vocab.txt").write_text("\n".join(lines[:-5]) + "\n")
    with pytest.raises(CheckpointError, match="the tokenizer has 115 pieces but the embedding matrix has 120 rows"):
        read_checkpoint(hf_bert_dir)


def test_config_vocab_size_disagrees_with_weights(hf_bert_dir):
    config = json.loads((hf_bert_dir / "config.json").read_text())
    config["vocab_size"] = 100
    (hf_bert_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="says vocab_size 100 but the embedding matrix has 120 rows"):
        read_checkpoint(hf_bert_dir)


def test_config_missing_field(hf_bert_dir):
    config = json.loads((hf_bert_dir / "config.json").read_text())
    del config["hidden_size"]
    (hf_bert_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="config.json lacks the field 'hidden_size'"):
        read_checkpoint(hf_bert_dir)


def test_untied_decoder_rejected(tmp_path):
    directory = make_hf_bert(tmp_path / "hf", heads=True)
    state = load_file(str(directory / "model.safetensors"))
    state["cls.predictions.decoder.weight"] = torch.randn_like(state["bert.embeddings.word_embeddings.weight"])
    save_file(state, str(directory / "model.safetensors"))
    with pytest.raises(CheckpointError, match="only the tied MLM decoder"):
        read_checkpoint(directory)


def test_loader_reports_config_mismatch(hf_bert_dir):
    model = bert_encoder_v1(n_pieces=120, hidden_width=32, n_layers=2, n_heads=4,
                            intermediate_width=64, n_positions=64, window=32, stride=24)
    with pytest.raises(CheckpointError, match="n_layers: checkpoint 3, model config 2"):
        checkpoint_loader(hf_bert_dir)(model)


def test_our_format_wrong_family_and_version(hf_bert_dir, tmp_path):
    save_checkpoint(tmp_path / "ours", read_checkpoint(hf_bert_dir))
    meta_path = tmp_path / "ours" / "config.json"
    meta = json.loads(meta_path.read_text())
    meta["spacy_bertfam"]["format"] = 99
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="checkpoint format 99 is not supported"):
        read_checkpoint(tmp_path / "ours")
    meta["spacy_bertfam"] = {"format": 1, "family": "xlnet"}
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="unknown model family 'xlnet'"):
        read_checkpoint(tmp_path / "ours")
