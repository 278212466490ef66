#!/usr/bin/env bash
# Old Megatron recipes as the binary meets them: flags Megatron removed are taken as today's
# (one warning each, once per job) and train as today's spelling does; the SC21 paper's
# command line passes the parser unchanged; a line with several problems names them all.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

TINY=(--device cpu --mock-data --num-layers 2 --hidden-size 32 --num-attention-heads 4
      --seq-length 32 --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4
      --train-iters 3 --lr 1e-3 --vocab-size 256 --log-interval 1 --eval-iters 0 --seed 7)
numbers() { grep -E 'lm loss' "$1" | sed -E 's/^ \[[^]]*\]//; s/elapsed time per iteration \(ms\): [0-9.]+ \|//'; }
arguments() { sed -n '/-- arguments --/,/-- end of arguments --/p' "$1"; }

# Megatron v2.5's examples/pretrain_gpt.sh spelled full recomputation --checkpoint-activations
# and passed --data-impl mmap; they train as --recompute-granularity full --recompute-method
# uniform --recompute-num-layers 1 (what Megatron mapped it to from c1e0689d92 to 3e71ad9c62).
"$MC_BIN" "${TINY[@]}" --checkpoint-activations --data-impl mmap --DDP-impl local \
    >"$MC_TMP/old" 2>"$MC_TMP/old.err"
rc=$?
check "v2.5 recompute flags train (exit $rc)" test "$rc" -eq 0
check "one warning per old flag" test "$(grep -c '^megatron-c: warning: ' "$MC_TMP/old.err")" -eq 3
check "the warning names today's spelling" grep -q -- '--checkpoint-activations is an old Megatron flag, taken as --recompute-granularity full --recompute-method uniform --recompute-num-layers 1' "$MC_TMP/old.err"
"$MC_BIN" "${TINY[@]}" --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 \
    >"$MC_TMP/new" 2>"$MC_TMP/new.err"
check "old and today's spelling: the same arguments" diff <(arguments "$MC_TMP/old") <(arguments "$MC_TMP/new")
check "the arguments show full recomputation" grep -qE '^  recompute_granularity \.+ full$' "$MC_TMP/old"
check "old and today's spelling give bit-identical losses" diff <(numbers "$MC_TMP/old") <(numbers "$MC_TMP/new")
check "the losses are there" test "$(numbers "$MC_TMP/new" | wc -l)" -eq 3

# examples/sc21 of NVIDIA/Megatron-LM at e70f83123f31cb432fcecb50848126bd245f3005 (removed from
# examples/sc21 by f2e72c8a1612 in 2024): CONFIG.sh's MEGATRON_PARAMS, verbatim, with the
# variables run_table_1.sh sets for MODEL_SIZE=1.7B. SRUN.sh runs pretrain_gpt.py with it on
# NNODES x 8 ranks; the model (tp 1, pp 1) also fits one rank, with a data-parallel size of 1.
# CONFIG.sh leaves the data and tokenizer paths as "<path ...>" for the user: paths that do not
# exist here, so the run stops at the tokenizer, after the whole command line was taken.
sc21_params() {
    MEGATRON_DATA=$MC_TMP/sc21/my-gpt2_text_document
    BPE_VOCAB_FILE=$MC_TMP/sc21/gpt2-vocab.json
    BPE_MERGE_FILE=$MC_TMP/sc21/gpt2-merges.txt
    MEGATRON_PARAMS=" ${MEGATRON_EXTRA_PARAMS} \
	--tensor-model-parallel-size ${TP} \
	--pipeline-model-parallel-size ${PP} \
	--micro-batch-size ${MBS} \
	--global-batch-size ${GBS} \
        --num-layers ${NLS} \
        --hidden-size ${HS} \
        --num-attention-heads ${NAH} \
	--DDP-impl ${DDP} \
	--data-path ${MEGATRON_DATA} \
	--vocab-file ${BPE_VOCAB_FILE} \
	--merge-file ${BPE_MERGE_FILE} \
        --log-interval 5 \
        --seq-length 2048 \
        --max-position-embeddings 2048 \
        --train-iters 500 \
        --lr-decay-iters 320 \
        --lr 0.0001 \
	--min-lr 0.00001 \
        --lr-decay-style cosine \
        --lr-warmup-fraction 0.01 \
        --split 969,30,1 \
        --eval-iters 100 \
        --eval-interval 1000 \
        --clip-grad 1.0 \
        --fp16 \
	--loss-scale 8192 "
}
sc21_taken() { # NAME RC STDERR RANKS: the line was taken whole; it stopped at the tokenizer
    local name=$1 rc=$2 err=$3
    if [ "$rc" -ne 0 ] && [ "$(grep -c '^megatron-c: warning: ' "$err")" -eq 2 ] &&
        grep -q -- '--activations-checkpoint-method uniform is an old Megatron flag' "$err" &&
        grep -q -- '--DDP-impl .* is an old Megatron flag' "$err" &&
        [ "$(grep -c '^megatron-c: .*error: ' "$err")" -eq 1 ] &&
        grep -q "error: cannot open vocab file '$MC_TMP/sc21/gpt2-vocab.json'" "$err"; then
        ok "$name"
    else
        not_ok "$name (rc=$rc, stderr: $(head -c 600 "$err"))"
    fi
}

