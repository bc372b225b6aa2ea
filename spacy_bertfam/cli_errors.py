"""Our config and checkpoint errors as spaCy's CLI shows config errors, in every command.

`spacy train` shows a ConfigValidationError as its message alone because it runs inside
`show_validation_error`; `spacy assemble` initialises the pipeline outside it, so a missing
checkpoint there ended in a Python traceback above the message that says what to do. The
spaCy CLI imports our entry point (`pretraining/cli.py`) before it runs any command, which
installs this hook there; errors of any other type keep their traceback.
"""
import contextlib
import sys
from types import TracebackType
from typing import Optional, Type

from spacy.cli._util import show_validation_error

from .errors import ConfigError


def install_excepthook() -> None:
    """Show an uncaught ConfigError as `show_validation_error` would (the process still
    exits with status 1); hand every other exception to the hook that was there."""
    previous = sys.excepthook
    if getattr(previous, "shows_config_errors", False):
        return

    def hook(exc_type: Type[BaseException], exc: BaseException, tb: Optional[TracebackType]) -> None:
        if not isinstance(exc, ConfigError):
            previous(exc_type, exc, tb)
            return
        with contextlib.suppress(SystemExit), show_validation_error(hint_fill=False):
            raise exc

    hook.shows_config_errors = True  # type: ignore[attr-defined]
    sys.excepthook = hook
