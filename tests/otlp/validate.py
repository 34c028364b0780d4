#!/usr/bin/env python3
"""Check OTLP/JSON lines with the official protobuf definitions (PyPI opentelemetry-proto).

    validate.py FILE

Each line must be one ExportLogsServiceRequest, ExportTraceServiceRequest or
ExportMetricsServiceRequest. OTLP/JSON departs from the standard protobuf JSON mapping
in two ways (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding): trace and
span ids are hex, not base64 (undone here: hex -> base64 for every traceId, spanId and
parentSpanId), and enums are integers (which json_format accepts as they are). The
line is then parsed by google.protobuf.json_format.Parse with unknown fields refused.
Prints one summary line; exits 1 on the first line that does not parse.
"""
import base64
import json
import sys

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

TYPES = {
    "resourceLogs": ExportLogsServiceRequest,
    "resourceSpans": ExportTraceServiceRequest,
    "resourceMetrics": ExportMetricsServiceRequest,
}
ID_KEYS = {"traceId", "spanId", "parentSpanId"}


def undo_hex(v):
    """Hex ids -> base64, everywhere in the request."""
    if isinstance(v, dict):
        return {
            k: (base64.b64encode(bytes.fromhex(x)).decode() if k in ID_KEYS and isinstance(x, str) else undo_hex(x))
            for k, x in v.items()
        }
    if isinstance(v, list):
        return [undo_hex(x) for x in v]
    return v


def main(path):
    counts = {k: 0 for k in TYPES}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            obj = json.loads(line)
            keys = list(obj)
            if len(keys) != 1 or keys[0] not in TYPES:
                print(f"line {n}: not an export request: keys {keys}")
                return 1
            try:
                json_format.Parse(json.dumps(undo_hex(obj)), TYPES[keys[0]](), ignore_unknown_fields=False)
            except (json_format.ParseError, ValueError) as e:
                print(f"line {n}: {e}")
                return 1
            counts[keys[0]] += 1
    print("ok " + json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
