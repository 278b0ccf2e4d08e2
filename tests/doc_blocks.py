"""Extract the docs' Python code blocks into modules for ``mypy --strict``.

``python -m tests.doc_blocks OUT`` writes one module per page (README.md
and docs/*.md) to *OUT*, each page's blocks in order (Sybil runs them in
one namespace, so they are one module); ``make typing`` then runs
``mypy --strict`` on them: the examples users copy must type-check.
"""

from __future__ import annotations

import re
import sys

from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(page: Path) -> list[str]:
    """The Python code blocks of *page*, in order."""
    return BLOCK.findall(page.read_text(encoding="utf-8"))


def module_for(page: Path) -> str | None:
    """*page*'s blocks as one module (None when it has none)."""
    found = blocks(page)
    if not found:
        return None
    header = f'"""Python blocks of {page.relative_to(ROOT)}, in order."""\n\n'
    return header + "\n\n".join(found)


def main(argv: list[str]) -> int:
    """Write the modules to the directory given as the one argument."""
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.py"):
        old.unlink()
    for page in PAGES:
        text = module_for(page)
        if text is not None:
            name = page.stem.lower().replace("-", "_")
            (out / f"doc_{name}.py").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
