#!/usr/bin/env bash
# megatron-c convert-checkpoint: resharding a checkpoint to another tensor /
# pipeline / virtual pipeline layout and to or from the distributed optimizer's file, carrying the
# optimizer state, scheduler, iteration and consumed samples. Training from the converted
# checkpoint in the new layout gives the log lines (losses, grad norm, params norm, validation)
# of resuming the original in its own layout, to the layout-equivalence tolerance
# (mpi.sh same_log_numbers):
#  - tp1 x pp1 -> tp2 x pp2 x vpp2 -> tp1 x pp1 (the round trip gives the original's lines
#    exactly), tp2 x pp2 x vpp2 saved by training -> tp1 x pp1, and the identity conversion
#    exactly;
#  - dp2 with the distributed optimizer -> tp2 (dp1) with it, and -> tp1 without it; tp1 without
#    it -> dp2 with it;
#  - the converted tree is published like a save (no temporary names left, tracker last, other
#    iterations kept); wrong input is one line: missing shard, files of two saves, a target the
#    model does not divide, no checkpoint, an unknown flag.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

# test_checkpoint.sh's model: 8 layers, 16 sequences per step, saved at 12 of 24
FLAGS=(--device cpu --mock-data --vocab-size 256 --make-vocab-size-divisible-by 64 --num-layers 8
       --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
       --micro-batch-size 2 --global-batch-size 16 --train-iters 24 --lr 3e-3
       --lr-decay-style cosine --lr-warmup-iters 3 --min-lr 1e-4 --weight-decay 0.1
       --clip-grad 1.0 --log-interval 1 --eval-interval 12 --eval-iters 2 --seed 1234
       --hidden-dropout 0.1 --attention-dropout 0.1 --log-params-norm)
PTD=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2)
DIST=(--use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 2000)

run_np() { # np args...
    local np=$1
    shift
    if [ "$np" -eq 1 ]; then "$MC_BIN" "$@"; else mpirun_mc "$np" "$@"; fi
}
succeeded() { [ "$1" -eq 0 ] && shift && "$@"; } # rc command...
differs() { ! same_log_numbers "$@"; }
# The resumed lines without timestamps and elapsed times: the same text when exact.
# Megatron main logs the first iteration of a run without resetting the interval (training_log's
# should_reset = not is_first_iteration), so a resumed run's second line also counts its first
# iteration: that line is left out.
resumed_lines() {
    sed -nE '/iteration +(13|1[5-9]|2[0-4])\/ +24 \|/{s/^ \[[^]]*\]//; s/ elapsed time per iteration \(ms\): [0-9.]+ \|//; p}
             /validation loss at iteration 24 |on validation set|on test set/p' "$1"
}
# the lm loss within its float32 rounding, which another data-parallel size changes (lib.sh)
same_lines() {
    resumed_lines "$1" >"$MC_TMP/same.a"
    resumed_lines "$2" >"$MC_TMP/same.b"
    same_lines_float32_loss "$MC_TMP/same.a" "$MC_TMP/same.b" &&
        [ "$(grep -c '^ iteration ' "$MC_TMP/same.a")" -eq 11 ]
}

convert() { # name args...: megatron-c convert-checkpoint, one TAP line on failure
    local name=$1
    shift
    "$MC_BIN" convert-checkpoint "$@" >"$MC_TMP/$name.conv" 2>&1
    local rc=$?
    [ $rc -eq 0 ] || not_ok "$name: convert-checkpoint exits 0 (rc=$rc: $(tail -c 400 "$MC_TMP/$name.conv"))"
    return $rc
}
# resumed NAME NP DIR FLAGS...: training from DIR at iteration 12 to 24
resumed() {
    local name=$1 np=$2 dir=$3
    shift 3
    run_np "$np" "${FLAGS[@]}" "$@" --load "$dir" >"$MC_TMP/$name.run" 2>"$MC_TMP/$name.err"
    local rc=$?
    [ $rc -eq 0 ] || not_ok "$name: training from the converted checkpoint exits 0 (rc=$rc: $(tail -c 400 "$MC_TMP/$name.err"))"
    return $rc
}

# ---- the originals: saved at 12, and resumed in their own layout ----
S=$MC_TMP/single
"$MC_BIN" "${FLAGS[@]}" --save "$S" --save-interval 12 --exit-interval 12 >"$MC_TMP/single.full" 2>&1 ||
    not_ok "training tp1 with --save exits 0"
