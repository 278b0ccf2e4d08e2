"""Type-level contract of the algebra. Checked by mypy and basedpyright;
NOT executed.

Positive cases use ``assert_type``; negative cases carry a
``# type: ignore[code]`` that must be *used* (mypy's ``warn_unused_ignores``
and basedpyright's ``reportUnnecessaryTypeIgnoreComment``): if an operator
were loosened to accept a mis-wired pipeline, the ignore would go unused and
the check would fail.
"""

# pyright: reportUnnecessaryTypeIgnoreComment=error

from __future__ import annotations

from typing import Never, assert_type

from returns.result import Result, Success

from pipeline import (
    Condition,
    Context,
    Handler,
    Item,
    Par,
    Race,
    first,
    for_each,
    handler,
    if_,
    loop,
    metadata_equals,
    must,
    noop,
    or_else,
    safe,
    sequential,
    switch,
    when,
)
from pipeline.failures import (
    AllFailed,
    ConditionError,
    LimitExceeded,
    Raised,
    TimedOut,
)
from pipeline.middleware import log, retry, timeout


class ParseError: ...


class RenderError: ...


@handler
async def parse(text: str) -> Result[int, ParseError]:
    return Success(int(text))


@handler
async def double(n: int) -> Result[int, OverflowError]:
    return Success(n * 2)


@handler
async def render(n: int) -> Result[str, RenderError]:
    return Success(str(n))


@handler
async def size(text: str) -> Result[bytes, OSError]:
    return Success(text.encode())


@handler
async def reply(ctx: Context) -> Result[Context, KeyError]:
    return Success(ctx)


@handler
async def review(ctx: Context) -> Result[Context, ValueError]:
    return Success(ctx)


@handler
async def maybe(ctx: Context) -> Result[Context | None, str]:
    return Success(ctx if ctx.messages else None)


@safe(ValueError)
async def to_int(text: str) -> int:
    return int(text)


@safe(ValueError, KeyError)
async def lookup(text: str) -> float:
    return float(text)


# -- lifts ----------------------------------------------------------------------

assert_type(parse, Handler[str, int, ParseError])
assert_type(to_int, Handler[str, int, Raised[ValueError]])
assert_type(lookup, Handler[str, float, Raised[ValueError | KeyError]])


async def not_a_result(text: str) -> int:
    return len(text)


def sync_handler(text: str) -> Result[int, str]:
    return Success(len(text))


handler(not_a_result)  # type: ignore[arg-type]  # must return a Result
handler(sync_handler)  # type: ignore[arg-type]  # must be async
safe(KeyboardInterrupt)  # type: ignore[type-var]  # BaseException is never caught


async def run_it() -> None:
    assert_type(await parse("1"), Result[int, ParseError])
    await parse(1)  # type: ignore[arg-type]  # input type is checked


# -- >> --------------------------------------------------------------------------

assert_type(
    parse >> double >> render,
    Handler[str, str, ParseError | OverflowError | RenderError],
)
assert_type(parse.then(double), Handler[str, int, ParseError | OverflowError])
render >> double  # type: ignore[operator]  # str output cannot feed an int input
parse.then(parse)  # type: ignore[arg-type]  # int output cannot feed a str input

# -- & ---------------------------------------------------------------------------

assert_type(parse & size, Par[str, ParseError | OSError, int, bytes])
assert_type(
    parse & size & to_int,
    Par[str, ParseError | OSError | Raised[ValueError], int, bytes, int],
)
# & is a tuple whatever the outputs are: the static type decides, and the
# run-time value is that tuple (merging contexts is must()'s).
assert_type(
    reply & review, Par[Context, KeyError | ValueError, Context, Context]
)
assert_type(
    reply & review & reply,
    Par[Context, KeyError | ValueError, Context, Context, Context],
)
assert_type(
    must(reply, review), Handler[Context, Context, KeyError | ValueError]
)
assert_type(
    reply & maybe, Par[Context, KeyError | str, Context, Context | None]
)
must(reply, maybe)  # type: ignore[arg-type]  # Context | None outputs do not merge
parse & double  # type: ignore[operator]  # fan-out branches need the same input
reply & parse  # type: ignore[operator]  # Context vs str input


@handler
async def pair_len(p: tuple[int, bytes]) -> Result[int, RenderError]:
    return Success(p[0] + len(p[1]))


assert_type(
    (parse & size) >> pair_len,
    Handler[str, int, ParseError | OSError | RenderError],
)
(parse & size & size) >> pair_len  # type: ignore[operator]  # 3-tuple is not a pair

# -- | ---------------------------------------------------------------------------

