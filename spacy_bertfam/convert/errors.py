"""The one error type for unreadable or inconsistent checkpoints."""
from ..errors import ConfigError


class CheckpointError(ConfigError):
    """A checkpoint is missing, malformed, or does not fit the model it is loaded into: a
    config names it, so spaCy's CLI shows this as a config error, the message alone."""

    TITLE = "Cannot load the encoder's checkpoint"