resumed orig 1 "$S" || exit 0

# identity: the same layout, the same lines exactly
if convert identity --load-dir "$S" --save-dir "$MC_TMP/identity" && resumed identity 1 "$MC_TMP/identity"; then
    check "the identity conversion resumes with the original's lines exactly" same_lines "$MC_TMP/orig.run" "$MC_TMP/identity.run"
    check "the converted tree is published like a save: tracker, iter_0000012, no temporary names" \
        bash -c "[ \"\$(cat '$MC_TMP/identity/latest_checkpointed_iteration.txt')\" = 12 ] &&
            [ -f '$MC_TMP/identity/iter_0000012/mp_rank_00/model_optim_rng.pt' ] && ! compgen -G '$MC_TMP/identity/*.tmp-*' >/dev/null"
fi

if ! have_mpirun; then
    skip "conversions to and from several ranks" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
    exit 0
fi

# tp1 x pp1 -> tp2 x pp2 x vpp2
P=$MC_TMP/ptd
if convert ptd --load-dir "$S" --save-dir "$P" --target-tensor-parallel-size 2 \
    --target-pipeline-parallel-size 2 --target-num-virtual-stages-per-pipeline-rank 2 &&
    resumed ptd 4 "$P" "${PTD[@]}"; then
    check "tp1 -> tp2 x pp2 x vpp2: mp_rank_TT_PPP files" \
        test "$(ls "$P/iter_0000012" | tr '\n' ' ')" = "mp_rank_00_000 mp_rank_00_001 mp_rank_01_000 mp_rank_01_001 "
    check "tp1 -> tp2 x pp2 x vpp2: training continues with the original's losses, grad and params norms" \
        same_log_numbers "$MC_TMP/orig.run" "$MC_TMP/ptd.run" 12
fi
# ... and back: the round trip is exact
if convert back --load-dir "$P" --save-dir "$MC_TMP/back" --target-tensor-parallel-size 1 \
    --target-pipeline-parallel-size 1 && resumed back 1 "$MC_TMP/back"; then
    check "tp2 x pp2 x vpp2 -> tp1 x pp1: training continues with the original's lines exactly" \
        same_lines "$MC_TMP/orig.run" "$MC_TMP/back.run"
fi
# a tp2 x pp2 x vpp2 checkpoint saved by training -> tp1 x pp1
T=$MC_TMP/ptd-trained
mpirun_mc 4 "${FLAGS[@]}" "${PTD[@]}" --save "$T" --save-interval 12 --exit-interval 12 >"$MC_TMP/ptd-trained.full" 2>&1 ||
    not_ok "training tp2 x pp2 x vpp2 with --save exits 0"
if resumed ptd.orig 4 "$T" "${PTD[@]}" && convert ptd-tp1 --load-dir "$T" --save-dir "$MC_TMP/ptd-tp1" \
    --target-tensor-parallel-size 1 --target-pipeline-parallel-size 1 && resumed ptd-tp1 1 "$MC_TMP/ptd-tp1"; then
    check "tp2 x pp2 x vpp2 (saved by training) -> tp1 x pp1: training continues with the numbers of resuming it at tp2 x pp2 x vpp2" \
        same_log_numbers "$MC_TMP/ptd.orig.run" "$MC_TMP/ptd-tp1.run" 12
fi
# the comparison can fail: the converted checkpoint without its optimizer state
resumed noopt 4 "$P" "${PTD[@]}" --no-load-optim &&
    check "without the optimizer state the converted run differs (the comparison can fail)" \
        differs "$MC_TMP/orig.run" "$MC_TMP/noopt.run" 12

# ---- the distributed optimizer ----
D=$MC_TMP/dist
mpirun_mc 2 "${FLAGS[@]}" "${DIST[@]}" --save "$D" --save-interval 12 --exit-interval 12 >"$MC_TMP/dist.full" 2>&1 ||
    not_ok "training dp2 with the distributed optimizer and --save exits 0"
resumed dist.orig 2 "$D" "${DIST[@]}"
if convert dist-tp2 --load-dir "$D" --save-dir "$MC_TMP/dist-tp2" --target-tensor-parallel-size 2 \
    --target-data-parallel-size 1 && resumed dist-tp2 2 "$MC_TMP/dist-tp2" --tensor-model-parallel-size 2 "${DIST[@]}"; then
    check "dp2 distributed optimizer -> tp2 x dp1 with it: distrib_optim.pt per rank" \
        bash -c "[ -f '$MC_TMP/dist-tp2/iter_0000012/mp_rank_01/distrib_optim.pt' ]"
    check "dp2 distributed optimizer -> tp2 x dp1: training continues with the original's numbers" \
        same_log_numbers "$MC_TMP/dist.orig.run" "$MC_TMP/dist-tp2.run" 12
