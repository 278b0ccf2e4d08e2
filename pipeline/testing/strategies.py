"""Hypothesis strategies for messages, contexts, handlers and tool input.

Use them to property-test your own pipelines (needs the ``testing`` extra).
"""

from __future__ import annotations

from .._extras import require


require(__name__, "Hypothesis", "testing", ("hypothesis",))

import json

from typing import Any, TypeAlias

from hypothesis import strategies as st
from returns.result import Failure, Result, Success

from .._combinators import loop, must, noop
from .._context import Context
from .._handler import Handler
from .._lift import handler
from .._messages import FilePart, ImagePart, Message, Part, TextPart
from ..tools import Tool


IntHandler: TypeAlias = Handler[int, int, object]
"""What :func:`handlers` draws: int to int, failing with some value."""

__all__ = (
    "IntHandler",
    "add",
    "contexts",
    "fail_when",
    "handlers",
    "json_values",
    "leaves",
    "messages",
    "meta_values",
    "mul",
    "parts",
    "tool_arguments",
)


def add(k: int) -> IntHandler:
    """A leaf adding *k*.

    .. versionadded:: 0.1.0
    """

    @handler(name=f"add{k}")
    async def run(x: int) -> Result[int, str]:
        return Success(x + k)

    return run


def mul(k: int) -> IntHandler:
    """A leaf multiplying by *k*.

    .. versionadded:: 0.1.0
    """

    @handler(name=f"mul{k}")
    async def run(x: int) -> Result[int, str]:
        return Success(x * k)

    return run


def fail_when(m: int) -> IntHandler:
    """A leaf failing on multiples of *m* (with a value naming it).

    .. versionadded:: 0.1.0
    """

    @handler(name=f"fail%{m}")
    async def run(x: int) -> Result[int, str]:
        if x % m == 0:
            return Failure(f"fail%{m}@{x}")
        return Success(x)

    return run


_unit: IntHandler = noop()


def _sum(_: int, outs: tuple[int, ...]) -> Result[int, str]:
    return Success(sum(outs) % 1_000_003)


leaves: st.SearchStrategy[IntHandler] = st.one_of(
    st.integers(-5, 5).map(add),
    st.integers(-3, 3).map(mul),
    st.integers(2, 7).map(fail_when),
    st.just(_unit),
)
"""One-step handlers (:func:`add`, :func:`mul`, :func:`fail_when`, noop)."""


def _sequential(
    children: st.SearchStrategy[IntHandler],
) -> st.SearchStrategy[IntHandler]:
    pairs = st.tuples(children, children)
    return st.one_of(
        pairs.map(lambda p: p[0] >> p[1]),
        st.tuples(children, st.integers(0, 3)).map(
            lambda p: loop(p[0], times=p[1]) if p[1] else p[0]
        ),
    )


def _concurrent(
    children: st.SearchStrategy[IntHandler],
) -> st.SearchStrategy[IntHandler]:
    pairs = st.tuples(children, children)
    return st.one_of(
        _sequential(children),
        pairs.map(lambda p: must(p[0], p[1], aggregate=_sum)),
    )


def handlers(*, concurrent: bool = False) -> st.SearchStrategy[IntHandler]:
    """Random ``Handler[int, int, str]`` pipelines, a few levels deep.

    With *concurrent*, they include all-must-succeed fan-outs: when several
    branches fail at different moments, which failure comes back depends on
    the scheduler, so compare such pipelines by outcome, not failure value.

    .. versionadded:: 0.1.0
    """
    extend = _concurrent if concurrent else _sequential
    return st.recursive(leaves, extend, max_leaves=8)


_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_FILE_TYPES = ("application/pdf", "text/plain", "text/csv", "application/json")


def parts(*, max_bytes: int = 64) -> st.SearchStrategy[Part]:
    """Message parts: text, images by bytes (at least one) or URL, files
    with names or without (bytes up to *max_bytes*).

    .. versionadded:: 0.1.0
    """
    data = st.binary(max_size=max_bytes)
    return st.one_of(
        st.builds(TextPart, st.text(max_size=20)),
        st.builds(
            ImagePart,
            data=st.binary(min_size=1, max_size=max(max_bytes, 1)),
            media_type=st.sampled_from(_IMAGE_TYPES),
        ),
        st.builds(
            ImagePart,
            url=st.from_regex(
                r"https://[a-z]{1,8}\.example/[a-z0-9/]{0,12}", fullmatch=True
            ),
            media_type=st.none() | st.sampled_from(_IMAGE_TYPES),
        ),
        st.builds(
            FilePart,
            data=data,
            media_type=st.sampled_from(_FILE_TYPES),
            name=st.none() | st.text(min_size=1, max_size=12),
        ),
    )


def messages() -> st.SearchStrategy[Message]:
    """Messages with short contents and any role.

    .. versionadded:: 0.1.0
    """
    return st.builds(
        Message,
        role=st.sampled_from(["system", "user", "assistant", "tool"]),
        content=st.text(max_size=20),
    )


meta_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
"""JSON-shaped metadata values."""


def contexts() -> st.SearchStrategy[Context]:
    """Contexts with a few messages and JSON-shaped metadata.

    .. versionadded:: 0.1.0
    """
    return (
        st.lists(messages(), max_size=5)
        .map(lambda ms: Context.of(*ms))
        .flatmap(
            lambda ctx: st.dictionaries(
                st.text(max_size=6), meta_values, max_size=4
            ).map(ctx.with_metadata)
        )
    )


json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=50),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
"""Any JSON value."""


def tool_arguments(tool: Tool) -> st.SearchStrategy[str]:
    """Argument texts a model might send *tool*: right, wrong and weird.

    Mixes the tool's own parameter names with unknown keys, any JSON value
    per key, huge strings and text that is not JSON at all.

    .. versionadded:: 0.1.0
    """
    names = list(tool.parameters.get("properties", {})) or ["x"]
    keys = st.sampled_from([*names, "extra", "__class__"])
    huge = st.integers(10_000, 1_100_000).map(
        lambda n: "x" * n
    )  # past 1 MiB too
    objects = st.dictionaries(
        keys, json_values | huge, max_size=len(names) + 2
    )
    return st.one_of(
        objects.map(json.dumps),
        json_values.map(json.dumps),
        st.text(max_size=50),
    )
