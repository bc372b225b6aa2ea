"""Checkpoint readers and the library's own checkpoint format."""
from .checkpoint import Checkpoint, load_state
from .errors import CheckpointError
from .ours import save_checkpoint
from .readers import read_checkpoint

__all__ = ["Checkpoint", "CheckpointError", "load_state", "read_checkpoint", "save_checkpoint"]
