"""The one error type for unreadable or inconsistent checkpoints."""


class CheckpointError(ValueError):
    """A checkpoint is missing, malformed, or does not fit the model it is loaded into."""
