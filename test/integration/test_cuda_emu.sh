#!/usr/bin/env bash
# megatron-c --device cuda end to end on the emulated CUDA device (test/emu, issue 7): the
# emulated rehearsal of scripts/gpu-test.sh's train step, each comparison its own TAP line. fp32
# gives the CPU run's losses within 1e-5; bf16 and fp16 track the emulated fp32 run within 1%;
# from a loss scale of 2^24 fp16 skips the iterations the CPU skips; tp 2 with sequence
# parallelism, pp 2 with virtual stages and dp 2 with the distributed optimizer and both overlaps,
# under mpirun with MPI staging, give the single-rank emulated run's losses, grad and params
# norms; cuDNN's fused attention (the default, the emulated cuDNN) in bf16 with attention dropout 0
# gives the CPU's bf16 losses within 1e-3 for the GPT and the Llama (grouped-query) model, and its
# tp 2 + SP, pp 2 x vpp 2 and dp 2 distributed-optimizer runs the single-rank cuDNN run's numbers
# (8 iterations each; about 90 s of CPU on top). Under the sanitizer build (MC_EMU_BUILD ending in emu-san) 12 iterations, without the
# bf16 and fp16 tracking (gpu-test.sh's sanitizer step runs bf16 there): the 2-core CI has 90
# minutes for everything.
# Measured on a shared 2-core machine: 97 s with build/emu, 121 s with build/emu-san (283 s there
# with every check at 24 iterations).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

if [ -z "${MC_EMU_BUILD:-}" ] || [ ! -x "$MC_EMU_BUILD/megatron-c" ]; then
    skip "megatron-c --device cuda on the emulated device" "no emulated build (MC_EMU_BUILD='${MC_EMU_BUILD:-}' has no megatron-c; make emu)"
    exit 0
fi
only=() what="fp32, bf16, fp16 (tracking and overflow), tp 2 + SP, pp 2 x vpp 2, dp 2 distopt, Llama fp32 and bf16, cuDNN GPT/Llama and layouts"
case $MC_EMU_BUILD in
*emu-san) only=(MC_GPU_TEST_ONLY="fp32 fp16-overflow tp pp dp llama" MC_GPU_TEST_ITERS=12)
    what="fp32, fp16 overflow, tp 2 + SP, pp 2 x vpp 2, dp 2 distopt, Llama fp32 (sanitizer build: 12 iterations)" ;;
esac

start=$(date +%s)
env MC_GPU_TEST_DEVICE=emu MC_EMU_BUILD="$MC_EMU_BUILD" MC_GPU_TEST_LOGS="$MC_TMP/logs" "${only[@]}" \
    bash "$ROOT/scripts/gpu-test.sh" train >"$MC_TMP/train" 2>&1
rc=$?
# its TAP lines as this suite's (numbering dropped)
sed -nE '/^(not )?ok [0-9]+ - /{ s/^(not )?ok [0-9]+ - /\1ok - /; s/# SKIP not in MC_GPU_TEST_ONLY$/# SKIP left out of the sanitizer build'"'"'s shorter run/; p }' "$MC_TMP/train"
closing=$(tail -1 "$MC_TMP/train")
check "gpu-test.sh train on the emulated device ($what): closing line, exit status 0 ($closing, rc=$rc, $(($(date +%s) - start)) s)" \
    bash -c "[ $rc -eq 0 ] && grep -qxE 'gpu-test: [0-9]+ passed, 0 failed, [0-9]+ skipped' <<<'$closing'"
summary=$(cat "$MC_TMP/logs/train.summary" 2>/dev/null)
check "gpu-test.sh train writes its one-line summary with the closing line's counts ($summary)" \
    bash -c "[ \$(wc -l <'$MC_TMP/logs/train.summary') -eq 1 ] &&
             grep -qE '^gpu-test train: ${closing#gpu-test: } \([0-9]+ s\)$' '$MC_TMP/logs/train.summary'"
[ $rc -eq 0 ] || grep -v '^ok\|^not ok' "$MC_TMP/train" | sed 's/^/# /' | head -40
