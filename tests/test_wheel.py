"""The wheel as pip users get it, on every supported Python.

The wheel is built once per session from this tree (``pip wheel
--no-deps``, the build backend fetched by pip into an isolated build
environment).  For each of Python 3.11, 3.12 and 3.13 a fresh virtual
environment installs it **by name**, ``typed-pipeline[trio,otel,redis,
testing,ui]`` (the pure-Python extras) with ``--find-links`` to the built
wheel's folder, so that pip resolves our name and never the unrelated
``pipeline`` on the package index.  Then, from a directory outside the
checkout, with no ``PYTHONPATH``: the offline demo on trio, the shipped
examples (``pipeline.examples``), the tutorial's first code (an agent on a
scripted model), and an extra left out (``openai``) that says in one line
how to install it.

Interpreters are found as ``.ci/run`` finds them: ``PIPELINE_PYTHON_3_X``,
then ``python3.X`` on the PATH, then pyenv's (newest patch release first);
``PIPELINE_CI_PYTHONS="3.12 3.13"`` tests a subset.  A Python that is not
found fails its tests, naming what was tried (nothing is skipped).  Pip's
own cache is used, so dependencies are downloaded once per machine; the
package index (or pip's configured mirror) is the only network used.
"""

from __future__ import annotations

import email.parser
import os
import re
import shutil
import subprocess
import sys
import zipfile

from pathlib import Path

import pytest

from pipeline._version import __version__


ROOT = Path(__file__).resolve().parents[1]
VERSIONS = tuple(
    os.environ.get("PIPELINE_CI_PYTHONS", "3.11 3.12 3.13").split()
)
EXTRAS = "trio,otel,redis,testing,ui,anthropic,postgres,temporal,mcp"
"""Every extra of pyproject.toml's ``[project.optional-dependencies]`` but
``openai``, left out so that its absence is real (it is then installed
beside, in a folder of its own: :func:`test_the_openai_extra_installed`),
``docs`` (Sphinx, for building these docs) and ``dev``."""
HIDDEN = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "OPENAI_API_KEY")
"""Variables of the developer's shell that would reach into the checkout
or a network service."""


def _env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if k not in HIDDEN
        and not k.startswith(("PIPELINE_", "ANTHROPIC_", "OPENAI_"))
    }


