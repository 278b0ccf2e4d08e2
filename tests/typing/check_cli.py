"""Type-level contract of the command line. Checked, never executed."""

# pyright: reportUnnecessaryTypeIgnoreComment=error

from __future__ import annotations

from typing import assert_type

from pipeline.cli import ExitCode, UserError, main


assert_type(main(["version"]), int)
assert_type(main(), int)
assert_type(ExitCode(4), ExitCode)
assert_type(UserError("x", hint="y", code=ExitCode.USAGE).code, ExitCode)
assert_type(int(ExitCode.CANCELLED), int)

main("run")  # type: ignore[arg-type]  # argv is a list, not one string
UserError("x", "hint")  # type: ignore[call-arg]  # hint is keyword-only
UserError("x", code=2)  # type: ignore[arg-type]  # codes are ExitCode members
