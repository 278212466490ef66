#!/usr/bin/env bash
# The behaviour matrix of a refactor (behaviour unchanged, and shown to be): a fixed set of runs
# whose log lines (iteration and validation lines, times stripped) and checkpoint bytes (sha256 of
# every file) must not change across a change that claims not to change behaviour.
#
#   scripts/behaviour-matrix.sh record DIR    run the matrix, write DIR/<run>.lines and .sha256
#   scripts/behaviour-matrix.sh compare DIR   run it again, compare with DIR bit for bit
#
# MC_BIN (default build/rel/megatron-c) and MC_EMU_BIN (default build/emu/megatron-c) name the
# binaries; runs needing a missing one are left out and said so. About a minute on 2 cores.
# The baseline at 42e5a49 (before the house issue) is test/fixtures/behaviour/, re-recorded for
# issue 29's intended changes: every checkpoint's args hold attention_backend (Megatron's
# AttnBackend member); the emulated bf16 runs take cuDNN's fused attention (the default) and the
# GPT one its bias gradients from cuBLASLt's BGRADB. Without those three (the args entry left out,
# --attention-backend local, BGRADB off) every line and byte is the 42e5a49 baseline's.
# Re-recorded twice since, each time with every training number the same: after context
# parallelism (the args gain cp_comm_type and hierarchical_context_parallel_sizes), and after
# issue 33's log line (lm loss and validation values printed from Megatron's float32 values: a
# last digit moves on some lines; the args gain account_for_embedding/loss_in_pipeline_split).
# Again after MoE checkpoints (issue 31): untied torch_dist files no longer hold
# output_layer._extra_state, as Megatron's GPTModel.sharded_state_dict drops it (four .sha256
# files: llama1, llama-par, llama-par-bf16, resume-dist-b; every .lines file the same).
# Again after issue 33's flags (the args gain use_gloo_process_groups, the distributed optimizer
# instances, grad_reduce_in_bf16, the deferred wgrad and overlap flags: eleven .sha256 files, only
# common.pt and model_optim_rng.pt; every .lines file the same).
# Again after issue 33's rerun state machine (the args gain rerun_mode, the error injection and
# check_for_spiky_loss: eleven .sha256 files, only common.pt and model_optim_rng.pt; every .lines
# file the same).
# Again after issue 34's --tp-comm-overlap and issue 33's MuP (the args gain tp_comm_overlap and
# its four switches, use_mup and the six mup_* fields: eleven .sha256 files, only common.pt and
# model_optim_rng.pt; every .lines file the same).
# Again after issue 33's FIM and Muon and issue 34's --tp-comm-overlap-cfg (the args gain the
# eleven fim_* fields, num_workers, the muon_* fields and tp_comm_overlap_cfg: eleven .sha256
# files, only common.pt and model_optim_rng.pt; every .lines file the same).
set -u
cd "$(dirname "$0")/.."
mode=${1:-} dir=${2:-}
case $mode in record | compare) ;; *) echo "usage: $0 record|compare DIR" >&2; exit 2 ;; esac
[ -n "$dir" ] || { echo "usage: $0 record|compare DIR" >&2; exit 2; }
: "${MC_BIN:=build/rel/megatron-c}"
: "${MC_EMU_BIN:=build/emu/megatron-c}"
export OPENBLAS_NUM_THREADS=1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN=(timeout 600 mpirun --allow-run-as-root --oversubscribe)
# A fixed work directory: checkpoints record the --save path in their args. One run at a time
# on this machine (several checkouts may share it): the lock waits for the other.
W=/tmp/mc-behaviour
exec 9>/tmp/mc-behaviour.lock
flock 9
rm -rf "$W" && mkdir -p "$W"
out=$W/out
mkdir -p "$out"

GPT=(--mock-data --vocab-size 256 --make-vocab-size-divisible-by 64 --num-layers 4 --hidden-size 32
     --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 2
     --global-batch-size 8 --train-iters 12 --lr 3e-3 --lr-decay-style cosine --lr-warmup-iters 3
     --min-lr 1e-4 --weight-decay 0.1 --clip-grad 1.0 --log-interval 1 --eval-interval 6
     --eval-iters 2 --seed 1234 --hidden-dropout 0.1 --attention-dropout 0.1 --log-params-norm)
LLAMA=("${GPT[@]}" --group-query-attention --num-query-groups 2 --swiglu --position-embedding-type rope
       --normalization RMSNorm --untie-embeddings-and-output-weights --disable-bias-linear)
PAR=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel
     --use-distributed-optimizer --overlap-grad-reduce --num-layers-per-virtual-pipeline-stage 1)

