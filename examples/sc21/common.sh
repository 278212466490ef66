# The part every examples/sc21/*.sbatch shares (sourced, not run): the flags the paper's runs have
# in common, and the modes each script offers. A script defines
#   points           its points' names, one per line
#   point_args NAME  the point's world size, then its megatron-c arguments, one per line
#                    (exit 2 naming the points when NAME is not one)
# and ends with `sc21_main SCRIPT VAR "$@"`, VAR naming the environment variable that picks the
# point of a Slurm job (MODEL_SIZE for table1, POINT for the figures).
#
# Paths come from the environment: DATA_PATH (a Megatron .bin/.idx prefix), VOCAB_FILE and
# MERGE_FILE (GPT-2 BPE), SAVE_DIR (empty: no checkpoints), MEGATRON_C (the binary).

# The flags of every run: GPT-2's 2048-token sequences and BPE tokenizer, fp16 as on the paper's
# A100s, a short cosine schedule (the runs measure throughput, not convergence).
sc21_common_args() {
    printf '%s\n' --seq-length 2048 --max-position-embeddings 2048 --fp16 --train-iters 100 \
        --lr 6e-5 --min-lr 6e-6 --lr-decay-style cosine --lr-warmup-iters 10 --weight-decay 0.1 \
        --clip-grad 1.0 --init-method-std 0.006 --log-interval 5 --eval-interval 1000 \
        --eval-iters 10 --tokenizer-type GPT2BPETokenizer \
        --vocab-file "${VOCAB_FILE:-gpt2-vocab.json}" \
        --merge-file "${MERGE_FILE:-gpt2-merges.txt}" \
        --data-path "${DATA_PATH:-my-gpt2_text_document}" --split 949,50,1
    if [ -n "${SAVE_DIR:-}" ]; then printf '%s\n' --save "$SAVE_DIR" --save-interval 1000; fi
    return 0
}

# sc21_model T P MICRO GLOBAL LAYERS HIDDEN HEADS: the layout, batch and model of a run.
sc21_model() {
    printf '%s\n' --tensor-model-parallel-size "$1" --pipeline-model-parallel-size "$2" \
        --micro-batch-size "$3" --global-batch-size "$4" --num-layers "$5" --hidden-size "$6" \
        --num-attention-heads "$7"
}

# The paper's activation recomputation (its scripts' --activations-checkpoint-method uniform):
# every layer's input kept, the layer recomputed in the backward pass.
sc21_recompute() {
    printf '%s\n' --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
}

# sc21_unknown SCRIPT WHAT NAME: the one line for a point that is not one of the script's.
sc21_unknown() {
    echo "$1: no $2 '$3' ($2s: $(points | paste -sd ' '))" >&2
    return 2
}

# sc21_point SCRIPT NAME: exit status 0 when NAME is one of the script's points, else sc21_unknown.
sc21_point() { # (not grep -q: it stops reading, and points' SIGPIPE would fail the pipe)
    points | grep -xF -- "$2" >/dev/null || sc21_unknown "$1" point "$2"
}

# sc21_plan NAME PLAN-OPTIONS...: megatron-c plan of the point at its world size, 8 GPUs a node
# (with --check: only the dry run, exit 0 when the job would start, 2 with every problem).
sc21_plan() {
    local out
    mapfile -t out < <(point_args "$1")
    [ "${#out[@]}" -gt 0 ] || return 2
    "${MEGATRON_C:-megatron-c}" plan --num-gpus "${out[0]}" --gpus-per-node 8 "${@:2}" "${out[@]:1}"
}

# sc21_run SCRIPT NAME: the point as this Slurm job (its tasks must be the point's world size).
sc21_run() {
    local out
    mapfile -t out < <(point_args "$2")
    [ "${#out[@]}" -gt 0 ] || exit 2
    if [ -n "${SLURM_NTASKS:-}" ] && [ "$SLURM_NTASKS" -ne "${out[0]}" ]; then
        echo "$1: $2 runs on ${out[0]} GPUs, 8 a node (sbatch --nodes=$((out[0] / 8)));" \
            "this job has $SLURM_NTASKS tasks" >&2
        exit 2
    fi
    exec srun --mpi=pmix "${MEGATRON_C:-megatron-c}" "${out[@]:1}"
}

# sc21_main SCRIPT VAR ARGS...: --points, --print NAME, --check NAME, --plan NAME [OPTIONS], or
# the point $VAR as a job.
sc21_main() {
    local script=$1 var=$2
    shift 2
    case "${1:-}" in
    --points)
        [ $# -eq 1 ] || { echo "$script: --points takes nothing; '$2' is extra" >&2; exit 2; }
        points
        exit 0
        ;;
    --print | --check | --plan)
        [ -n "${2:-}" ] || { echo "$script: $1 needs a point (--points lists them)" >&2; exit 2; }
        if [ "$1" != --plan ] && [ $# -gt 2 ]; then
            echo "$script: $1 takes one point; '$3' is extra (plan's options go with --plan)" >&2
            exit 2
        fi
        case $1 in
        --print) point_args "$2" ;;
        --check) sc21_plan "$2" --check ;;
        --plan) sc21_plan "$2" "${@:3}" ;;
        esac
        exit $?
        ;;
    ?*)
        echo "$script: unknown argument '$1' (--points, --print POINT, --check POINT," \
            "--plan POINT [PLAN-OPTIONS], or none with $var set)" >&2
        exit 2
        ;;
    esac
    if [ -z "${!var:-}" ]; then
        echo "$script: set $var to one of: $(points | paste -sd ' ')" >&2
        exit 2
    fi
    sc21_run "$script" "${!var}"
}
