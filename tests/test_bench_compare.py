"""benchmarks.compare: same-run ratios and the regressions it reports."""

from __future__ import annotations

import json

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from benchmarks.compare import Regression, main, ratios, regressions


def _case(
    impl: str, per_unit_us: float, workload: str = "W1", size: int = 10
) -> dict[str, Any]:
    return {
        "workload": workload,
        "variant": "chain",
        "impl": impl,
        "size": size,
        "unit": "step",
        "reps": 3,
        "median_s": per_unit_us * size / 1e6,
        "per_unit_us": per_unit_us,
        "bytes_stored": None,
        "peak_bytes": None,
    }


def test_ratio_pairs_each_case_with_its_same_run_baseline() -> None:
    cases = [
        _case("baseline", 2.0),
        _case("pipeline", 3.0),
        _case("baseline", 4.0, size=100),
        _case("pipeline", 5.0, size=100),
        _case("pipeline", 7.0, workload="W2"),  # no baseline: no ratio
        _case("baseline", 0.0, workload="W3"),  # unmeasurable: no ratio
        _case("pipeline", 1.0, workload="W3"),
        _case("LangGraph", 99.0),  # a peer: not ours
    ]
    assert ratios(cases) == {
        ("W1", "chain", 10): 1.5,
        ("W1", "chain", 100): 1.25,
    }


positive = st.floats(min_value=1e-3, max_value=1e6)


@given(base=positive, ours=positive, slowdown=st.floats(0.01, 100))
def test_a_slower_machine_moves_no_ratio(
    base: float, ours: float, slowdown: float
) -> None:
    # Both sides slowed alike (a loaded machine): nothing to report.
    then = ratios([_case("baseline", base), _case("pipeline", ours)])
    now = ratios(
        [
            _case("baseline", base * slowdown),
            _case("pipeline", ours * slowdown),
        ]
    )
    assert regressions(then, now) == []


@given(
    recorded=st.dictionaries(st.integers(1, 50), positive, max_size=8),
    factors=st.lists(st.floats(0.1, 10), min_size=8, max_size=8),
    threshold=st.floats(0.0, 1.0),
)
def test_reported_exactly_the_ratios_grown_over_the_threshold(
    recorded: dict[int, float], factors: list[float], threshold: float
) -> None:
    then = {("W", "v", k): r for k, r in recorded.items()}
    now = {
        key: r * f for (key, r), f in zip(then.items(), factors, strict=False)
    }
    now[("W", "new", 0)] = 1e9  # only in this run: nothing to compare with
    found = regressions(then, now, threshold)
    assert {r.key for r in found} == {
        k for k in then if now[k] > then[k] * (1 + threshold)
    }
    assert [r.growth for r in found] == sorted(
        (r.growth for r in found), reverse=True
    )
    assert all(r.growth > threshold for r in found)


def test_a_regression_line_names_the_case_and_both_ratios() -> None:
    r = Regression(("W7", "turn", 10), 2.0, 3.0)
    assert r.line() == "W7 turn size=10: ratio 2.00x -> 3.00x (+50%)"


def _write(path: Path, cases: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"backend": "asyncio", "cases": cases}))
    return path


def test_report_only_never_fails(tmp_path: Path, capsys: Any) -> None:
    then = _write(
        tmp_path / "rec.json", [_case("baseline", 1.0), _case("pipeline", 2.0)]
    )
    now = _write(
        tmp_path / "run.json", [_case("baseline", 1.0), _case("pipeline", 3.0)]
    )
    assert main([str(now), "--against", str(then)]) == 1
    assert main([str(now), "--against", str(then), "--report-only"]) == 0
    out = capsys.readouterr().out
    assert "1 grew over 20%" in out
    assert "W1 chain size=10: ratio 2.00x -> 3.00x (+50%)" in out
    # No run yet (make check before any make bench-quick): reported, skipped.
    assert main([str(tmp_path / "absent.json"), "--against", str(then)]) == 0
    assert "no run at" in capsys.readouterr().out


def test_record_replaces_the_recorded_figures(tmp_path: Path) -> None:
    now = _write(
        tmp_path / "run.json", [_case("baseline", 1.0), _case("pipeline", 3.0)]
    )
    rec = tmp_path / "rec.json"
    assert main([str(now), "--against", str(rec), "--record"]) == 0
    assert main([str(now), "--against", str(rec)]) == 0


def test_the_recorded_figures_load() -> None:
    recorded = Path(__file__).parent.parent / "benchmarks/quick-recorded.json"
    from benchmarks.compare import load  # noqa: PLC0415

    assert ratios(load(recorded))
