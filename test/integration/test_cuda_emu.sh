#!/usr/bin/env bash
# megatron-c --device cuda end to end on the emulated CUDA device (test/emu): the emulated
# rehearsal of scripts/gpu-test.sh's train step, each comparison its own TAP line, 6 iterations
# (24 on a GPU; 6 pass the same code: 3 of warmup, cosine decay, two evaluations, dropout on). fp32
# gives the CPU run's losses within 1e-5; bf16 tracks the emulated fp32 run within 1%; from a loss
# scale of 2^24 fp16 skips the iterations the CPU skips, its applied iterations within 1% of the
# CPU's; tp 2 with sequence parallelism, pp 2 with virtual stages and dp 2 with the distributed
# optimizer and both overlaps, under mpirun with MPI staging, give the single-rank emulated run's
# losses, grad and params norms; the Llama block in fp32 gives the CPU's losses; cuDNN's fused
# attention (the default on the emulated cuDNN) in bf16 with attention dropout 0 gives the CPU's
# bf16 losses within 1e-3 for the GPT and the Llama (grouped-query) model, and its tp 2 + SP run
# (the heads split over ranks: cuDNN's graph at other shapes) the single-rank cuDNN run's numbers
# (MC_GPU_TEST_CUDNN_ITERS, 6 iterations: warmup, decay, two evaluations; the bf16 run above
# takes the project's attention, whose dropout masks are the fp32 run's). Left to the GPU
# run: fp16 tracking fp32 from a scale of 4096 (here fp16-overflow's applied iterations against
# the CPU and the fp16 op tests check the fp16 path), the Llama block in bf16 (here the Llama
# fp32 run, bf16 GPT run and the bf16 op tests of its ops), and cuDNN's attention under pp 2 x
# vpp 2 and dp 2 (the attention sees the single rank's shapes there: the pp and dp runs above
# check those layouts, test_cp's emulated runs cuDNN beside cp).
# Under the sanitizer build (MC_EMU_BUILD ending in emu-san) fp32 and dp 2 (the overlapped grad
# reduce and param gather: the most concurrent path) at 4 iterations; gpu-test.sh's sanitizer
# step (test_gpu_scripts.sh) runs a bf16 one.
# ci-sanitize: the emulated device end to end under ASan on two ranks (a short run)
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

if [ -z "${MC_EMU_BUILD:-}" ] || [ ! -x "$MC_EMU_BUILD/megatron-c" ]; then
    skip "megatron-c --device cuda on the emulated device" "no emulated build (MC_EMU_BUILD='${MC_EMU_BUILD:-}' has no megatron-c; make emu)"
    exit 0
fi
only=(MC_GPU_TEST_ONLY="fp32 bf16 fp16-overflow tp pp dp llama cudnn cudnn-tp cudnn-llama"
      MC_GPU_TEST_ITERS=6 MC_GPU_TEST_CUDNN_ITERS=6)
what="fp32, bf16, fp16 overflow, tp 2 + SP, pp 2 x vpp 2, dp 2 distopt, Llama fp32, cuDNN GPT/Llama and tp 2: 6 iterations"
left="left to the GPU run (see this script's header)"
case $MC_EMU_BUILD in
*emu-san) only=(MC_GPU_TEST_ONLY="fp32 dp" MC_GPU_TEST_ITERS=4)
    what="fp32, dp 2 distopt (sanitizer build: 4 iterations)"
    left="left out of the sanitizer build's shorter run" ;;
esac

start=$(date +%s)
env MC_GPU_TEST_DEVICE=emu MC_EMU_BUILD="$MC_EMU_BUILD" MC_GPU_TEST_LOGS="$MC_TMP/logs" "${only[@]}" \
    bash "$ROOT/scripts/gpu-test.sh" train >"$MC_TMP/train" 2>&1
rc=$?
# its TAP lines as this suite's (numbering dropped)
sed -nE '/^(not )?ok [0-9]+ - /{ s/^(not )?ok [0-9]+ - /\1ok - /; s/# SKIP not in MC_GPU_TEST_ONLY$/# SKIP '"$left"'/; p }' "$MC_TMP/train"
closing=$(tail -1 "$MC_TMP/train")
check "gpu-test.sh train on the emulated device ($what): closing line, exit status 0 ($closing, rc=$rc, $(($(date +%s) - start)) s)" \
    bash -c "[ $rc -eq 0 ] && grep -qxE 'gpu-test: [0-9]+ passed, 0 failed, [0-9]+ skipped' <<<'$closing'"
summary=$(cat "$MC_TMP/logs/train.summary" 2>/dev/null)
check "gpu-test.sh train writes its one-line summary with the closing line's counts ($summary)" \
    bash -c "[ \$(wc -l <'$MC_TMP/logs/train.summary') -eq 1 ] &&
             grep -qE '^gpu-test train: ${closing#gpu-test: } \([0-9]+ s\)$' '$MC_TMP/logs/train.summary'"
[ $rc -eq 0 ] || grep -v '^ok\|^not ok' "$MC_TMP/train" | sed 's/^/# /' | head -40
