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
import weakref

from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar, final

import attrs
import orjson

from returns.result import Failure, Success

from .._frozen import ContentMemo, IdentityMemo
from .._runners import AnyCall
from .._seconds import positive_seconds
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
        if self.ttl is not None:
            positive_seconds(self.ttl, "CachePolicy(ttl=...)")


_KEY_TYPE = "a JSON value (the cache key)"


def cached(
    call: AnyCall,
    node: str,
    policy: CachePolicy[Any],
    fingerprint: str,
    codec: Codec[Any],
) -> AnyCall:
    """*call* behind *policy*'s cache: a hit returns the stored output.

    A store in memory is called (a hit costs a dictionary lookup); a store
    on a file or server (an :class:`AsyncCacheStore`) is awaited.  A
    deeply frozen input met again is keyed by its identity, and the bytes
    of a deeply frozen output are decoded once (:mod:`pipeline._frozen`):
    a re-run, handed back the states its hits returned, neither keys nor
    decodes again."""
    unstructure = codec.converter.unstructure
    structure = codec.converter.structure
    state_type = codec.state_type
    select, ttl = policy.key, policy.ttl
    prefix = canonical([fingerprint, node])
    aio = inspect.iscoroutinefunction(policy.store.get)
    get: Callable[[str], Any] = policy.store.get
    put = _put(policy.store)
    # A re-run meets the same objects again: keys of deeply frozen inputs
    # by identity, decoded outputs of deeply frozen states by their bytes
    # (see pipeline._frozen); anything else is keyed and decoded anew.
    keys: IdentityMemo[str] = IdentityMemo()
    known = keys.entries
    decoded: ContentMemo[Any] = ContentMemo()
    outputs = decoded.entries
    ref = weakref.ref
    whole = select is _whole

    keyed = _keyer(prefix, unstructure, keys)
    decode = _decoder(structure, state_type, decoded)
    miss = _miss(call, node, unstructure, put, ttl)

    async def run(state: Any) -> Any:
        try:
            chosen = state if whole else select(state)
            seen = known.get(id(chosen))
            if (
                seen is not None
                and (
                    (held := seen[0]) is chosen
                    or (type(held) is ref and held() is chosen)
                )
                and (seen[2] or keys.verify(chosen, seen))
            ):
                key = seen[1]
            else:
                key = keyed(chosen)
        except (TypeError, ValueError, RecursionError) as exc:
            return Failure(
                InvalidState(node, "$", _KEY_TYPE, type(exc).__name__)
            )
        hit = await get(key) if aio else get(key)
        if hit is not None:
            found = outputs.get(hit)
            if found is None:
                found = decode(hit)
            if found is not None:
                if current_sink() is not None or current() is not None:
                    await _tell(node, key, hit=True)
                return found
        return await miss(state, key)

    return run


def _keyer(
    prefix: bytes, unstructure: Callable[[Any], Any], keys: IdentityMemo[str]
) -> Callable[[object], str]:
    """The key of a value met anew (kept by the value's identity)."""

    def keyed(chosen: object) -> str:
        key = checksum(prefix + canonical(unstructure(chosen)))
        keys.put(chosen, key)
        return key

    return keyed


def _decoder(
    structure: Callable[[Any, Any], Any],
    state_type: Any,
    decoded: ContentMemo[Any],
) -> Callable[[bytes], Any]:
    """A hit's bytes decoded to a ``Success``, or ``None`` for an entry
    that no longer fits (then the node runs)."""

    def decode(hit: bytes) -> Any:
        try:
            out = structure(orjson.loads(hit), state_type)
        except STRUCTURE_ERRORS:
            return None
        # Shared by every later hit on these bytes if *out* is deeply
        # frozen (the Success too: it is immutable as well).
        found = Success(out)
        decoded.put(hit, out, found)
        return found

    return decode


def _miss(
    call: AnyCall,
    node: str,
    unstructure: Callable[[Any], Any],
    put: Callable[[str, bytes, float | None], Awaitable[None]],
    ttl: float | None,
) -> Callable[[Any, str], Awaitable[Any]]:
    """A miss: say so, run the node, store a success under *key*."""

    async def miss(state: Any, key: str) -> Any:
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

    return miss


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
