"""``python -m pipeline.examples [PROJECT]``: where the examples are.

Without an argument, prints the folder of every example project, one a
line; with one, prints that project's folder only, for ``cd "$(python -m
pipeline.examples support_desk)"``.
"""

from __future__ import annotations

import sys

from pathlib import Path


HERE = Path(__file__).resolve().parent


def projects() -> dict[str, Path]:
    """Each example project by name."""
    return {
        path.name: path
        for path in sorted(HERE.iterdir())
        if (path / "README.md").is_file()
    }


def main(argv: list[str]) -> int:
    found = projects()
    if not argv:
        for path in found.values():
            print(path)
        return 0
    if len(argv) == 1 and argv[0] in found:
        print(found[argv[0]])
        return 0
    print(
        f"usage: python -m {__spec__.parent if __spec__ else 'examples'} "
        f"[{'|'.join(found)}]",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
