#!/usr/bin/env python3
"""An independent OTLP/HTTP receiver: the official protobuf definitions (PyPI
opentelemetry-proto) parse what uevrec sends, not uevrec's own crates.

    receiver.py PORTFILE OUTFILE

Listens on 127.0.0.1 (a free port, written to PORTFILE once listening) and answers
POST /v1/logs, /v1/traces, /v1/metrics: the body (gzip-decoded when Content-Encoding
says so) must parse as the signal's Export*ServiceRequest, as protobuf
(application/x-protobuf) or OTLP/JSON (application/json: hex ids undone, unknown
fields refused). Each request is appended to OUTFILE as one JSON line (the
protobuf-to-JSON mapping of the parsed message, ids in base64) and answered 200 with an
empty Export*ServiceResponse in the request's encoding; a body that does not parse is
answered 400 and written as {"error": ...}. Runs until killed.
"""
import gzip
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2 as logs
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as metrics
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as trace

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from validate import undo_hex  # noqa: E402  (the hex-id rule, in one place)

SIGNALS = {
    "/v1/logs": (logs.ExportLogsServiceRequest, logs.ExportLogsServiceResponse),
    "/v1/traces": (trace.ExportTraceServiceRequest, trace.ExportTraceServiceResponse),
    "/v1/metrics": (metrics.ExportMetricsServiceRequest, metrics.ExportMetricsServiceResponse),
}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        request, response = SIGNALS.get(self.path, (None, None))
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        json_body = self.headers.get("Content-Type", "").startswith("application/json")
        try:
            if request is None:
                raise ValueError(f"unknown path {self.path}")
            msg = request()
            if json_body:
                json_format.Parse(json.dumps(undo_hex(json.loads(body))), msg)
            else:
                msg.ParseFromString(body)
                # Every byte is a field the definitions know: serialized again, the
                # message is the same bytes (uevrec writes the canonical encoding).
                if msg.SerializeToString() != body:
                    raise ValueError("the request is not the canonical encoding of what it parses to")
            line = {"path": self.path, "json": json_body, "request": json_format.MessageToDict(msg)}
            status, out = 200, response()
        except Exception as e:  # answered 400 and recorded: the test fails on it
            line = {"path": self.path, "error": str(e)}
            status, out = 400, None
        with open(sys.argv[2], "a") as f:
            f.write(json.dumps(line) + "\n")
        payload = b""
        if out is not None:
            payload = json_format.MessageToJson(out).encode() if json_body else out.SerializeToString()
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if json_body else "application/x-protobuf")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


server = HTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os  # noqa: E402

os.rename(sys.argv[1] + ".tmp", sys.argv[1])
server.serve_forever()
