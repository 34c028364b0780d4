#!/usr/bin/env python3
"""Fetch a uevrec /metrics page and print what a real Prometheus text parser reads in it.

Usage: parse.py URL [--openmetrics]

Fetches URL with urllib (asking for OpenMetrics with --openmetrics, else for the
Prometheus text format 0.0.4), parses the body with the PyPI package prometheus-client
(prometheus_client.parser for the 0.0.4 text, prometheus_client.openmetrics.parser for
OpenMetrics, which also enforces its stricter rules: # EOF, counter and histogram shapes),
and prints one JSON object:
  {"content_type": ..., "families": {name: type}, "samples": [{"name", "labels", "value"}]}
A body either parser rejects makes it exit 1 with the parser's message.
"""
import json
import sys
import urllib.request

from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families as prometheus_families


def main():
    url = sys.argv[1]
    openmetrics = "--openmetrics" in sys.argv[2:]
    accept = (
        "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"
        if openmetrics
        else "text/plain;version=0.0.4"
    )
    req = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(req, timeout=10) as resp:
        content_type = resp.headers.get("Content-Type", "")
        text = resp.read().decode("utf-8")
    parse = openmetrics_families if openmetrics else prometheus_families
    families = {}
    samples = []
    try:
        for family in parse(text):
            if family.name in families:
                raise ValueError(f"family {family.name} twice")
            families[family.name] = family.type
            for s in family.samples:
                samples.append({"name": s.name, "labels": dict(s.labels), "value": s.value})
    except Exception as e:  # the parsers raise ValueError and others
        print(f"parse.py: the parser rejected the page: {e!r}\n{text}", file=sys.stderr)
        sys.exit(1)
    json.dump({"content_type": content_type, "families": families, "samples": samples}, sys.stdout)


if __name__ == "__main__":
    main()
