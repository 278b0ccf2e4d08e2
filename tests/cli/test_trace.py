"""``pipeline run --trace otlp|console`` end to end: real subprocesses, the
SDK's console exporter, and the OTLP/HTTP exporter sending to a collector
of our own on loopback (which decodes the protobuf requests it receives)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import attrs
import pytest

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from pipeline.cli import ExitCode
from tests.cli.runner import FLOWS, Terminal, cli, environment


pytestmark = pytest.mark.slow  # every test starts the command (1 s or more)

PLAIN = f"{FLOWS}:plain"
TICKET = '{"text": "x"}'
PLAIN_SPANS = {
    "node classify",
    "node draft",
    "node send",
    "graph graph",
    f"run {PLAIN}",
}


@attrs.frozen
class Export:
    """One request the collector received."""

    path: str
    content_type: str
    request: ExportTraceServiceRequest

    def spans(self) -> list[Any]:
        return [
            span
            for resource in self.request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]

    def services(self) -> set[str]:
        return {
            attribute.value.string_value
            for resource in self.request.resource_spans
            for attribute in resource.resource.attributes
            if attribute.key == "service.name"
        }


@attrs.define
class Collector:
    """An OTLP/HTTP trace receiver on 127.0.0.1."""

    server: ThreadingHTTPServer
    received: list[Export] = attrs.field(factory=list)

    @property
    def endpoint(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def span_names(self) -> set[str]:
        return {
            span.name for export in self.received for span in export.spans()
        }


@pytest.fixture(name="collector")
def _collector() -> Iterator[Collector]:
    received: list[Export] = []

    class Receive(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append(
                Export(
                    self.path,
                    self.headers["Content-Type"],
                    ExportTraceServiceRequest.FromString(body),
                )
            )
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            del format, args  # quiet

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receive)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    yield Collector(server, received)
    server.shutdown()
    server.server_close()
    serving.join()


def console_spans(text: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporter wrote among other lines."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    at = text.find("{\n")
    while at != -1:
        span, end = decoder.raw_decode(text, at)
        found.append(span)
        at = text.find("{\n", end)
    return found


def test_console_prints_every_span_to_stderr(tmp_path: Path) -> None:
    """``--trace console``: the run's spans as JSON on stderr, stdout kept
    for the result."""
    done = cli(
        "run",
        PLAIN,
        "--input",
        TICKET,
        "--store",
        str(tmp_path / "t.sqlite3"),
        "--trace",
        "console",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sent"] is True
    spans = console_spans(done.stderr)
    assert {s["name"] for s in spans} == PLAIN_SPANS
    run = next(s for s in spans if s["name"] == f"run {PLAIN}")
    assert run["parent_id"] is None
    assert run["resource"]["attributes"]["service.name"] == "pipeline"
    ids = {s["context"]["trace_id"] for s in spans}
    assert len(ids) == 1


def test_otlp_exports_to_the_configured_endpoint(
    tmp_path: Path, collector: Collector
) -> None:
    """``--trace otlp`` posts protobuf to ``$OTEL_EXPORTER_OTLP_ENDPOINT``
    + ``/v1/traces``, named by ``$OTEL_SERVICE_NAME``; nothing on stderr."""
    done = cli(
        "run",
        PLAIN,
        "--input",
        TICKET,
        "--store",
        str(tmp_path / "t.sqlite3"),
        "--trace",
        "otlp",
        cwd=tmp_path,
        env=environment(
            OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
            OTEL_SERVICE_NAME="desk",
        ),
    )
    assert done.returncode == 0, done.stderr
    assert "{" not in done.stderr
    assert collector.received
    for export in collector.received:
        assert export.path == "/v1/traces"
        assert export.content_type == "application/x-protobuf"
        assert export.services() == {"desk"}
    assert collector.span_names() == PLAIN_SPANS


def test_a_provider_the_target_sets_traces_without_the_flag(
    tmp_path: Path,
) -> None:
    """A global provider the target's module sets when imported (as
    ``logfire.configure()`` does) traces the CLI's run."""
    module = tmp_path / "traced_flow.py"
    module.write_text(
        "import sys\n"
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import (\n"
        "    ConsoleSpanExporter, SimpleSpanProcessor)\n"
        "from tests.cli.flows import plain\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(\n"
        "    SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))\n"
        "trace.set_tracer_provider(provider)\n",
        encoding="utf-8",
    )
    env = environment()
    env["PYTHONPATH"] += f":{tmp_path}"
    done = cli(
        "run",
        "traced_flow:plain",
        "--input",
        TICKET,
        "--store",
        str(tmp_path / "t.sqlite3"),
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    names = {s["name"] for s in console_spans(done.stderr)}
    assert names == (PLAIN_SPANS - {f"run {PLAIN}"}) | {
        "run traced_flow:plain"
    }


@pytest.mark.parametrize("kind", ["otlp", "console"])
def test_a_missing_extra_is_one_line(tmp_path: Path, kind: str) -> None:
    """Without the exporter (or the SDK): one line naming the extra, exit 6."""
    hidden = (
        "opentelemetry.sdk.trace"
        if kind == "console"
        else "opentelemetry.exporter.otlp.proto.http.trace_exporter"
    )
    code = (
        f"import sys; sys.modules[{hidden!r}] = None; "
        "from pipeline.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    done = subprocess.run(  # noqa: S603  # our own interpreter and code
        [
            sys.executable,
            "-c",
            code,
            "run",
            PLAIN,
            "--input",
            TICKET,
            "--store",
            str(tmp_path / "t.sqlite3"),
            "--trace",
            kind,
        ],
        cwd=tmp_path,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == ExitCode.UNAVAILABLE
    assert "Traceback" not in done.stderr
    out = done.stderr.strip().splitlines()
    assert out[0].startswith(f"pipeline: error: --trace {kind} needs ")
    assert out[0].endswith("pip install 'typed-pipeline[otel]'")
    assert not (tmp_path / "t.sqlite3").exists()


def test_an_unknown_kind_is_a_usage_error(tmp_path: Path) -> None:
    done = cli("run", PLAIN, "--trace", "jaeger", cwd=tmp_path)
    assert done.returncode == ExitCode.USAGE
    assert "'jaeger' is not one of 'otlp', 'console'" in done.stderr


@pytest.mark.slow
def test_ctrl_c_flushes_the_spans(
    tmp_path: Path, collector: Collector
) -> None:
    """Ctrl-C mid-node: exit 130, and the batched spans still reach the
    collector (held back by a long batch delay until the exit's flush),
    the abandoned node's marked failed."""
    term = Terminal.start(
        "run",
        PLAIN,
        "--input",
        TICKET,
        "--store",
        str(tmp_path / "t.sqlite3"),
        "--trace",
        "otlp",
        cwd=tmp_path,
        env=environment(
            FLOWS_BLOCK="1",
            OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
            OTEL_BSP_SCHEDULE_DELAY="600000",
        ),
    )
    term.read_until(b"at send")
    assert collector.received == []  # batched: nothing sent before exit
    term.press_ctrl_c()
    assert term.wait() == ExitCode.CANCELLED
    assert collector.span_names() == PLAIN_SPANS
    spans = {s.name: s for e in collector.received for s in e.spans()}
    failed = spans["node send"]
    assert failed.status.code == failed.status.STATUS_CODE_ERROR
    assert (
        spans["node classify"].status.code != failed.status.STATUS_CODE_ERROR
    )
