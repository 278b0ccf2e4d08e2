"""Run the Python examples in README.md and docs/*.md as tests (Sybil)."""

from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser


pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser()],
    patterns=["README.md", "docs/*.md"],
).pytest()
