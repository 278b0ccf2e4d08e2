"""``python -m pipeline`` and the ``pipeline`` command: the program around
:func:`pipeline.cli.main` (see :mod:`pipeline.cli`).

Ctrl-C at any moment ends it with one line and exit status 130, never a
traceback: the command line is imported inside the handler (``import
pipeline`` itself loads only the version), and once the command is done
Ctrl-C is ignored, so the interpreter's shutdown cannot be killed by it
after the result was printed.
"""

import sys


_CANCELLED = 130  # ExitCode.CANCELLED, without importing it first


def main() -> int:
    """Run the command line on ``sys.argv``; the exit status."""
    code = _CANCELLED
    interrupted = False
    try:
        import signal  # noqa: F401, PLC0415  # for _ignore_ctrl_c, loaded here

        from .cli import main as command  # noqa: PLC0415

        code = command()
    except KeyboardInterrupt:  # before the command line could catch it
        interrupted = True
    finally:
        _ignore_ctrl_c()
    if interrupted:
        print("pipeline: error: cancelled", file=sys.stderr)
    return code


def _ignore_ctrl_c() -> None:
    """From here on the program only exits: a Ctrl-C now changes nothing
    (and SIG_IGN, unlike Python's handler, survives the interpreter's
    shutdown, which would otherwise restore the default: death by signal)."""
    import signal  # noqa: PLC0415  # loaded already (see main)

    signal.signal(signal.SIGINT, signal.SIG_IGN)


if __name__ == "__main__":
    sys.exit(main())
