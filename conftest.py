"""Run the examples in the docs and in the package's docstrings (Sybil).

Python code blocks in README.md and docs/*.md run as tests; so do the
``>>>`` examples in every docstring under pipeline/ (each module's names
are in scope, as in a doctest).
"""

from doctest import ELLIPSIS, NORMALIZE_WHITESPACE

import pytest

from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser
from sybil.parsers.rest import DocTestParser
from sybil.sybil import SybilCollection

from tests.tutorial import provider


_markdown = Sybil(
    parsers=[PythonCodeBlockParser()],
    patterns=["README.md", "docs/*.md"],
    excludes=["docs/tutorial.md"],
    name="docs",
)
_tutorial = Sybil(  # its "real model" block talks to a server on loopback
    parsers=[PythonCodeBlockParser()],
    patterns=["docs/tutorial.md"],
    setup=provider.setup,
    teardown=provider.teardown,
    name="tutorial",
)
_docstrings = Sybil(
    parsers=[DocTestParser(optionflags=ELLIPSIS | NORMALIZE_WHITESPACE)],
    patterns=["*.py"],
    path="pipeline",
    name="docstrings",
)

pytest_collect_file = SybilCollection(
    [_markdown, _tutorial, _docstrings]
).pytest()

SERVER_PAGES = {
    "temporal.md": (pytest.mark.temporal, pytest.mark.slow),
    "tutorial.md": (pytest.mark.slow,),  # its graph's check node takes 3 s
}
"""Doc pages whose examples start servers of their own, by marker (and
``slow``: starting the server takes seconds)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the examples of pages that need a server (deselect them with
    ``-m 'not temporal'``, or with all slow tests by ``-m 'not slow'``)."""
    for item in items:
        marks = SERVER_PAGES.get(item.path.name, ())
        if item.path.parent.name == "docs":
            for mark in marks:
                item.add_marker(mark)