fi
if convert dist-none --load-dir "$D" --save-dir "$MC_TMP/dist-none" --target-no-use-distributed-optimizer &&
    resumed dist-none 1 "$MC_TMP/dist-none"; then
    check "dp2 distributed optimizer -> dp1 without it: no distrib_optim.pt, same numbers" \
        succeeded "$(ls "$MC_TMP/dist-none/iter_0000012/mp_rank_00" | grep -c distrib)" \
        same_log_numbers "$MC_TMP/dist.orig.run" "$MC_TMP/dist-none.run" 12
fi
if convert to-dist --load-dir "$S" --save-dir "$MC_TMP/to-dist" --target-use-distributed-optimizer \
    --target-data-parallel-size 2 --target-overlap-grad-reduce --target-ddp-bucket-size 2000 &&
    resumed to-dist 2 "$MC_TMP/to-dist" "${DIST[@]}"; then
    check "tp1 without it -> dp2 with the distributed optimizer: training continues with the original's numbers" \
        same_log_numbers "$MC_TMP/orig.run" "$MC_TMP/to-dist.run" 12
fi

# ---- a vocabulary padded for the target's tp: 300 tokens are 320 rows at tp 1, 384 at tp 2 ----
V=(--device cpu --mock-data --vocab-size 300 --make-vocab-size-divisible-by 64 --num-layers 2 --hidden-size 32
   --num-attention-heads 4 --seq-length 16 --max-position-embeddings 16 --micro-batch-size 2
   --global-batch-size 4 --train-iters 4 --lr 1e-3 --log-interval 1 --eval-iters 0)
"$MC_BIN" "${V[@]}" --save "$MC_TMP/v300" --save-interval 2 --exit-interval 2 >"$MC_TMP/v300.full" 2>&1
if convert v300 --load-dir "$MC_TMP/v300" --save-dir "$MC_TMP/v384" --target-tensor-parallel-size 2; then
    mpirun_mc 2 "${V[@]}" --tensor-model-parallel-size 2 --load "$MC_TMP/v384" >"$MC_TMP/v384.run" 2>&1
    rc=$?
    check "tp1 -> tp2 re-pads the vocabulary (320 -> 384 rows) and trains from it (rc=$rc)" \
        succeeded $rc grep -q 'iteration *4/ *4 |' "$MC_TMP/v384.run"
fi

# ---- the tree is written like a save; other iterations stay ----
convert again --load-dir "$D" --save-dir "$MC_TMP/dist-tp2" --ckpt-step 12 --target-tensor-parallel-size 2 \
    --target-data-parallel-size 1 --target-no-use-distributed-optimizer
check "converting into a directory that has the iteration replaces it atomically (no temporary names left)" \
    bash -c "[ ! -f '$MC_TMP/dist-tp2/iter_0000012/mp_rank_01/distrib_optim.pt' ] &&
        [ -f '$MC_TMP/dist-tp2/iter_0000012/mp_rank_01/model_optim_rng.pt' ] && ! compgen -G '$MC_TMP/dist-tp2/*.tmp-*' >/dev/null"

# ---- wrong input: one line ----
convert_error() { # name pattern args...
    local name=$1 pattern=$2
    shift 2
    "$MC_BIN" convert-checkpoint "$@" >"$MC_TMP/err.out" 2>"$MC_TMP/err.err"
    local rc=$?
    [ "$(wc -l <"$MC_TMP/err.err")" -eq 1 ] || rc=0 # nothing but the error line
    compgen -G "$MC_TMP/out-bad/*.tmp-*" >/dev/null && rc=0 # and no unfinished tree left
    one_error_line "$name" "$pattern" $rc "$MC_TMP/err.err"
}
cp -r "$P" "$MC_TMP/missing" && rm -rf "$MC_TMP/missing/iter_0000012/mp_rank_01_001"
convert_error "a missing shard: one line naming it" \
    "mp_rank_01_001/model_optim_rng.pt: missing shard file \(the checkpoint's args say tensor_model_parallel_size 2 x pipeline_model_parallel_size 2" \
    --load-dir "$MC_TMP/missing" --save-dir "$MC_TMP/out-bad"
