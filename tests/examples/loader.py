"""Importing an example project's module, as its own directory would."""

from __future__ import annotations

import importlib.util
import sys

from pathlib import Path
from types import ModuleType


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(project: str, module: str) -> ModuleType:
    """``examples/<project>/<module>.py``, imported once per session under
    the name ``example_<project>_<module>``."""
    name = f"example_{project}_{module}"
    if name in sys.modules:
        return sys.modules[name]
    path = EXAMPLES / project / f"{module}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[name] = loaded  # attrs and cattrs resolve annotations here
    spec.loader.exec_module(loaded)
    return loaded


def offline_env() -> dict[str, str]:
    """The environment without provider keys: examples use their scripts."""
    import os  # noqa: PLC0415

    root = str(EXAMPLES.parent)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PIPELINE_STORE"}
    }
    env["PYTHONPATH"] = root
    return env