assert_type(parse | to_int, Race[str, int, ParseError | Raised[ValueError]])
assert_type(
    parse | to_int | size,
    Race[str, int | bytes, ParseError | Raised[ValueError] | OSError],
)
race: Handler[str, int | bytes, AllFailed[ParseError | OSError]] = parse | size
parse | double  # type: ignore[operator]  # race branches need the same input

# -- precedence: a >> b & c | d is ((a >> b) & c) | d ---------------------------------

assert_type(
    parse >> double & parse | size,
    Race[
        str,
        tuple[int, int] | bytes,
        ParseError | OverflowError | OSError,
    ],
)

# -- named combinators ----------------------------------------------------------------

assert_type(
    sequential(parse, double, render),
    Handler[str, str, ParseError | OverflowError | RenderError],
)
assert_type(
    sequential(reply, reply, reply, reply, reply, reply),
    Handler[Context, Context, KeyError],
)
sequential(render, double)  # type: ignore[misc]  # str cannot feed an int input
assert_type(must(reply, reply), Handler[Context, Context, KeyError])


def total(text: str, outs: tuple[int, ...]) -> Result[int, RenderError]:
    return Success(sum(outs))


assert_type(
    must(parse, parse, aggregate=total),
    Handler[str, int, ParseError | RenderError],
)
_ = must(parse, double, aggregate=total)("1")  # type: ignore[arg-type]  # inputs differ
must(parse, parse)  # type: ignore[arg-type]  # ints need an aggregator
assert_type(first(parse, parse), Handler[str, int, AllFailed[ParseError]])
assert_type(or_else(parse, parse), Handler[str, int, AllFailed[ParseError]])
assert_type(
    or_else(parse, parse, on=(ParseError,)),
    Handler[str, int, AllFailed[ParseError]],
)
or_else(parse, parse, on=ParseError)  # type: ignore[arg-type]  # a tuple of types
_ = or_else(parse, double)("1")  # type: ignore[arg-type]  # str vs int input
assert_type(
    loop(double, times=3), Handler[int, int, OverflowError | LimitExceeded]
)
loop(parse, times=3)  # type: ignore[misc]  # a loop body maps T to T
assert_type(
    loop(double, while_=lambda v, i: v < 100),
    Handler[int, int, OverflowError | LimitExceeded],
)


@handler
async def add_word(item: Item[int, str]) -> Result[int, RenderError]:
    return Success(item.state + len(item.value))


assert_type(for_each(["a", "b"], add_word), Handler[int, int, RenderError])
for_each([1, 2], add_word)  # type: ignore[list-item]  # values must be str

is_big: Condition[int, Never] = when(lambda n: n > 10)
assert_type(metadata_equals("k", 1), Condition[Context, Never])
assert_type(
    switch((is_big, double), default=render),
    Handler[
        int, int | str, OverflowError | RenderError | ConditionError[Never]
    ],
)
assert_type(
    switch((is_big, double)),
    Handler[int, int, OverflowError | ConditionError[Never]],
)
# Varargs infer the common input type; unrelated inputs give Never, so the
# result cannot be called (docs/typing.md lists this limit).
_ = switch((is_big, parse))(5)  # type: ignore[arg-type]  # int vs str input
_ = first(parse, double)("1")  # type: ignore[arg-type]  # str vs int input
assert_type(
    if_(is_big, double, render),
    Handler[
        int, int | str, OverflowError | RenderError | ConditionError[Never]
    ],
)
same_int: Handler[int, int, Never] = noop()
assert_type(parse >> same_int, Handler[str, int, ParseError])

# -- metadata values ----------------------------------------------------------------

Context().set("tags", ("a", "b")).set("cfg", {"k": (1, 2)}).set("n", None)
Context().set("ids", {1, 2})  # type: ignore[arg-type]  # a set is no MetaValue
Context().set("obj", object())  # type: ignore[arg-type]  # nor is any object

# -- middleware ---------------------------------------------------------------------

assert_type(
    double.use(timeout(1.0)), Handler[int, int, OverflowError | TimedOut]
)
assert_type(double.use(retry(3), log()), Handler[int, int, OverflowError])
assert_type(double.named("d"), Handler[int, int, OverflowError])
# .use() wraps each child, .wrap() the whole: the same types either way.
assert_type(
    (double >> double).wrap(timeout(1.0)),
    Handler[int, int, OverflowError | TimedOut],
)
assert_type(
    (double >> double).use(timeout(1.0)),
    Handler[int, int, OverflowError | TimedOut],
)
(double >> double).wrap(double)  # type: ignore[arg-type]  # not a middleware

# -- a handler call is a coroutine: a forgotten await is an error ----------------


async def forgets_await() -> None:
    double(1)  # type: ignore[unused-coroutine]  # missing await: mypy and pyright
    assert_type(await double(1), Result[int, OverflowError])
