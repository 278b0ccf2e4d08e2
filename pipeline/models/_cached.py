"""Cached models: a request asked before is answered without calling again.

``cached(model, store=...)`` is a :class:`~pipeline.models.Model` like any
other.  Each request is looked up by the SHA-256 of its canonical JSON (the
model's name, the messages with their parts, the tools' names, descriptions
and schemas, the output schema, temperature, token limit and whether tools
may be called): a hit returns the stored
:class:`~pipeline.models.ModelResponse` without calling the model, a miss
calls it and stores its answer (failures are not stored).  Entries are
canonical JSON written and read through the library's converter, never
pickle; one that no longer decodes (the response type changed) is a miss.

Under a run scope (:func:`pipeline.run`, an agent's run) a budget counts
only the calls made: a hit spends no call and no tokens.  Each lookup emits
:class:`~pipeline.events.ModelCacheLookup` and, when traced, a span marked
``pipeline.cache.hit``.  (This module is private: import from
:mod:`pipeline.models`.)
"""

from __future__ import annotations

import inspect

from collections.abc import Awaitable, Callable
from typing import TypeAlias, final

import attrs
import orjson

from returns.result import Result, Success

from .._frozen import ContentMemo
from .._seconds import positive_seconds
from .._serde import STRUCTURE_ERRORS, canonical, checksum, make_converter
from ..errors import ConstructionError
from ..events import ModelCacheLookup, current_sink, emit
from ..failures import BudgetExceeded, ModelError
from ..stores import AsyncCacheStore, CacheStore, MemoryCache
from ._types import (
    DeltaSink,
    Model,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCallDelta,
)


__all__ = ("CachedModel", "cached")

_CONVERTER = make_converter()

Call: TypeAlias = Callable[
    [Model, ModelRequest, "DeltaSink | None"],
    Awaitable[Result[ModelResponse, ModelError | BudgetExceeded]],
]
"""How the model is called on a miss: directly, or through a scope."""

Seen: TypeAlias = Callable[[str, bool], None]
"""Told of each lookup (the model's name, hit or not): a scope traces it."""


async def _direct(
    model: Model, request: ModelRequest, on_delta: DeltaSink | None
) -> Result[ModelResponse, ModelError | BudgetExceeded]:
    return await model.generate(request, on_delta=on_delta)


def _unseen(_: str, __: bool) -> None:
    return None


def request_key(name: str, request: ModelRequest) -> str:
    """The SHA-256 (hex) of the canonical JSON of *request* to model
    *name*."""
    return checksum(canonical(_whole(name, request)))


def _whole(name: str, request: ModelRequest) -> dict[str, object]:
    return {
        "model": name,
        "messages": _CONVERTER.unstructure(tuple(request.messages)),
        "tools": _CONVERTER.unstructure(request.tools),
        "response_schema": _CONVERTER.unstructure(request.response_schema),
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "use_tools": request.use_tools,
    }


@final
@attrs.frozen
class CachedModel:
    """A model whose answers are kept in *store* for *ttl* seconds.

    Made by :func:`cached`; see :mod:`pipeline.models` for what the key
    holds.

    .. versionadded:: 0.1.0
    """

    model: Model
    store: CacheStore | AsyncCacheStore
    ttl: float | None = None
    key: Callable[[ModelRequest], object] | None = None

    @property
    def name(self) -> str:
        """The cached model's name (a hit is an answer of that model)."""
        return self.model.name

    async def generate(
        self, request: ModelRequest, *, on_delta: DeltaSink | None = None
    ) -> Result[ModelResponse, ModelError]:
        """The stored answer to *request*, or the model's (then stored)."""
        return await self.through(  # type: ignore[return-value]  # no budget
            request, on_delta, _direct, _unseen
        )

    async def through(
        self,
        request: ModelRequest,
        on_delta: DeltaSink | None,
        call: Call,
        seen: Seen,
    ) -> Result[ModelResponse, ModelError | BudgetExceeded]:
        """Look *request* up; on a miss, call the model with *call* (a scope
        passes its own, so that the call is checked, traced and counted)
        and store a success.  *seen* is told of the lookup."""
        name = self.model.name
        try:
            if self.key is None:
                key = request_key(name, request)
            else:
                asked = [name, _CONVERTER.unstructure(self.key(request))]
                key = checksum(canonical(asked))
        except (TypeError, ValueError, RecursionError):
            # Not JSON (a tool schema holding a Python object, say): the
            # request cannot be cached, the model answers it.
            return await call(self.model, request, on_delta)
        store = self.store
        found = store.get(key)
        if inspect.isawaitable(found):
            found = await found
        if found is not None:
            response = _decode(found)
            if response is not None:
                seen(name, True)
                await _tell(name, key, hit=True)
                if on_delta is not None:
                    await _replay(response, on_delta)
                return Success(response)
        seen(name, False)
        await _tell(name, key, hit=False)
        answer = await call(self.model, request, on_delta)
        if type(answer) is Success:
            data = canonical(_CONVERTER.unstructure(answer.unwrap()))
            done = store.put(key, data, self.ttl)
            if inspect.isawaitable(done):
                await done
        return answer


_DECODED: ContentMemo[ModelResponse] = ContentMemo()
"""Stored answers already decoded, by their bytes (one converter, so the
same bytes always decode to the same answer; kept only if deeply frozen)."""


def _decode(data: bytes) -> ModelResponse | None:
    """A stored response, or ``None`` if it no longer decodes."""
    found = _DECODED.entries.get(data)
    if found is not None:
        return found
    try:
        out: ModelResponse = _CONVERTER.structure(
            orjson.loads(data), ModelResponse
        )
    except STRUCTURE_ERRORS:
        return None
    _DECODED.put(data, out, out)
    return out


async def _replay(response: ModelResponse, on_delta: DeltaSink) -> None:
    """A stored answer streamed as the model would have: its text, then
    each tool call, in one fragment each."""
    if response.text:
        await on_delta(TextDelta(response.text))
    for i, c in enumerate(response.tool_calls):
        await on_delta(ToolCallDelta(i, c.id, c.name, c.arguments))


async def _tell(name: str, key: str, *, hit: bool) -> None:
    if current_sink() is not None:
        await emit(ModelCacheLookup(name, hit, key[:16]))


def cached(
    model: Model,
    *,
    store: CacheStore | AsyncCacheStore | None = None,
    ttl: float | None = None,
    key: Callable[[ModelRequest], object] | None = None,
) -> CachedModel:
    """*model* with its answers cached: a request asked before is answered
    from *store* without calling the model.

    *store*: a :class:`~pipeline.stores.MemoryCache` (the default, a new
    one), a :class:`~pipeline.stores.StoreCache` (entries in a checkpoint
    store's file or server, shared by processes and kept across restarts),
    or your own.  *ttl*: seconds an answer stays valid (``None``: for ever).
    *key*: the part of the request the answer depends on (by default all
    of it, see :mod:`pipeline.models`), JSON through the library's
    converter; the model's name is always part of the key.

    Raises:
        ConstructionError: *model* is not a model, or *ttl* is not a
            positive number.

    .. versionadded:: 0.1.0
    """
    if not callable(getattr(model, "generate", None)):
        msg = (
            f"cached(): the model is of type {type(model).__name__}, "
            "not a model (no generate method)"
        )
        raise ConstructionError(msg)
    if ttl is not None:
        ttl = positive_seconds(ttl, "cached(ttl=...)")
    return CachedModel(
        model, MemoryCache() if store is None else store, ttl, key
    )
