"""The payload converter and failure kinds (no server needed)."""

from __future__ import annotations

import math

from typing import Any

import attrs
import pytest

from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import pvector
from returns.result import Success
from temporalio.api.common.v1 import Payload
from temporalio.exceptions import ApplicationError

from pipeline.failures import (
    FanOutLimitExceeded,
    MergeConflict,
    RemoteFailure,
    RunStopped,
    StepLimitExceeded,
    UnknownRoute,
)
from pipeline.graph import END
from pipeline.temporal import (
    DATA_CONVERTER,
    ActivityRetry,
    CattrsJSONPayloadConverter,
    NodeOptions,
    RunOptions,
)
from pipeline.temporal._failures import Kinds, from_error
from pipeline.temporal._wire import (
    FailureDoc,
    RunRequest,
    SnapshotDoc,
    StepDone,
    decode,
    encode,
)
from tests.temporal.graphs import Refused, Tally, chain


CONVERTER = DATA_CONVERTER.payload_converter
GRAPH = chain(["a", "b"], name="converted")


def through(value: object, kind: Any) -> Any:
    """*value* sent as a payload and read back as a *kind*."""
    (payload,) = CONVERTER.to_payloads([value])
    assert payload.metadata["encoding"] in {b"json/plain", b"binary/null"}
    (back,) = CONVERTER.from_payloads([payload], [kind])
    return back


tallies = st.builds(
    Tally,
    count=st.integers(-(2**53), 2**53),
    trail=st.lists(st.text()).map(pvector),
    notes=st.lists(st.text()).map(pvector),
)


THREAD_IDS = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    min_size=1,
    max_size=256,
)


@given(state=tallies, step=st.integers(0, 1000), thread=THREAD_IDS)
def test_snapshots_cross_as_checkpoint_documents(
    state: Tally, step: int, thread: str
) -> None:
    """A snapshot sent in a run request comes back equal (through the
    checkpoint codec's document and the cattrs converter)."""
    snap = attrs.evolve(GRAPH.start(state, thread_id=thread), step=step)
    sent = encode(GRAPH.codec, snap)
    assert isinstance(sent, SnapshotDoc)
    request = RunRequest("converted", GRAPH.fingerprint, sent)
    back = through(request, RunRequest)
    assert back == request
    assert decode(GRAPH.codec, back.snapshot) == Success(snap)


@given(
    start=st.floats(0.001, 1e6),
    heartbeat=st.none() | st.floats(0.001, 1e6),
    attempts=st.integers(0, 100),
    bound=st.integers(100, 50_000),
)
def test_run_options_round_trip(
    start: float, heartbeat: float | None, attempts: int, bound: int
) -> None:
    """Options are values: they cross as JSON and come back equal."""
    node = NodeOptions(
        start_to_close=start,
        heartbeat=heartbeat,
        retry=ActivityRetry(attempts=attempts, non_retryable=("OSError",)),
    )
    options = RunOptions(
        default=node,
        nodes={"x": node},
        history_bound=bound,
        calls=node,
        agents={"writer": node},
        tools={"refund": node},
    )
    assert through(options, RunOptions) == options


@pytest.mark.parametrize(
    "bad",
    [
        {"initial": 0},
        {"initial": -1},
        {"initial": math.inf},
        {"backoff": 0.5},
        {"backoff": math.nan},
        {"maximum": 0.5},
        {"attempts": -1},
        {"attempts": True},
    ],
)
def test_retries_temporal_would_refuse_are_refused_when_made(
    bad: dict[str, float],
) -> None:
    """A retry policy Temporal cannot run would fail every workflow task
    of the run (it would hang): refused at construction, by name."""
    with pytest.raises(ValueError, match="ActivityRetry: ") as caught:
        ActivityRetry(**bad)  # type: ignore[arg-type]
    assert str(next(iter(bad.values()))) not in str(caught.value).split(":")[0]


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan])
def test_timeouts_must_be_finite_and_positive(bad: float) -> None:
    """``inf`` would pass a ``> 0`` check and fail when the run starts."""
    with pytest.raises(ValueError, match="start_to_close"):
        NodeOptions(start_to_close=bad)


def test_values_json_cannot_hold_are_refused_by_type() -> None:
    """A NaN (or anything JSON cannot hold) is refused with a TypeError
    naming the value's type, never the value."""
    with pytest.raises(TypeError, match="float") as caught:
        CONVERTER.to_payloads([float("nan")])
    assert "nan" not in str(caught.value).lower()


def test_payloads_that_do_not_fit_are_refused_without_their_values() -> None:
    """Bytes that are not JSON, or JSON of the wrong shape, are errors that
    name the expected type only."""
    json = CattrsJSONPayloadConverter()
    bad = Payload(metadata={"encoding": b"json/plain"}, data=b"\x80nope")
    with pytest.raises(RuntimeError, match="not JSON"):
        json.from_payload(bad, StepDone)
    wrong = Payload(
        metadata={"encoding": b"json/plain"},
        data=b'{"snapshot": "sk-secret-123"}',
    )
    with pytest.raises(RuntimeError, match="StepDone") as caught:
        json.from_payload(wrong, StepDone)
    assert "sk-secret" not in str(caught.value)
    with pytest.raises(RuntimeError) as composite:
        CONVERTER.from_payloads([wrong], [StepDone])
    assert "sk-secret" not in str(composite.value)


LIBRARY_FAILURES = [
    StepLimitExceeded(3, ("a", "b"), path=("g",)),
    FanOutLimitExceeded(20, 10, path=("fan",)),
    MergeConflict("count", ("x", "y")),
    RunStopped("no", path=("g",)),
    UnknownRoute("a", "z", ("b", END)),
]


@pytest.mark.parametrize("failure", LIBRARY_FAILURES, ids=repr)
def test_library_failures_travel_as_themselves(failure: object) -> None:
    """The library's failure values cross a workflow failure and come back
    as the same values."""
    kinds = Kinds()
    error = kinds.error(failure)
    assert error.non_retryable
    details = through(error.details[0], FailureDoc)
    wrapped = ApplicationError(
        error.message, details, type=error.type, non_retryable=True
    )
    assert from_error(kinds, wrapped) == failure


@given(reason=st.text())
def test_registered_failures_travel_by_name(reason: str) -> None:
    """A registered attrs failure type comes back as itself; without the
    registration, as a RemoteFailure naming it."""
    failure = Refused("n", reason)
    doc = through(Kinds([Refused]).encode(failure), FailureDoc)
    assert Kinds([Refused]).decode(doc) == failure
    unknown = Kinds().decode(doc)
    assert isinstance(unknown, RemoteFailure)
    assert unknown.kind == "Refused"


@given(value=st.text() | st.integers() | st.booleans())
def test_json_failures_travel_as_json(value: object) -> None:
    """Plain JSON failure values (a string, say) come back as they were."""
    doc = through(Kinds().encode(value), FailureDoc)
    assert Kinds().decode(doc) == value


def test_failure_kinds_are_looked_up_never_imported() -> None:
    """A document naming a class nobody registered (``os.system``, say)
    builds nothing: it is a RemoteFailure."""
    doc = FailureDoc("os.system", {"command": "true"}, "x")
    out = Kinds().decode(doc)
    assert out == RemoteFailure("os.system", "x")


def test_two_failure_types_with_one_name_are_refused() -> None:
    """Kinds travel by name: two types with one name cannot both."""
    other = attrs.make_class("Refused", {"why": attrs.field()}, frozen=True)
    with pytest.raises(ValueError, match="Refused"):
        Kinds([Refused, other])
