"""What the SDK adapters share: error mapping and stop-reason names."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Generic, Protocol, Self, TypeVar

from ._transport import TRANSPORT_ERRORS
from ._types import ModelError


def sdk_error(
    exc: Exception,
    *,
    provider: str,
    name: str,
    status_error: type[Exception],
    connection_error: type[Exception],
) -> ModelError:
    """A typed failure for an exception an SDK (or its HTTP library) raised."""
    path = (name,)
    if isinstance(exc, status_error):
        status = getattr(exc, "status_code", None)
        message = getattr(exc, "message", None) or str(exc)
        return ModelError(provider, str(message), status, path=path)
    if isinstance(exc, connection_error):
        return ModelError(provider, f"connection failed: {exc}", path=path)
    if isinstance(exc, TRANSPORT_ERRORS):
        return ModelError(
            provider,
            f"connection lost: {type(exc).__name__}: {exc}",
            path=path,
        )
    return ModelError(
        provider, f"malformed response: {type(exc).__name__}: {exc}", path=path
    )


def stop_reason(
    reason: str | None, table: Mapping[str, str], default: str
) -> str:
    """A provider's stop reason in ModelResponse's words."""
    raw = reason or default
    return table.get(raw, raw)


class _Closable(Protocol):
    def close(self) -> Awaitable[None]: ...


C = TypeVar("C", bound=_Closable)


class ClientOwner(Generic[C]):
    """``aclose()`` and ``async with`` for an adapter holding an SDK client."""

    _client: C

    async def aclose(self) -> None:
        """Close the HTTP client (and its connections)."""
        await self._client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()
