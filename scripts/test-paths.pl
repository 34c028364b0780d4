#!/usr/bin/perl -pi
# Rewrites the pre-issue-29 test paths (one binary per file in tests/) to the per-tier
# layout (tests/README.md): `perl scripts/test-paths.pl FILE...` edits the files in place.
# Run it again on files merged from branches that still name the old paths.
s{(?<!parsers/)(?<!samples/)tests/vm_(\w+|\*)\.rs}{tests/vm/$1.rs}g;
s{(?<!parsers/)(?<!samples/)tests/(\w+|\*)_host\.rs}{tests/host/$1.rs}g;
s{(?<!parsers/)(?<!samples/)tests/(cli|tiers|export_transport|metrics_endpoint)\.rs}{tests/pure/$1.rs}g;
s{(?<!parsers/)(?<!samples/)tests/pipelines\.rs}{tests/pipelines/main.rs}g;
