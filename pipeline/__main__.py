"""``python -m pipeline``: the command line (see :mod:`pipeline.cli`)."""

import sys

from .cli import main as main


if __name__ == "__main__":
    sys.exit(main())
