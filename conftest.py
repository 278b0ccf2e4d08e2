"""Run the Python examples in README.md and docs/*.md as tests (Sybil)."""

import pytest

from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser


pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser()],
    patterns=["README.md", "docs/*.md"],
).pytest()

SERVER_PAGES = {"temporal.md": pytest.mark.temporal}
"""Doc pages whose examples start servers of their own, by marker."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the examples of pages that need a server (deselect them with
    ``-m 'not temporal'``)."""
    for item in items:
        mark = SERVER_PAGES.get(item.path.name)
        if mark is not None and item.path.parent.name == "docs":
            item.add_marker(mark)
