#!/usr/bin/env bash
# The emulated device can fail: test/emu/mutants.sh plants ten defects of the
# kinds the CUDA review lists (a wrong leading dimension or transposition in the cuBLASLt
# mapping, removed barriers, off-by-one indices, a missing bf16 rounding, an out-of-bounds
# shared-memory read, a wrong wmma ldm, a launch over the H100's limits) one at a time into a
# copy of the tree, and each must make an emulated op test fail. About 2 minutes on 2 cores; in
# the release build only (the sanitizer build's emulated tests run the same kernels).
set -u
cd "$(dirname "$0")/../.."
if [ -z "${MC_EMU_BUILD:-}" ] || [ ! -x "$MC_EMU_BUILD/megatron-c" ]; then
    echo "ok - planted defects caught by the emulated device # SKIP no emulated build (MC_EMU_BUILD)"
    exit 0
fi
case "$MC_EMU_BUILD" in
*-san) echo "ok - planted defects caught by the emulated device # SKIP run in the release build"; exit 0 ;;
esac
bash test/emu/mutants.sh
