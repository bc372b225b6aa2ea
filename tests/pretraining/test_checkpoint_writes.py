"""A pretraining checkpoint survives a run killed while writing it."""
import torch
from torch import nn

from spacy_bertfam.pretraining.trainer import STATE_FILE, _recover, _write


class Saves:
    """Stands in for an Objective: writes the weights into a new folder."""

    def save(self, model, directory):
        directory.mkdir(parents=True)
        torch.save(model.state_dict(), directory / "weights.pt")


def test_a_kill_while_deleting_the_previous_checkpoint_does_not_block_the_next(tmp_path):
    last = tmp_path / "last"
    _write(last, Saves(), nn.Linear(2, 2), {"step": 4})
    (tmp_path / "last.old").mkdir()  # half deleted when the run was killed
    (tmp_path / "last.old" / "weights.pt").write_text("partial")
    _write(last, Saves(), nn.Linear(2, 2), {"step": 8})  # raised "Directory not empty"
    assert torch.load(last / STATE_FILE)["step"] == 8
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last"]


def test_a_kill_between_the_renames_is_recovered(tmp_path):
    last = tmp_path / "last"
    _write(last, Saves(), nn.Linear(2, 2), {"step": 4})
    last.rename(tmp_path / "last.old")  # killed after moving the old one aside
    _recover(last)  # "Nothing to resume" before
    assert torch.load(last / STATE_FILE)["step"] == 4
    _recover(last)  # nothing to do on an intact run
    assert torch.load(last / STATE_FILE)["step"] == 4
