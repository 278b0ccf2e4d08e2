"""The payload converter: every value crosses Temporal as canonical JSON.

Workflow inputs, activity inputs and results, query answers, update
arguments and failure details are unstructured by the same cattrs
converter the checkpoint stores use (:func:`pipeline._serde.make_converter`)
and written as canonical JSON (sorted keys, no NaN); they are read back by
structuring into the type the receiving side declares.  Snapshots travel
as the checkpoint codec's own documents (see :mod:`pipeline.temporal._wire`).
No class name is ever read from a payload and there is no pickle.
"""

from __future__ import annotations

from typing import Any, Final, final

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    BinaryNullPayloadConverter,
    BinaryPlainPayloadConverter,
    CompositePayloadConverter,
    DataConverter,
    EncodingPayloadConverter,
)

from .._depth import MAX_DEPTH, RECORD_DEPTH, loads
from .._serde import STRUCTURE_ERRORS, canonical, make_converter
from ..errors import NestedTooDeeply


ENCODING: Final = "json/plain"
"""The payloads' encoding: plain JSON, readable in Temporal's UI and CLI."""

PAYLOAD_DEPTH: Final = RECORD_DEPTH + MAX_DEPTH
"""How deep a payload may nest: a step's payload carries a checkpoint
record's document inside a few levels of its own."""

_CONVERTER = make_converter()


@final
class CattrsJSONPayloadConverter(EncodingPayloadConverter):
    """``json/plain`` payloads through the project's cattrs converter.

    .. versionadded:: 0.1.0
    """

    @property
    def encoding(self) -> str:
        """See :class:`temporalio.converter.EncodingPayloadConverter`."""
        return ENCODING

    def to_payload(self, value: Any) -> Payload | None:
        """*value* unstructured, as canonical JSON bytes.

        Raises:
            TypeError: *value* is not something JSON can hold (a
                non-finite float, an object cattrs cannot unstructure).
        """
        try:
            data = canonical(_CONVERTER.unstructure(value))
        except (ValueError, TypeError, RecursionError, OverflowError) as exc:
            msg = (
                f"cannot send a {type(value).__name__} through Temporal "
                f"as JSON ({type(exc).__name__})"
            )
            raise TypeError(msg) from None
        return Payload(metadata={"encoding": ENCODING.encode()}, data=data)

    def from_payload(self, payload: Payload, type_hint: Any = None) -> Any:
        """The payload structured into *type_hint* (plain JSON without one).

        Raises:
            RuntimeError: the payload is not JSON, or does not fit the
                declared type (the message names the type, never a value).
        """
        try:
            # The standard library: orjson reads integers past 64 bits as
            # floats, and a value must come back as it was sent.
            obj = loads(payload.data, "a Temporal payload", PAYLOAD_DEPTH)
        except NestedTooDeeply as exc:
            raise RuntimeError(str(exc)) from None
        except ValueError:
            msg = "a Temporal payload is not JSON"
            raise RuntimeError(msg) from None
        if type_hint is None or type_hint is Any:
            return obj
        try:
            return _CONVERTER.structure(obj, type_hint)
        except STRUCTURE_ERRORS:
            name = getattr(type_hint, "__qualname__", None) or str(type_hint)
            msg = f"a Temporal payload does not fit {name}"
            raise RuntimeError(msg) from None


@final
class PipelinePayloadConverter(CompositePayloadConverter):
    """``None`` and ``bytes`` as Temporal sends them; everything else as
    cattrs-structured JSON (:class:`CattrsJSONPayloadConverter`).

    .. versionadded:: 0.1.0
    """

    def __init__(self) -> None:
        super().__init__(
            BinaryNullPayloadConverter(),
            BinaryPlainPayloadConverter(),
            CattrsJSONPayloadConverter(),
        )


DATA_CONVERTER: Final = DataConverter(
    payload_converter_class=PipelinePayloadConverter
)
"""The data converter clients and workers of :mod:`pipeline.temporal` use."""
