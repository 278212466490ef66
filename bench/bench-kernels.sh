#!/usr/bin/env bash
# Kernel benchmark of the CUDA backend against its roofline: builds
# bench/bench_kernels and runs it; every op of the table but attention, bandwidth-bound ops
# in GB/s against the device's copy bandwidth (H100 3350 GB/s, H200 4300 GB/s), GEMMs in TFLOP/s
# against the dense peak (989 bf16/fp16, 67 fp32). A benchmark, not a test: it never fails on
# speed. Without a CUDA build or a GPU it prints why and exits 2.
#
#   bench/bench-kernels.sh                 # GPT-2 350M-like sizes
#   bench/bench-kernels.sh --quick         # small sizes
#   bench/bench-kernels.sh --peak-gbs 3000 # another bandwidth roofline
set -euo pipefail
cd "$(dirname "$0")/.."
make -s -j"$(nproc 2>/dev/null || echo 2)" build/rel/bench/bench_kernels >&2
exec build/rel/bench/bench_kernels "$@"
