"""Command line: ``python -m pipeline demo``."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Parse *argv* and run the chosen command."""
    parser = argparse.ArgumentParser(
        prog="pipeline", description="Typed, async, functional pipelines."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the offline demo pipeline")
    sub.add_parser("version", help="print the version")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import run  # noqa: PLC0415  # keep start-up light

        run()
    else:
        from ._version import __version__  # noqa: PLC0415

        print(__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
