"""Errors in what the user configured or gave: the command lines show them as their message alone."""
from contextlib import contextmanager
from typing import Any, Iterator, Optional

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


class InputError(ValueError):
    """A data file or argument that cannot be read as asked (a malformed row, a missing file); the
    message names the file, the line where there is one, and what to do. `python -m spacy_bertfam`
    shows it as its message alone."""


@contextmanager
def as_config_error(where: str) -> Iterator[None]:
    """A ValueError raised inside becomes a ConfigError naming `where` (an architecture or config
    block): the torch modules refuse sizes that cannot work, knowing nothing of configs."""
    try:
        yield
    except ConfigError:
        raise
    except ValueError as e:
        raise ConfigError(f"[{where}] {e}") from None
