#!/usr/bin/env bash
# megatron-c convert-checkpoint and torch_dist: converting legacy <->
# torch_dist at another layout carries the optimizer state, scheduler, iteration and consumed
# samples, so training continues with the numbers of resuming the source in its own layout
# (mpi.sh same_log_numbers):
#  (a) legacy tp2 x pp2 with the distributed optimizer -> torch_dist tp1 (dp_reshardable);
#  (b) torch_dist saved by training (tp1) -> legacy tp2 x pp2, and by default -> torch_dist;
#  (c) Megatron-LM's own torch_dist tp1 x pp2 -> legacy tp1 x pp1: it trains with the numbers of
#      loading Megatron's checkpoint directly;
#  (d) a damaged source .metadata: one error line naming the file, exit 2, nothing published.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

# test_ckpt_convert.sh's model: 8 layers, 16 sequences per step, saved at 12 of 24
FLAGS=(--device cpu --mock-data --vocab-size 256 --make-vocab-size-divisible-by 64 --num-layers 8
       --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
       --micro-batch-size 2 --global-batch-size 16 --train-iters 24 --lr 3e-3
       --lr-decay-style cosine --lr-warmup-iters 3 --min-lr 1e-4 --weight-decay 0.1
       --clip-grad 1.0 --log-interval 1 --eval-interval 12 --eval-iters 2 --seed 1234
       --hidden-dropout 0.1 --attention-dropout 0.1 --log-params-norm)
TP2PP2=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2)
DIST=(--use-distributed-optimizer --ddp-bucket-size 2000)

run_np() { # np args...
    local np=$1
    shift
    if [ "$np" -eq 1 ]; then "$MC_BIN" "$@"; else mpirun_mc "$np" "$@"; fi
}
convert() { # name args...: megatron-c convert-checkpoint, one TAP line on failure
    local name=$1
    shift
    "$MC_BIN" convert-checkpoint "$@" >"$MC_TMP/$name.conv" 2>&1
    local rc=$?
    [ $rc -eq 0 ] || not_ok "$name: convert-checkpoint exits 0 (rc=$rc: $(tail -c 400 "$MC_TMP/$name.conv"))"
    return $rc
}
resumed() { # name np dir flags...: training from DIR (iteration 12 to 24 with FLAGS)
    local name=$1 np=$2 dir=$3
    shift 3
    run_np "$np" "${FLAGS[@]}" "$@" --load "$dir" >"$MC_TMP/$name.run" 2>"$MC_TMP/$name.err"
    local rc=$?
    [ $rc -eq 0 ] || not_ok "$name: training from the converted checkpoint exits 0 (rc=$rc: $(tail -c 400 "$MC_TMP/$name.err"))"
    return $rc
}
is_dist() { [ -f "$1/metadata.json" ] && [ -f "$1/.metadata" ] && [ -f "$1/common.pt" ] && ! compgen -G "$1/mp_rank_*" >/dev/null; }
differs() { ! same_log_numbers "$@"; }

if ! have_mpirun; then
    skip "conversions between torch_dist and legacy layouts of several ranks" "mpirun is not installed"
