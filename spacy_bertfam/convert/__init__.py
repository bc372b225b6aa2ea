"""Checkpoint readers and the library's own checkpoint format."""
from .checkpoint import Checkpoint, load_state, read_checkpoint, save_checkpoint
from .errors import CheckpointError

__all__ = ["Checkpoint", "CheckpointError", "load_state", "read_checkpoint", "save_checkpoint"]
