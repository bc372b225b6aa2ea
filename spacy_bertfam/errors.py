"""Errors in what the user configured: spaCy's CLI shows them as their message alone."""
from typing import Any, Optional

from confection import ConfigValidationError


class ConfigError(ConfigValidationError):
    """A setting, or a file a setting points at, that cannot work; the message says what to change.

    A confection ConfigValidationError (and so a ValueError): `spacy train` and `spacy init nlp`
    show those as their message, where any other error ends in a traceback above it.
    """

    TITLE = "A setting of a spacy-bertfam component cannot work"

    def __init__(self, message: str = "", *, title: Optional[str] = None, desc: Optional[str] = None,
                 **fields: Any) -> None:
        # Keyword arguments are what ConfigValidationError.from_error passes when spaCy re-raises it.
        super().__init__(title=self.TITLE if title is None else title, desc=message if desc is None else desc,
                         **fields)
        self.args = (self.desc,)  # e.args[0] and repr(e) are the message, as for the ValueError it was

    def __str__(self) -> str:
        return self.desc or ""
