#!/usr/bin/env bash
# Host accesses to device memory, without a GPU: the strict backend (kernels/strict.c,
# MC_TEST_STRICT_DEVICE=1) runs the CPU's arithmetic on memory the host cannot touch, so any
# model, optimizer, checkpoint or comm code that reads or writes a tensor directly instead of
# through the op table crashes, and every "host memory?" branch takes its device path (the comm
# layer stages buffers as for CUDA). Each layout's numbers must equal the plain CPU run's
# exactly: single rank in fp32 (dropout, evaluation), bf16, fp16 with the dynamic loss scaler,
# full and selective recomputation, an indexed dataset with document masks; under mpirun tp 2 with sequence parallelism, pp 2 with
# virtual stages, dp 2 with the distributed optimizer and both overlaps; a checkpoint saved at
# iteration 6 (then an asynchronous one) and resumed gives the uninterrupted numbers.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

FLAGS=(--device cpu --mock-data --vocab-size 256 --num-layers 4 --hidden-size 64 --num-attention-heads 4
       --seq-length 32 --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8
       --train-iters 12 --lr 3e-3 --log-interval 1 --eval-interval 6 --eval-iters 2 --seed 1234
       --log-params-norm --hidden-dropout 0.1 --attention-dropout 0.1)

numbers() { grep -oE 'iteration +[0-9]+/.*|validation loss at iteration.*' "$1" | sed -E 's/elapsed time per iteration \(ms\): [0-9.]+ \|//'; }

pair() { # name np args...: the plain and the strict run give the same numbers
    local name=$1 np=$2
    shift 2
    local run=("$MC_BIN")
    [ "$np" -gt 1 ] && run=("${MPIRUN[@]}" -np "$np" -x MC_TEST_STRICT_DEVICE "$MC_BIN")
    "${run[@]}" "${FLAGS[@]}" "$@" >"$MC_TMP/cpu-$name" 2>"$MC_TMP/cpu-$name.err"
    local rc1=$?
    MC_TEST_STRICT_DEVICE=1 "${run[@]}" "${FLAGS[@]}" "$@" >"$MC_TMP/strict-$name" 2>"$MC_TMP/strict-$name.err"
    local rc2=$?
    numbers "$MC_TMP/cpu-$name" >"$MC_TMP/cpu-$name.n"
    numbers "$MC_TMP/strict-$name" >"$MC_TMP/strict-$name.n"
    check "$name: the plain and the strict device run (rc $rc1/$rc2: $(tail -c 300 "$MC_TMP/strict-$name.err"))" \
        bash -c "[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && grep -q '^> device: cpu' '$MC_TMP/cpu-$name' &&
                 grep -q '^> device: strict' '$MC_TMP/strict-$name'"
    check "$name: the strict device gives the CPU's numbers exactly" \
        bash -c "[ \$(wc -l <'$MC_TMP/cpu-$name.n') -ge 14 ] && cmp -s '$MC_TMP/cpu-$name.n' '$MC_TMP/strict-$name.n'"
}

pair "fp32" 1
pair "bf16" 1 --bf16
pair "fp16 (dynamic loss scale)" 1 --fp16
pair "full recomputation" 1 --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
pair "bf16, selective recomputation" 1 --bf16 --recompute-granularity selective
SHARED=${MEGATRON_C_SHARED:-../shared}
DATA=$SHARED/data/megatron-ref/tinyshakespeare_text_document
if [ -f "$DATA.idx" ]; then # a Megatron dataset's tokens, document masks and positions go to the device
    MOCK=("${FLAGS[@]}")
    FLAGS=()
    for ((i = 0; i < ${#MOCK[@]}; i++)); do # the same flags without the mock data and its vocabulary
        case ${MOCK[$i]} in --mock-data) ;; --vocab-size) i=$((i + 1)) ;; *) FLAGS+=("${MOCK[$i]}") ;; esac
    done
    pair "indexed data, reset attention mask and position ids, EOD loss mask" 1 --data-path "$DATA" \
        --vocab-file "$SHARED/data/gpt2/gpt2-vocab.json" --merge-file "$SHARED/data/gpt2/gpt2-merges.txt" \
        --data-cache-path "$MC_TMP/cache" --split 90,8,2 --reset-attention-mask --reset-position-ids --eod-mask-loss \
        --log-num-zeros-in-grad
    FLAGS=("${MOCK[@]}")
else
    skip "indexed data on the strict device" "no $DATA.idx (set MEGATRON_C_SHARED)"
fi
if have_mpirun; then
    pair "tp 2, sequence parallel" 2 --tensor-model-parallel-size 2 --sequence-parallel
    pair "pp 2, vpp 2" 2 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1
    pair "dp 2, distributed optimizer, overlaps, bf16" 2 --bf16 --use-distributed-optimizer --overlap-grad-reduce \
        --overlap-param-gather
else
    skip "multi-rank layouts on the strict device" "mpirun is not installed"
fi

# checkpoints through the device path (ckpt reads tensors with memcpy_d2h, async snapshots too)
export MC_TEST_STRICT_DEVICE=1
"$MC_BIN" "${FLAGS[@]}" --bf16 >"$MC_TMP/full" 2>&1
"$MC_BIN" "${FLAGS[@]}" --bf16 --exit-interval 6 --save "$MC_TMP/ck" --save-interval 6 >"$MC_TMP/first" 2>&1
rc1=$?
"$MC_BIN" "${FLAGS[@]}" --bf16 --load "$MC_TMP/ck" --save "$MC_TMP/ck2" --save-interval 12 --async-save \
    >"$MC_TMP/resumed" 2>"$MC_TMP/resumed.err"
rc2=$?
unset MC_TEST_STRICT_DEVICE
# (iteration 8 left out: Megatron main's line after the first iteration of a run counts both)
check "strict device: save at 6, resume (async save at 12) gives the uninterrupted numbers (rc $rc1/$rc2)" \
    bash -c "[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ -f '$MC_TMP/ck2/iter_0000012/mp_rank_00/model_optim_rng.pt' ] &&
             diff <(grep -oE 'iteration +(7|9|1[0-2])/.*' '$MC_TMP/full' | sed -E 's/elapsed[^|]*\|//') \
                  <(grep -oE 'iteration +(7|9|1[0-2])/.*' '$MC_TMP/resumed' | sed -E 's/elapsed[^|]*\|//') >/dev/null &&
             [ \$(grep -cE 'iteration +(7|9|1[0-2])/' '$MC_TMP/resumed') -eq 5 ]"