TP=1 PP=1 MBS=16 GBS=512 NLS=24 HS=2304 NAH=24 DDP=torch
MEGATRON_EXTRA_PARAMS="--activations-checkpoint-method uniform "
sc21_params
# shellcheck disable=SC2086 # SRUN.sh's unquoted ${MEGATRON_PARAMS}
timeout 120 "$MC_BIN" ${MEGATRON_PARAMS} >"$MC_TMP/sc21.out" 2>"$MC_TMP/sc21.err"
sc21_taken "SC21 run_table_1.sh 1.7B: the line is taken unchanged" $? "$MC_TMP/sc21.err"

# run_figure_15.sh (TP=2) on two ranks: rank 0 speaks for the job, so each warning shows once.
if ! have_mpirun; then
    skip "SC21 run_figure_15.sh on two ranks" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
else
    TP=2 PP=1 MBS=1 GBS=32 NLS=32 HS=3840 NAH=32 DDP=local
    sc21_params
    # shellcheck disable=SC2086
    mpirun_mc 2 ${MEGATRON_PARAMS} >"$MC_TMP/sc21mp.out" 2>"$MC_TMP/sc21mp.err"
    sc21_taken "SC21 run_figure_15.sh on two ranks: one warning per flag for the job" $? "$MC_TMP/sc21mp.err"
fi

# Every problem of a line, one line each, exit 2 once, nothing on stdout.
"$MC_BIN" "${TINY[@]}" --frobnicate-level 512 --hiden-size 64 --lr fast --fp32-residual-connection \
    --checkpoint-activations --recompute-method block >"$MC_TMP/p.out" 2>"$MC_TMP/p.err"
rc=$?
check "several problems: exit 2" test "$rc" -eq 2
check "several problems: five error lines, nothing else" test "$(grep -c '^megatron-c: error: ' "$MC_TMP/p.err")" -eq 5 -a "$(wc -l <"$MC_TMP/p.err")" -eq 5
check "several problems: no suggestion for an unrelated flag" grep -qx 'megatron-c: error: unrecognized argument --frobnicate-level (see megatron-c --help)' "$MC_TMP/p.err"
check "several problems: a suggestion for a typo" grep -q 'unrecognized argument --hiden-size (did you mean --hidden-size?)' "$MC_TMP/p.err"
check "several problems: the conflict" grep -q -- '--checkpoint-activations conflicts with --recompute-method block' "$MC_TMP/p.err"
check "several problems: nothing on stdout" test ! -s "$MC_TMP/p.out"

# A Megatron flag megatron-c lacks (MLA's) is refused by name, never "unrecognized".
"$MC_BIN" "${TINY[@]}" --q-lora-rank 512 >"$MC_TMP/q.out" 2>"$MC_TMP/q.err"
check "a flag megatron-c lacks: exit 2" test $? -eq 2
check "a flag megatron-c lacks: refused by name" grep -qx 'megatron-c: error: --q-lora-rank is recognised but not implemented yet in megatron-c (multi-latent attention (MLA); see docs/FLAGS.md)' "$MC_TMP/q.err"