def _run(
    *args: str | Path, cwd: Path, check: bool = True
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(  # noqa: S603
        [str(a) for a in args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=_env(),
        timeout=900,
    )
    if check:
        assert done.returncode == 0, (
            f"{' '.join(map(str, args))} exited {done.returncode}:\n"
            f"{done.stdout}{done.stderr}"
        )
    return done


def _candidates(version: str) -> list[str]:
    """Where Python *version* may be, in ``.ci/run``'s order."""
    found = [
        os.environ.get(f"PIPELINE_PYTHON_{version.replace('.', '_')}", ""),
        shutil.which(f"python{version}") or "",
    ]
    root = Path(
        os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv"
    ).joinpath("versions")
    pyenv = sorted(
        root.glob(f"{version}.*/bin/python{version}"),
        key=lambda p: [
            int(n) if n.isdigit() else -1 for n in p.parents[1].name.split(".")
        ],
        reverse=True,
    )
    return [c for c in found if c] + [str(p) for p in pyenv]


def find_python(version: str) -> Path | str:
    """The interpreter for *version* (with venv and ensurepip), or a
    message saying what was tried."""
    tried = _candidates(version)
    probe = (
        "import sys, venv, ensurepip;"
        "print('%d.%d' % sys.version_info[:2]); print(sys.executable)"
    )
    for candidate in tried:
        try:
            done = subprocess.run(  # noqa: S603
                [candidate, "-c", probe],
                capture_output=True,
                text=True,
                check=False,
                timeout=60,
            )
        except OSError:
            continue
        lines = done.stdout.split()
        if done.returncode == 0 and lines[:1] == [version]:
            return Path(lines[1])
    ci = " (CI=true: every supported Python must be tested)" * (
        os.environ.get("CI") == "true"
    )
    return (
        f"Python {version} is missing{ci}: none of "
        f"{tried or [f'python{version}']} runs with venv and ensurepip. "
        f"Install it (apt-get install python{version}-venv, or pyenv "
        f"install {version}), point PIPELINE_PYTHON_"
        f"{version.replace('.', '_')} at it, or set PIPELINE_CI_PYTHONS "
        "to the versions to test."
    )


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this tree, built once (``pip wheel --no-deps``)."""
    dist = tmp_path_factory.mktemp("dist")
    _run(
        sys.executable,
        "-m",
        "pip",
        "--disable-pip-version-check",
        "wheel",
        "--no-deps",
        "-q",
        "-w",
        dist,
        ROOT,
        cwd=dist,
    )
    (built,) = dist.glob("*.whl")
    return built


@pytest.fixture(scope="session", params=VERSIONS, ids=lambda v: f"py{v}")
def venv(
    request: pytest.FixtureRequest,
    wheel: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """The ``bin`` folder of a fresh environment on one Python, with
    ``typed-pipeline[EXTRAS]`` installed by name."""
    version: str = request.param
    python = find_python(version)
    if isinstance(python, str):
        pytest.fail(python, pytrace=False)
    home = tmp_path_factory.mktemp(f"venv-{version}")
    _run(python, "-m", "venv", home / "env", cwd=home)
    bin_ = home / "env" / "bin"
    _run(
        bin_ / "python",
        "-m",
        "pip",
        "--disable-pip-version-check",
        "install",
        "-q",
        "--find-links",
        wheel.parent,
        f"typed-pipeline[{EXTRAS}]=={__version__}",
        cwd=home,
    )
    ran = _run(
        bin_ / "python", "-c", "import sys; print(sys.version)", cwd=home
    )
    assert ran.stdout.startswith(f"{version}.")
    return bin_


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """An empty directory outside the checkout."""
    assert not tmp_path.is_relative_to(ROOT)
    return tmp_path


@pytest.mark.slow
def test_the_wheel_is_typed_pipeline_with_its_licence(wheel: Path) -> None:
    assert wheel.name == f"typed_pipeline-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        info = f"typed_pipeline-{__version__}.dist-info"
        meta = email.parser.Parser().parsestr(
            zf.read(f"{info}/METADATA").decode()
        )
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
    assert meta["Name"] == "typed-pipeline"
    assert meta["License-Expression"] == "MIT"
    assert f"{info}/licenses/LICENSE" in names
    assert meta["Author"]
    assert meta["Requires-Python"] == ">=3.11"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Documentation", "Source", "Issues"} <= set(urls)
    assert set(EXTRAS.split(",")) <= set(meta.get_all("Provides-Extra") or [])
    assert "pipeline = pipeline.__main__:main" in entry_points
    # The examples ride along, as pipeline.examples; the tests do not.
    assert "pipeline/examples/support_desk/desk.py" in names
    assert "pipeline/examples/batch_summariser/documents/rail.txt" in names
    assert "pipeline/py.typed" in names
    assert not any(n.startswith("tests/") for n in names)
    assert not any("__pycache__" in n for n in names)


@pytest.mark.slow
def test_installed_by_name_the_demo_runs_offline(
    venv: Path, outside: Path
) -> None:
    where = _run(
        venv / "python",
        "-c",
        "import importlib.metadata as m, pipeline;"
        "print(pipeline.__file__); print(m.version('typed-pipeline'))",
        cwd=outside,
    ).stdout.split()
    installed = Path(where[0]).parent
    assert where[1] == __version__
    assert installed.is_relative_to(venv.parent)
    # The very modules of this tree, not another project named pipeline.
    for name in ("_extras.py", "__init__.py", "demo.py"):
        assert (installed / name).read_bytes() == (
            ROOT / "pipeline" / name
        ).read_bytes()

    demo = _run(venv / "pipeline", "--backend", "trio", "demo", cwd=outside)
    assert "checkpoints:" in demo.stdout
    # Each pure-Python extra installed with it imports.
    _run(
        venv / "python",
        "-c",
        "import trio, pipeline._tracing, pipeline.stores.redis,"
        " pipeline.testing.strategies, uvicorn, pipeline.models.anthropic,"
        " pipeline.stores.postgres, pipeline.temporal, pipeline.mcp;"
        " from pipeline.cli._ui import app; app('threads.sqlite3')",
        cwd=outside,
    )


@pytest.mark.slow
def test_the_shipped_examples_run(venv: Path, outside: Path) -> None:
    python = venv / "python"
    listed = _run(python, "-m", "pipeline.examples", cwd=outside).stdout
    folders = [Path(line) for line in listed.splitlines()]
    assert {f.name for f in folders} == {
        p.name for p in (ROOT / "examples").iterdir() if p.is_dir()
    } - {"__pycache__"}
    assert all(f.is_relative_to(venv.parent) for f in folders)

    shown = {  # each example module and a line of what it prints
        "batch_summariser": "summarising 5 documents",
        "support_desk.desk": "done: sent=True",
        "research_swarm.research": "2 handoffs, answered by writer",
        "typed_extraction.extraction": "vendor='ACME Ltd'",
    }
    for module, line in shown.items():
        ran = _run(python, "-m", f"pipeline.examples.{module}", cwd=outside)
        assert line in ran.stdout, (module, ran.stdout)
    assert list(outside.iterdir()) == []  # nothing left where they ran

    # The support desk through the command line, as its README shows.
    target = "pipeline.examples.support_desk.desk:graph"
    paused = _run(
        venv / "pipeline",
        "run",
        target,
        "--input",
        '{"text": "I was charged twice"}',
        "--thread",
        "t1",
        cwd=outside,
        check=False,
    )
    assert paused.returncode == 4, paused  # ExitCode.PAUSED
    assert "paused: send this billing reply?" in paused.stderr
    answered = _run(venv / "pipeline", "answer", "t1", "yes", cwd=outside)
    assert '"sent": true' in answered.stdout


def _tutorial_first_code() -> str:
    """The first Python block of the tutorial's "first agent" section."""
    page = (ROOT / "docs" / "tutorial.md").read_text()
    section = page[page.index("\n## 2. ") :]
    found = re.search(
        r"^```python\n(.*?)^```", section, re.MULTILINE | re.DOTALL
    )
    assert found, "docs/tutorial.md, section 2, has no Python block"
    code = found.group(1)
    assert "ScriptedModel" in code  # the scripted agent, not another block
    return code


@pytest.mark.slow
def test_the_tutorials_first_agent_runs(venv: Path, outside: Path) -> None:
    script = outside / "first_agent.py"
    script.write_text(
        _tutorial_first_code() + "\nprint(answer.text, script.remaining)\n"
    )
    done = _run(venv / "python", script, cwd=outside)
    assert done.stdout == "About 520,000 people live in Lyon. 0\n"


@pytest.mark.slow
def test_an_extra_left_out_says_how_to_install_it(
    venv: Path, outside: Path
) -> None:
    """The OpenAI SDK is really absent here: no finder, no mock."""
    done = _run(
        venv / "python",
        "-c",
        "import pipeline.models.openai",
        cwd=outside,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "pipeline.errors.MissingExtra: pipeline.models.openai needs the "
        "OpenAI SDK (missing: openai): pip install 'typed-pipeline[openai]'"
    )


@pytest.mark.slow
def test_the_openai_extra_installed(
    venv: Path, wheel: Path, outside: Path
) -> None:
    """``typed-pipeline[openai]``'s own requirements, installed by name
    into a folder beside the environment (which keeps the SDK absent for
    the test above): the adapter imports and builds its client."""
    beside = outside / "openai-extra"
    _run(
        venv / "python",
        "-m",
        "pip",
        "--disable-pip-version-check",
        "install",
        "-q",
        "--target",
        beside,
        "--find-links",
        wheel.parent,
        f"typed-pipeline[openai]=={__version__}",
        cwd=outside,
    )
    done = subprocess.run(  # noqa: S603
        [
            str(venv / "python"),
            "-c",
            (
                "from pipeline.models.openai import OpenAIModel;"
                "m = OpenAIModel('gpt-4o-mini', api_key='k',"
                " base_url='http://127.0.0.1:9/v1'); print(m.name)"
            ),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=outside,
        env={**_env(), "PYTHONPATH": str(beside)},
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gpt-4o-mini" in done.stdout
