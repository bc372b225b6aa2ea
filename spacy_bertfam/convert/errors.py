"""The one error type for unreadable or inconsistent checkpoints."""
from typing import Any, Optional

from confection import ConfigValidationError

_TITLE = "Cannot load the encoder's checkpoint"


class CheckpointError(ConfigValidationError):
    """A checkpoint is missing, malformed, or does not fit the model it is loaded into.

    A config names the checkpoint, so this is a config error: spaCy's CLI (`spacy train`,
    `spacy init nlp`) shows a ConfigValidationError as its message alone, where any other
    error would end in a traceback above the message that says what to do.
    """

    def __init__(self, message: str = "", *, title: Optional[str] = _TITLE, desc: Optional[str] = None,
                 **fields: Any) -> None:
        # Keyword arguments are what ConfigValidationError.from_error passes when spaCy re-raises it.
        super().__init__(title=title, desc=message if desc is None else desc, **fields)
        self.args = (self.desc,)

    def __str__(self) -> str:
        return self.desc or ""