else
    # (a) legacy tp2 x pp2 with the distributed optimizer -> torch_dist tp1
    A=$MC_TMP/legacy-ptd
    mpirun_mc 4 "${FLAGS[@]}" "${TP2PP2[@]}" "${DIST[@]}" --save "$A" --save-interval 12 --exit-interval 12 \
        >"$MC_TMP/a.full" 2>&1 || not_ok "(a) training tp2 x pp2 with the distributed optimizer and --save exits 0"
    if resumed a.orig 4 "$A" "${TP2PP2[@]}" "${DIST[@]}" &&
        convert a --load-dir "$A" --save-dir "$MC_TMP/a-dist" --target-ckpt-format torch_dist \
            --target-tensor-parallel-size 1 --target-pipeline-parallel-size 1 &&
        resumed a 1 "$MC_TMP/a-dist" "${DIST[@]}"; then
        published_a() {
            [ "$(cat "$MC_TMP/a-dist/latest_checkpointed_iteration.txt")" = 12 ] &&
                [ -f "$MC_TMP/a-dist/iter_0000012/__0_0.distcp" ] && ! compgen -G "$MC_TMP/a-dist/*.tmp-*" >/dev/null &&
                grep -q dp_reshardable "$MC_TMP/a-dist/iter_0000012/common.pt" && is_dist "$MC_TMP/a-dist/iter_0000012"
        }
        check "(a) legacy -> torch_dist: published like a save (tracker 12, metadata.json, .metadata, common.pt, dp_reshardable, no mp_rank_*, no temporary names)" \
            published_a
        check "(a) legacy tp2 x pp2 (distributed optimizer) -> torch_dist tp1: training continues with the numbers of resuming the source" \
            same_log_numbers "$MC_TMP/a.orig.run" "$MC_TMP/a.run" 12
        check "(a) the run loads the torch_dist checkpoint" grep -q 'loading distributed checkpoint from' "$MC_TMP/a.run"
        resumed a.noopt 1 "$MC_TMP/a-dist" "${DIST[@]}" --no-load-optim &&
            check "(a) without the optimizer state the numbers differ (the comparison can fail)" \
                differs "$MC_TMP/a.orig.run" "$MC_TMP/a.noopt.run" 12
    fi

    # (b) torch_dist saved by training (tp1) -> legacy tp2 x pp2
    B=$MC_TMP/dist-single
    "$MC_BIN" "${FLAGS[@]}" --ckpt-format torch_dist --save "$B" --save-interval 12 --exit-interval 12 \
        >"$MC_TMP/b.full" 2>&1 || not_ok "(b) training tp1 with --ckpt-format torch_dist --save exits 0"
    if resumed b.orig 1 "$B" &&
        convert b --load-dir "$B" --save-dir "$MC_TMP/b-legacy" --target-ckpt-format torch \
            --target-tensor-parallel-size 2 --target-pipeline-parallel-size 2 &&
        resumed b 4 "$MC_TMP/b-legacy" "${TP2PP2[@]}"; then
        check "(b) torch_dist -> legacy tp2 x pp2: mp_rank_TT_PPP files" \
            test "$(ls "$MC_TMP/b-legacy/iter_0000012" | tr '\n' ' ')" = "mp_rank_00_000 mp_rank_00_001 mp_rank_01_000 mp_rank_01_001 "
        check "(b) torch_dist tp1 -> legacy tp2 x pp2: training continues with the numbers of resuming the source" \
            same_log_numbers "$MC_TMP/b.orig.run" "$MC_TMP/b.run" 12
    fi
    # the target's format defaults to the source's
    if convert b2 --load-dir "$B" --save-dir "$MC_TMP/b-dist" --target-tensor-parallel-size 2 &&
        resumed b2 2 "$MC_TMP/b-dist" --tensor-model-parallel-size 2; then
        check "(b) torch_dist -> (no --target-ckpt-format) torch_dist tp2: files __0_0.distcp and __1_0.distcp" \
            bash -c "[ -f '$MC_TMP/b-dist/iter_0000012/__0_0.distcp' ] && [ -f '$MC_TMP/b-dist/iter_0000012/__1_0.distcp' ]"
        check "(b) ... an index, common.pt, no mp_rank_*" is_dist "$MC_TMP/b-dist/iter_0000012"
        check "(b) torch_dist tp1 -> torch_dist tp2: training continues with the numbers of resuming the source" \
            same_log_numbers "$MC_TMP/b.orig.run" "$MC_TMP/b2.run" 12
    fi
fi

# (c) Megatron-LM's torch_dist tp1 x pp2 -> legacy tp1 x pp1
source "$(dirname "$0")/megatron_ref.sh"
REF=$TORCH_DIST_REF/tp1pp2
if [ ! -d "$REF" ]; then
    skip "(c) Megatron's tp1pp2 torch_dist checkpoint" "$REF is absent (set MEGATRON_C_SHARED)"
else
    "$MC_BIN" "${RF[@]}" --load "$REF" >"$MC_TMP/c.direct" 2>&1 || not_ok "(c) Megatron's tp1pp2 loads directly at tp1 pp1"
    if convert c --load-dir "$REF" --save-dir "$MC_TMP/c-legacy" --target-ckpt-format torch \
        --target-pipeline-parallel-size 1; then
        "$MC_BIN" "${RF[@]}" --load "$MC_TMP/c-legacy" >"$MC_TMP/c.run" 2>&1
        rc=$?
        check "(c) Megatron's torch_dist tp1 x pp2 -> legacy tp1 x pp1: loads at iteration 10 and trains iterations 11 and 12 (rc=$rc)" \
            bash -c "[ $rc -eq 0 ] && [ -f '$MC_TMP/c-legacy/iter_0000010/mp_rank_00/distrib_optim.pt' ] &&
                     grep -q 'successfully loaded checkpoint from .* at iteration 10' '$MC_TMP/c.run' &&
                     grep -qE 'iteration +12/ +12 .*lm loss: [0-9.]+E' '$MC_TMP/c.run'"
        check "(c) ... with the numbers of loading Megatron's checkpoint directly" \
            same_log_numbers "$MC_TMP/c.direct" "$MC_TMP/c.run" 2
    fi
fi

# (d) a damaged source .metadata: one line naming it, exit 2, nothing written
if [ -d "$REF" ]; then
    cp -r "$REF" "$MC_TMP/damaged"
    M=$MC_TMP/damaged/iter_0000010/.metadata
    chmod u+w "$M"
    head -c 200 "$M" >"$M.cut" && mv "$M.cut" "$M"
    expect_user_error "(d) a damaged source .metadata: one error line naming the file, exit 2" \
        "iter_0000010/\.metadata" convert-checkpoint --load-dir "$MC_TMP/damaged" --save-dir "$MC_TMP/d-out" --target-ckpt-format torch
    check "(d) nothing published" test ! -e "$MC_TMP/d-out/latest_checkpointed_iteration.txt"
fi