cp -r "$P" "$MC_TMP/mixed" && cp "$MC_TMP/back/iter_0000012/mp_rank_00/model_optim_rng.pt" "$MC_TMP/mixed/iter_0000012/mp_rank_01_001/"
convert_error "a shard of another layout: one line naming it" \
    "mp_rank_01_001/model_optim_rng.pt: saved with tensor_model_parallel_size 1 but this run has 2" \
    --load-dir "$MC_TMP/mixed" --save-dir "$MC_TMP/out-bad"
convert_error "a target tp that does not divide the heads: one line" \
    "4 attention heads are not divisible by --target-tensor-parallel-size 3" \
    --load-dir "$S" --save-dir "$MC_TMP/out-bad" --target-tensor-parallel-size 3
convert_error "a target pp that does not divide the layers: one line" \
    "(Number of layers should be divisible|number of layers).*8 layers over the target's 3 pipeline stages" \
    --load-dir "$S" --save-dir "$MC_TMP/out-bad" --target-pipeline-parallel-size 3
convert_error "virtual stages without pipeline stages: one line" "virtual pipeline stages need --target-pipeline-parallel-size > 1" \
    --load-dir "$S" --save-dir "$MC_TMP/out-bad" --target-num-virtual-stages-per-pipeline-rank 2
convert_error "no checkpoint: one line naming the tracker" "nowhere/latest_checkpointed_iteration.txt: missing" \
    --load-dir "$MC_TMP/nowhere" --save-dir "$MC_TMP/out-bad"
convert_error "an iteration that is not there: one line" "iter_0000013: no mp_rank_00 or mp_rank_00_000 shard \(it holds iter_0000012" \
    --load-dir "$S" --save-dir "$MC_TMP/out-bad" --ckpt-step 13
convert_error "an unknown flag: one line with a suggestion" "unrecognized argument --target-tensor-parallel \\(did you mean --target-tensor-parallel-size" \
    --load-dir "$S" --save-dir "$MC_TMP/out-bad" --target-tensor-parallel 2
convert_error "--load-dir and --save-dir are required" "the following arguments are required: --load-dir, --save-dir"
# the source's own directory (also through a symbolic link) and a directory holding a later
# checkpoint are refused unless --overwrite: the first would replace the source, the second
# would rewind the later checkpoint's tracker
convert_error "--save-dir equal to --load-dir is refused" \
    "--save-dir .* is the directory of --load-dir .*\\(give another --save-dir, or --overwrite" \
    --load-dir "$S" --save-dir "$S"
ln -s "$S" "$MC_TMP/single-link"
convert_error "--save-dir naming --load-dir through a symbolic link is refused" \
    "--save-dir .*single-link is the directory of --load-dir" --load-dir "$S" --save-dir "$MC_TMP/single-link"
check "the refused conversions leave the source as it was" \
    bash -c "[ \"\$(cat '$S/latest_checkpointed_iteration.txt')\" = 12 ] && ! compgen -G '$S/*.tmp-*' >/dev/null"
mkdir -p "$MC_TMP/later"
echo 20 >"$MC_TMP/later/latest_checkpointed_iteration.txt"
convert_error "a --save-dir holding a later checkpoint is refused" \
    "--save-dir .*later holds a later checkpoint \\(its tracker says iteration 20\\): converting iteration 12 there would rewind it \\(give another --save-dir, or --overwrite" \
    --load-dir "$S" --save-dir "$MC_TMP/later"
check "the refused conversion leaves the later tracker alone" \
    bash -c "[ \"\$(cat '$MC_TMP/later/latest_checkpointed_iteration.txt')\" = 20 ]"
convert later-overwrite --load-dir "$S" --save-dir "$MC_TMP/later" --overwrite &&
    check "--overwrite writes over a later checkpoint (its tracker then names the converted iteration)" \
        bash -c "[ \"\$(cat '$MC_TMP/later/latest_checkpointed_iteration.txt')\" = 12 ] && [ -d '$MC_TMP/later/iter_0000012' ]"
"$MC_BIN" convert-checkpoint --help >"$MC_TMP/help" 2>&1
check "convert-checkpoint --help lists Megatron's converter flags" \
    bash -c "grep -q -- '--target-tensor-parallel-size' '$MC_TMP/help' && grep -q -- '--load-dir' '$MC_TMP/help'"
exit 0