# run NAME NP BIN ARGS...: one run's lines and its checkpoint's bytes (when it saves to $W/NAME)
run() {
    local name=$1 np=$2 bin=$3
    shift 3
    if [ "$np" -eq 1 ]; then
        timeout 600 "$bin" "$@" >"$W/$name.log" 2>&1
    else
        "${MPIRUN[@]}" -np "$np" "$bin" "$@" >"$W/$name.log" 2>&1
    fi
    local rc=$?
    { echo "exit $rc"
      grep -E 'iteration +[0-9]+/|validation loss|number of parameters|^    [a-z].*MiB$' "$W/$name.log" |
          sed -E 's/^ \[[^]]*\]//; s/elapsed time per iteration \(ms\): [0-9.]+ \|//'
    } >"$out/$name.lines"
    if [ -d "$W/$name" ]; then
        # torch_dist's .metadata carries a fresh uuid4 (StorageMeta.save_id): hashed with it blanked
        (cd "$W/$name" && find . -type f | LC_ALL=C sort | python3 -c '
import hashlib, re, sys
for f in sys.stdin.read().split():
    b = open(f, "rb").read()
    if f.endswith("/.metadata"):
        b = re.sub(rb"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", b"-" * 36, b)
    print(hashlib.sha256(b).hexdigest(), f)') >"$out/$name.sha256"
    fi
    echo "$name: exit $rc, $(grep -c 'iteration ' "$out/$name.lines") iteration lines"
}

C=(--device cpu)
run gpt1 1 "$MC_BIN" "${C[@]}" "${GPT[@]}" --save "$W/gpt1" --save-interval 12
run gpt-par 4 "$MC_BIN" "${C[@]}" "${GPT[@]}" "${PAR[@]}" --save "$W/gpt-par" --save-interval 12
run llama1 1 "$MC_BIN" "${C[@]}" "${LLAMA[@]}" --ckpt-format torch_dist --save "$W/llama1" --save-interval 12
run llama-par 4 "$MC_BIN" "${C[@]}" "${LLAMA[@]}" "${PAR[@]}" --ckpt-format torch_dist --save "$W/llama-par" \
    --save-interval 12
run gpt1-bf16 1 "$MC_BIN" "${C[@]}" "${GPT[@]}" --bf16 --save "$W/gpt1-bf16" --save-interval 12
run llama-par-bf16 4 "$MC_BIN" "${C[@]}" "${LLAMA[@]}" "${PAR[@]}" --bf16 --ckpt-format torch_dist \
    --save "$W/llama-par-bf16" --save-interval 12
# resumed: saved at 6 by a run of 12, then iterations 7..12 from the checkpoint
run resume-a 1 "$MC_BIN" "${C[@]}" "${GPT[@]}" --save "$W/resume" --save-interval 6 --exit-interval 6
run resume-b 1 "$MC_BIN" "${C[@]}" "${GPT[@]}" --load "$W/resume" --save "$W/resume-b" --save-interval 12
run resume-dist-a 4 "$MC_BIN" "${C[@]}" "${LLAMA[@]}" "${PAR[@]}" --ckpt-format torch_dist \
    --save "$W/resume-dist" --save-interval 6 --exit-interval 6
run resume-dist-b 4 "$MC_BIN" "${C[@]}" "${LLAMA[@]}" "${PAR[@]}" --ckpt-format torch_dist \
    --load "$W/resume-dist" --save "$W/resume-dist-b" --save-interval 12
if [ -x "$MC_EMU_BIN" ]; then
    E=(--device cuda)
    run emu-gpt-bf16 1 "$MC_EMU_BIN" "${E[@]}" "${GPT[@]}" --bf16 --train-iters 6 --save "$W/emu-gpt-bf16" \
        --save-interval 6
    run emu-llama 1 "$MC_EMU_BIN" "${E[@]}" "${LLAMA[@]}" --train-iters 6 --save "$W/emu-llama" --save-interval 6
    run emu-llama-par-bf16 4 "$MC_EMU_BIN" "${E[@]}" "${LLAMA[@]}" "${PAR[@]}" --bf16 --train-iters 6 \
        --distributed-backend mpi --save "$W/emu-llama-par-bf16" --save-interval 6
else
    echo "no emulated-device binary at $MC_EMU_BIN: the emulated runs are left out"
fi

if [ "$mode" = record ]; then
    mkdir -p "$dir" && cp "$out"/* "$dir"/
    echo "recorded $(ls "$out" | wc -l) files in $dir"
    exit 0
fi
bad=0
for f in "$dir"/*; do
    n=$(basename "$f")
    if [ ! -f "$out/$n" ]; then echo "MISSING $n"; bad=1
    elif ! cmp -s "$f" "$out/$n"; then echo "DIFFERS $n"; diff "$f" "$out/$n" | head -6; bad=1
    else echo "same $n"; fi
done
[ $bad -eq 0 ] && echo "behaviour matrix: every line and byte the same" || echo "behaviour matrix: differences above"
exit $bad
