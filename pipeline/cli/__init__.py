"""The ``pipeline`` command line (also ``python -m pipeline``).

See :doc:`/cli` for the commands; :class:`ExitCode` lists what the exit
status means.  Start-up stays light: each command imports what it needs
when it runs.
"""

from __future__ import annotations

import sys

from ._exits import ExitCode as ExitCode
from ._exits import UserError as UserError


__all__ = ("ExitCode", "UserError", "main")


def main(argv: list[str] | None = None) -> int:
    """Run the command line on *argv* (default: ``sys.argv[1:]``); return
    the exit status (see :class:`ExitCode`).

    A mistake (a bad ``MODULE:OBJECT``, an unknown thread, malformed
    input) prints one line and a hint, never a traceback.

    .. versionadded:: 0.1.0
    """
    import click  # noqa: PLC0415

    from ._app import cli  # noqa: PLC0415

    traceback = "--traceback" in (sys.argv[1:] if argv is None else argv)
    try:
        code = cli.main(args=argv, prog_name="pipeline", standalone_mode=False)
    except UserError as exc:
        _error(exc.message, exc.hint)
        return exc.code
    except click.exceptions.Abort:
        _error("cancelled", "")
        return ExitCode.CANCELLED
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return ExitCode.USAGE
    except KeyboardInterrupt:
        _error("cancelled", "")
        return ExitCode.CANCELLED
    except Exception as exc:
        # (Imported here: ``pipeline --help`` never loads the errors.)
        from ..errors import InvalidThreadId  # noqa: PLC0415

        if isinstance(exc, InvalidThreadId):  # its message never shows the id
            _error(str(exc), "a thread id is 1 to 256 characters, without NUL")
            return ExitCode.USAGE
        if traceback:
            raise
        _error(
            f"your code raised {type(exc).__name__}",
            "pass --traceback to see where",
        )
        return ExitCode.FAILED
    return int(code) if isinstance(code, int) else ExitCode.OK


def _error(message: str, hint: str) -> None:
    print(f"pipeline: error: {message}", file=sys.stderr)
    if hint:
        print(f"hint: {hint}", file=sys.stderr)
