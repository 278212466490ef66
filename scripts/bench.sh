#!/usr/bin/env bash
# The GPU benchmark moved to bench/ with the others; this name still works (docs/PERF.md).
exec "$(dirname "$0")/../bench/bench.sh" "$@"
