"""Failure values across Temporal: a closed set of kinds, by name.

A step's ``Failure`` becomes a :class:`~pipeline.temporal._wire.FailureDoc`
(its kind and its fields as JSON); a run that ends on one fails its
workflow with a non-retryable ``ApplicationError`` of that kind carrying
the document, and the client structures it back into the very type, so
``result()`` gives the same failure value ``run()`` gives in process.

Kinds are looked up in a table (the library's own failure types and the
ones a user registers), never imported: a payload cannot name a class to
build.  A failure of another type arrives as :class:`RemoteFailure`, with
its kind and message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, final

import attrs

from temporalio.exceptions import ApplicationError

from .. import failures
from .._serde import STRUCTURE_ERRORS, make_converter
from ..failures import PipelineError, RemoteFailure
from ._wire import FailureDoc


_CONVERTER = make_converter()

_JSON_KIND: Final = "json"
"""Failure values that are plain JSON (a string, a number, ...)."""

_JSON_TYPES = (str, int, float, bool, type(None), list, dict)


def _library_kinds() -> dict[str, type[Any]]:
    kinds: dict[str, type[Any]] = {}
    for name in failures.__all__:
        cls = getattr(failures, name)
        if (
            isinstance(cls, type)
            and issubclass(cls, PipelineError)
            and cls is not PipelineError
        ):
            kinds[name] = cls
    return kinds


LIBRARY_KINDS: Final[Mapping[str, type[Any]]] = _library_kinds()


@final
class Kinds:
    """The failure types one side knows, by name."""

    __slots__ = ("_by_name",)

    def __init__(self, extra: Iterable[type[Any]] = ()) -> None:
        self._by_name: dict[str, type[Any]] = dict(LIBRARY_KINDS)
        for cls in extra:
            if not attrs.has(cls):
                msg = (
                    f"failure type {cls.__qualname__} must be an attrs "
                    "class (its fields travel as JSON)"
                )
                raise TypeError(msg)
            known = self._by_name.get(cls.__qualname__)
            if known is not None and known is not cls:
                msg = f"two failure types named {cls.__qualname__}"
                raise ValueError(msg)
            self._by_name[cls.__qualname__] = cls

    def encode(self, failure: object) -> FailureDoc:
        """*failure* as a document (its kind, its fields)."""
        cls = type(failure)
        if isinstance(failure, _JSON_TYPES):
            return FailureDoc(_JSON_KIND, failure, str(failure))
        name = cls.__qualname__
        if self._by_name.get(name) is cls:
            try:
                return FailureDoc(
                    name, _CONVERTER.unstructure(failure), str(failure)
                )
            except (TypeError, ValueError, RecursionError):
                pass  # a field JSON cannot hold (Raised's exception, say)
        path = getattr(failure, "path", ())
        return FailureDoc(
            "RemoteFailure",
            {
                "kind": name,
                "message": str(failure),
                "path": list(path) if isinstance(path, tuple) else [],
            },
            str(failure),
        )

    def decode(self, doc: FailureDoc) -> object:
        """The failure value *doc* stands for (a :class:`RemoteFailure`
        when its kind is unknown here or its fields do not fit)."""
        if doc.kind == _JSON_KIND:
            return doc.data
        cls = self._by_name.get(doc.kind)
        if cls is not None:
            try:
                return _CONVERTER.structure(doc.data, cls)
            except STRUCTURE_ERRORS:
                pass
        return RemoteFailure(doc.kind, doc.message)

    def error(self, failure: object) -> ApplicationError:
        """The non-retryable error a workflow fails with for *failure*."""
        return self.error_for(self.encode(failure))

    @staticmethod
    def error_for(doc: FailureDoc) -> ApplicationError:
        """The non-retryable error a workflow fails with for *doc*."""
        return ApplicationError(
            doc.message or doc.kind,
            doc,
            type=f"pipeline.{doc.kind}",
            non_retryable=True,
        )


def from_error(kinds: Kinds, exc: BaseException) -> object:
    """The failure value a workflow's failure stands for."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ApplicationError) and (
            cause.type or ""
        ).startswith("pipeline."):
            details = cause.details
            if details:
                doc = details[0]
                if not isinstance(doc, FailureDoc):
                    try:
                        doc = _CONVERTER.structure(doc, FailureDoc)
                    except STRUCTURE_ERRORS:
                        break
                return kinds.decode(doc)
        cause = cause.__cause__
    innermost = exc
    while innermost.__cause__ is not None:
        innermost = innermost.__cause__
    kind = (
        innermost.type
        if isinstance(innermost, ApplicationError) and innermost.type
        else type(innermost).__name__
    )
    return RemoteFailure(kind, str(innermost))
