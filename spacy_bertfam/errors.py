"""Errors in what the user configured or gave: the command lines show them as their message alone."""
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional, Union

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


def input_file(path: Union[str, Path]) -> Path:
    """`path` as a Path; an InputError where no such file exists."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    return path


@contextmanager
def as_config_error(where: str) -> Iterator[None]:
    """Errors of building a model from its sizes become ConfigErrors naming `where` (an
    architecture or config block): the torch modules refuse sizes that cannot work knowing
    nothing of configs (a ValueError), and torch itself refuses a zero or negative size with a
    ZeroDivisionError or RuntimeError."""
    try:
        yield
    except ConfigError:
        raise
    except (ValueError, ZeroDivisionError, RuntimeError) as e:
        raise ConfigError(f"[{where}] {e if isinstance(e, ValueError) else f'{type(e).__name__}: {e}'}") from None
