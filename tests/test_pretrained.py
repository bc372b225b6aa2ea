"""Packaged models: a name or a path wherever a checkpoint is asked for."""
from spacy_bertfam.pretrained import checkpoint_path


def test_a_packaged_name_resolves_to_the_installed_weights(minilm_dir):
    assert checkpoint_path("all-MiniLM-L6-v2") == minilm_dir
    assert (checkpoint_path("all-MiniLM-L6-v2") / "config.json").exists()


def test_an_existing_folder_wins_over_a_packaged_name(tmp_path, monkeypatch):
    (tmp_path / "all-MiniLM-L6-v2").mkdir()
    monkeypatch.chdir(tmp_path)
    assert checkpoint_path("all-MiniLM-L6-v2").resolve() == (tmp_path / "all-MiniLM-L6-v2").resolve()
    assert str(checkpoint_path("some/dir")) == "some/dir"
