"""Exit codes, and the one error type the commands raise for mistakes."""

from __future__ import annotations

import enum

from typing import final


@final
class ExitCode(enum.IntEnum):
    """What ``pipeline``'s exit status means (stable: scripts rely on it).

    .. versionadded:: 0.1.0
    """

    OK = 0
    """The command did what it said; a run reached its end."""
    FAILED = 1
    """The run ended with a failure value (printed), or raised."""
    USAGE = 2
    """A mistake on the command line (an unknown option, a bad
    ``MODULE:OBJECT``, malformed ``--input`` or answer)."""
    NOT_FOUND = 3
    """No such thread, version or store file."""
    PAUSED = 4
    """The run waits for a human (``pipeline answer THREAD ANSWER``)."""
    STOPPED = 5
    """A gate stopped the run gracefully."""
    UNAVAILABLE = 6
    """The store cannot be reached or the thread is busy elsewhere; a
    renderer or an optional extra is not installed."""
    CANCELLED = 130
    """Interrupted (Ctrl-C); the last checkpoint is kept, resumable."""


@final
class UserError(Exception):
    """A mistake the user can fix: one line, a hint, an exit code.

    Never carries a value the user gave (it might be a secret): it names
    what was wrong and where.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self, message: str, *, hint: str = "", code: ExitCode = ExitCode.USAGE
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code
