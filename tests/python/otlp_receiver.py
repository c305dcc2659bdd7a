"""A tiny OTLP/HTTP trace receiver (protobuf), for tests only.

    python otlp_receiver.py PORT_FILE OUT_FILE

Listens on 127.0.0.1 on a free port and writes that port's number into
PORT_FILE (written whole: a temporary file renamed into place), so a test
waits for PORT_FILE to appear and then points the exporter at
http://127.0.0.1:PORT/v1/traces.

POST /v1/traces with `Content-Type: application/x-protobuf` (optionally
`Content-Encoding: gzip`) is decoded as an ExportTraceServiceRequest, and
each span appends one JSON line to OUT_FILE (flushed at once):

    {"trace_id": hex, "span_id": hex, "parent_span_id": hex or "",
     "name": str, "kind": int, "status_code": int,
     "service_name": the resource's `service.name` (or ""),
     "attributes": {name: str | int | float | bool | list | dict},
     "events": int}

and the answer is 200 with an empty ExportTraceServiceResponse. Another
path or method -> 404; another content type or encoding -> 415; a body
that does not decode -> 400.

Needs the `py-otel` environment of scripts/python-env.sh
(opentelemetry-proto).
"""

import gzip
import json
import os
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

PROTOBUF = "application/x-protobuf"
# Far above what a test exports; a larger body is refused (413).
MAX_BODY = 64 * 1024 * 1024


def any_value(value):
    """An OTLP AnyValue as a Python value."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)  # string_value, bool_value, int_value, double_value


def attributes(key_values):
    return {kv.key: any_value(kv.value) for kv in key_values}


def span_lines(request):
    """One dict per span of an ExportTraceServiceRequest."""
    for resource_spans in request.resource_spans:
        service = attributes(resource_spans.resource.attributes).get("service.name")
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield {
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "kind": int(span.kind),
                    "status_code": int(span.status.code),
                    "service_name": service if isinstance(service, str) else "",
                    "attributes": attributes(span.attributes),
                    "events": len(span.events),
                }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: exporters pool their connection

    def log_message(self, *args):
        pass

    def reply(self, code, body=b"", content_type="text/plain"):
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if code != 200:
            # The request's body may be unread: don't reuse the connection.
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def read_body(self):
        """The request's body (Content-Length or chunked), or None if too large."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks, total = [], 0
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                total += size
                if total > MAX_BODY:
                    return None
                chunks.append(self.rfile.read(size))
                self.rfile.readline()  # the CRLF after the chunk
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return None
        return self.rfile.read(length)

    def do_GET(self):
        self.reply(404, b"not found\n")

    do_PUT = do_DELETE = do_PATCH = do_HEAD = do_GET

    def do_POST(self):
        if self.path.split("?", 1)[0] != "/v1/traces":
            return self.reply(404, b"not found\n")
        media_type = self.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        if media_type != PROTOBUF:
            return self.reply(415, f"expected {PROTOBUF}\n".encode())
        encoding = self.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("identity", "gzip"):
            return self.reply(415, b"expected Content-Encoding gzip or none\n")
        try:
            body = self.read_body()
        except ValueError:
            return self.reply(400, b"bad body framing\n")
        if body is None:
            return self.reply(413, b"body too large\n")
        try:
            if encoding == "gzip":
                body = gzip.decompress(body)
            request = ExportTraceServiceRequest.FromString(body)
        except (OSError, EOFError, zlib.error, DecodeError) as e:
            return self.reply(400, f"cannot decode: {e}\n".encode())
        lines = [json.dumps(span) + "\n" for span in span_lines(request)]
        with self.server.out_lock:
            for line in lines:
                self.server.out.write(line)
                self.server.out.flush()
        self.reply(200, ExportTraceServiceResponse().SerializeToString(), PROTOBUF)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: otlp_receiver.py PORT_FILE OUT_FILE")
    port_file, out_file = sys.argv[1], sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.out = open(out_file, "a", encoding="utf-8")
    server.out_lock = threading.Lock()
    tmp = f"{port_file}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.out.close()


if __name__ == "__main__":
    main()
