"""The docs' code blocks are extracted whole for mypy --strict."""

from __future__ import annotations

import ast

from pathlib import Path

from tests import doc_blocks


def test_every_page_with_python_becomes_a_module(tmp_path: Path) -> None:
    """Each page with Python blocks gives one module that parses."""
    assert doc_blocks.main([str(tmp_path)]) == 0
    written = {p.name for p in tmp_path.glob("*.py")}
    expected = {
        f"doc_{page.stem.lower()}.py"
        for page in doc_blocks.PAGES
        if doc_blocks.blocks(page)
    }
    assert written == expected
    assert "doc_readme.py" in written
    for module in tmp_path.glob("*.py"):
        ast.parse(module.read_text(encoding="utf-8"))


def test_blocks_keep_page_order() -> None:
    """A page's blocks come out in order, each one whole."""
    page = doc_blocks.ROOT / "docs" / "operators.md"
    found = doc_blocks.blocks(page)
    assert found
    text = page.read_text(encoding="utf-8")
    positions = [text.index(block) for block in found]
    assert positions == sorted(positions)
