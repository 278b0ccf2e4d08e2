"""``--trace otlp|console``: an OpenTelemetry SDK provider for one command.

The provider is set as the process's global one before the target is
loaded (so spans your own code makes join the run's trace) and shut down
when the command ends, however it ends (done, failed, Ctrl-C), which
flushes what is still buffered.  ``console`` prints each span to stderr
as it ends (the SDK's ``ConsoleSpanExporter``); ``otlp`` batches them to
an OTLP/HTTP endpoint read from the standard ``OTEL_EXPORTER_OTLP_*``
variables (default ``http://localhost:4318/v1/traces``).  The service is
called ``pipeline`` unless ``OTEL_SERVICE_NAME`` or
``OTEL_RESOURCE_ATTRIBUTES`` says otherwise.
"""

from __future__ import annotations

import importlib

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ._exits import ExitCode, UserError


if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

KINDS = ("otlp", "console")

_NEEDS = {
    "console": ("opentelemetry.sdk.trace", "opentelemetry-sdk"),
    "otlp": (
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
        "opentelemetry-exporter-otlp-proto-http",
    ),
}


def _require(kind: str) -> None:
    """Import what *kind* needs, or a one-line error saying how to get it."""
    for name, needs in (_NEEDS["console"], _NEEDS[kind]):
        try:
            importlib.import_module(name)
        except ImportError:
            msg = (
                f"--trace {kind} needs {needs}: "
                "pip install 'typed-pipeline[otel]'"
            )
            raise UserError(msg, code=ExitCode.UNAVAILABLE) from None


def provider(kind: str) -> TracerProvider:
    """An SDK tracer provider exporting to *kind* (``otlp`` or ``console``)."""
    _require(kind)
    import sys  # noqa: PLC0415

    from opentelemetry.sdk.resources import (  # noqa: PLC0415
        SERVICE_NAME,
        Resource,
    )
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import (  # noqa: PLC0415
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )

    resource = Resource.create()
    named = str(resource.attributes.get(SERVICE_NAME, ""))
    if named.startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "pipeline"}))
    made = TracerProvider(resource=resource)
    if kind == "console":
        made.add_span_processor(
            SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr))
        )
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter,
        )

        made.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return made


@contextmanager
def tracing(kind: str | None) -> Iterator[Any]:
    """The command's tracer provider (``None`` without ``--trace``), global
    for the block, flushed and shut down at its end."""
    if kind is None:
        yield None
        return
    made = provider(kind)
    from opentelemetry import trace  # noqa: PLC0415

    trace.set_tracer_provider(made)
    try:
        yield made
    finally:
        made.shutdown()
