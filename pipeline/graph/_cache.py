"""Per-node caching: a node run again on the same input is not run again.

A node built with ``cache=CachePolicy(...)`` looks its input up before it
runs: the key is the SHA-256 of the canonical JSON the codec writes for the
input (the node's name and the graph's fingerprint included, so a changed
graph never reads what an older one cached), the value the canonical JSON
of the state the node returned.  JSON both ways, never pickle: what comes
back from the cache is what a checkpoint would have brought back.  A hit
is still a step: the engine commits its record as for a run.
"""

from __future__ import annotations

import inspect

from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar, final

import attrs
import orjson

from returns.result import Failure, Success

from .._runners import AnyCall
from .._serde import STRUCTURE_ERRORS, canonical, checksum
from ..events import CacheLookup, current_sink, emit
from ..failures import InvalidState
from ..fold import Codec
from ..runs import current
from ..stores import AsyncCacheStore, CacheStore, MemoryCache


S = TypeVar("S")
S_contra = TypeVar("S_contra", contravariant=True)

__all__ = ("CachePolicy",)


def _whole(state: object) -> object:
    return state


@final
@attrs.frozen
class CachePolicy(Generic[S_contra]):
    """How a graph node caches its output (``builder.node(..., cache=)``).

    *ttl*: seconds an output stays valid (``None``: until the graph's
    fingerprint changes).  *key*: the part of the input state the node's
    output depends on (by default all of it); it must unstructure to JSON
    with the graph's converter.  *store*: where outputs live (by default a
    :class:`~pipeline.stores.MemoryCache` of the policy's own; share one
    store between policies, keep them in a checkpoint store's backend
    with a :class:`~pipeline.stores.StoreCache`, or pass your own
    :class:`~pipeline.stores.CacheStore` or
    :class:`~pipeline.stores.AsyncCacheStore`).

    .. versionadded:: 0.1.0
    """

    ttl: float | None = None
    key: Callable[[S_contra], object] = _whole
    store: CacheStore | AsyncCacheStore = attrs.field(factory=MemoryCache)

    def __attrs_post_init__(self) -> None:
        if self.ttl is not None and not self.ttl > 0:
            msg = f"CachePolicy(ttl=...) must be a positive number of seconds, not {self.ttl!r}"
            raise ValueError(msg)


_KEY_TYPE = "a JSON value (the cache key)"


def cached(
    call: AnyCall,
    node: str,
    policy: CachePolicy[Any],
    fingerprint: str,
    codec: Codec[Any],
) -> AnyCall:
    """*call* behind *policy*'s cache: a hit returns the stored output.

    A store in memory is called (a hit costs a dictionary lookup and the
    decoding); a store on a file or server (an :class:`AsyncCacheStore`)
    is awaited."""
    unstructure = codec.converter.unstructure
    structure = codec.converter.structure
    state_type = codec.state_type
    select, ttl = policy.key, policy.ttl
    prefix = canonical([fingerprint, node])
    aio = inspect.iscoroutinefunction(policy.store.get)
    get: Callable[[str], Any] = policy.store.get
    put = _put(policy.store)

    async def run(state: Any) -> Any:
        try:
            key = checksum(prefix + canonical(unstructure(select(state))))
        except (TypeError, ValueError, RecursionError) as exc:
            return Failure(
                InvalidState(node, "$", _KEY_TYPE, type(exc).__name__)
            )
        hit = await get(key) if aio else get(key)
        if hit is not None:
            try:
                out = structure(orjson.loads(hit), state_type)
            except STRUCTURE_ERRORS:
                out = None  # an entry that no longer fits: run the node
            else:
                if current_sink() is not None or current() is not None:
                    await _tell(node, key, hit=True)
                return Success(out)
        if current_sink() is not None or current() is not None:
            await _tell(node, key, hit=False)
        r = await call(state)
        if type(r) is Success:
            try:
                data = canonical(unstructure(r.unwrap()))
            except (TypeError, ValueError, RecursionError):
                return r  # the commit reports what cannot be stored
            await put(key, data, ttl)
        return r

    return run


def _put(
    store: CacheStore | AsyncCacheStore,
) -> Callable[[str, bytes, float | None], Awaitable[None]]:
    """*store*'s ``put``, awaited (a store in memory's is called inside a
    coroutine: a miss runs the node anyway, the cost is in the noise)."""
    if inspect.iscoroutinefunction(store.put):
        return store.put
    keep: Callable[[str, bytes, float | None], None] = store.put  # type: ignore[assignment]

    async def put(key: str, value: bytes, ttl: float | None) -> None:
        keep(key, value, ttl)

    return put


async def _tell(node: str, key: str, *, hit: bool) -> None:
    scope = current()
    if scope is not None and scope.tracing is not None:
        scope.tracing.cache_lookup(hit)
    await emit(CacheLookup(node, hit, key[:16]))
