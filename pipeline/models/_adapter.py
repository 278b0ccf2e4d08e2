"""What the SDK adapters share: error mapping and stop-reason names."""

from __future__ import annotations

import asyncio
import functools
import logging
import os

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Generic, Protocol, Self, TypeVar

import anyio
import attrs

from anyio.lowlevel import EventLoopToken, current_token

from ..failures import ModelError
from ._transport import TRANSPORT_ERRORS


def sdk_error(
    exc: Exception,
    *,
    provider: str,
    name: str,
    status_error: type[Exception],
    connection_error: type[Exception],
    withheld: Sequence[str] = (),
) -> ModelError:
    """A typed failure for an exception an SDK (or its HTTP library) raised.

    Its message never holds a string of *withheld* (the adapter's API key:
    a provider or proxy may quote the key it was sent, "Invalid API key:
    sk-..."); each shows as ``<api key>``.
    """
    path = (name,)
    status: int | None = None
    if isinstance(exc, status_error):
        status = getattr(exc, "status_code", None)
        message = str(getattr(exc, "message", None) or exc)
    elif isinstance(exc, connection_error):
        message = f"connection failed: {exc}"
    elif isinstance(exc, TRANSPORT_ERRORS):
        message = f"connection lost: {type(exc).__name__}: {exc}"
    else:
        message = f"malformed response: {type(exc).__name__}: {exc}"
    for secret in withheld:
        message = message.replace(secret, "<api key>")
    return ModelError(provider, message, status, path=path)


def stop_reason(
    reason: str | None, table: Mapping[str, str], default: str
) -> str:
    """A provider's stop reason in ModelResponse's words."""
    raw = reason or default
    return table.get(raw, raw)


class _Closable(Protocol):
    def close(self) -> Awaitable[None]: ...


C = TypeVar("C", bound=_Closable)

_LOG = logging.getLogger("pipeline.models")
_KEY_MIN = 8  # a shorter "key" is a placeholder; replacing it would garble
_REAPERS: set[object] = set()  # asyncio keeps only weak references to tasks


class ClientOwner(Generic[C]):
    """The SDK client an adapter calls; ``aclose()`` and ``async with``.

    A client the adapter built itself is made per event loop, on first use
    there, and closed when that loop ends (its connections belong to the
    loop: one left open would break the next loop's run, or warn when the
    garbage collector finds it).  A client the caller gave is used as it
    is, and is the caller's to close.
    """

    _given: C | None
    _key: str
    _make: Callable[[], C]
    _clients: dict[EventLoopToken, _Made[C]]

    def _own(
        self,
        given: C | None,
        sdk: Callable[..., C],
        *,
        key_variable: str,
        base_url: str | None,
        api_key: str | None,
        max_retries: int,
        timeout: float,
    ) -> None:
        """Use *given*, or make *sdk* clients with these settings (the API
        key falls back to the environment's *key_variable*)."""
        key = api_key or os.environ.get(key_variable) or "not-set"
        self._key = key
        self._given = given
        self._make = functools.partial(
            sdk,
            base_url=base_url,
            api_key=key,
            max_retries=max_retries,
            timeout=timeout,
        )
        self._clients = {}

    @property
    def withheld(self) -> tuple[str, ...]:
        """The API key this adapter's client sends, which no error message
        may show (none for a placeholder or a key too short to tell)."""
        key = (
            self._key
            if self._given is None
            else getattr(self._given, "api_key", None)
        )
        return (key,) if isinstance(key, str) and len(key) >= _KEY_MIN else ()

    @property
    def client(self) -> C:
        """The SDK client for the running event loop."""
        if self._given is not None:
            return self._given
        loop = current_token()
        made = self._clients.get(loop)
        if made is None:
            made = self._clients[loop] = _Made(self._make())
            _close_when_done(loop, made, self._clients)
        return made.client

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop (and its
        connections); the next call makes a new one."""
        if self._given is not None:
            await self._given.close()
            return
        made = self._clients.pop(current_token(), None)
        if made is not None:
            made.reaper.cancel()  # closed here: nothing left to reap
            await made.client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()


@attrs.define
class _Made(Generic[C]):
    """A client the adapter made, and the scope of the task reaping it."""

    client: C
    reaper: anyio.CancelScope = attrs.Factory(anyio.CancelScope)


def _close_when_done(
    loop: EventLoopToken,
    made: _Made[C],
    clients: dict[EventLoopToken, _Made[C]],
) -> None:
    """Close *made*'s client when *loop* ends: a task that sleeps until the
    loop cancels what is left (asyncio's runner and trio's system tasks
    both do), then closes it inside the loop its connections belong to.
    :meth:`ClientOwner.aclose` ends the task sooner."""

    async def reap() -> None:
        try:
            with made.reaper:
                await anyio.sleep_forever()
        finally:
            if clients.get(loop) is made:  # not closed by aclose()
                del clients[loop]
                with anyio.CancelScope(shield=True):
                    try:
                        await made.client.close()
                    except Exception:  # noqa: BLE001  # a finaliser must not crash the loop
                        _LOG.exception("closing an SDK client failed")

    native = loop.native_token
    if isinstance(native, asyncio.AbstractEventLoop):
        task = native.create_task(reap())
        _REAPERS.add(task)
        task.add_done_callback(_REAPERS.discard)
    else:
        import trio  # noqa: PLC0415  # only on trio

        trio.lowlevel.spawn_system_task(reap)
