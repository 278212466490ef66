#!/usr/bin/env bash
# torch_dist checkpoints (ckpt/torchdist.h): --ckpt-format torch_dist saves, every --load
# detects the format, and any layout loads any other.
#  - the layout on disk: iter_N/{common.pt,__R_{0,1}.distcp,.metadata,metadata.json}, tracker;
#  - exact resume: the iterations after a load equal the run that did not stop (single rank);
#  - any layout loads any other, the distributed optimizer on or off, both of its forms
#    (dp_reshardable, --dist-ckpt-optim-fully-reshardable), bf16: the resumed iterations equal
#    the single-rank run that did not stop (layout invariance makes them equal);
#  - --async-save writes torch_dist too; kill -9 in the middle of a save leaves the previous
#    checkpoint loadable;
#  - one-line errors naming the file for a damaged .metadata, .distcp, common.pt, metadata.json;
#  - Megatron-LM's own checkpoints (../shared/data/megatron-ref/torch_dist): each loads at tp 1
#    and tp 2 and training continues.
# ci-sanitize: torch_dist: DCP metadata and shard files read back across layouts (the sanitizer
#   build's run leaves fp16, bf16, three of the layout pairs, the emulated device's save and
#   kill -9 to the release build's)
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

# 8 layers: tp 2 x pp 2 x vpp 2 has two layers per chunk. Dropout on.
FLAGS=(--device cpu --mock-data --vocab-size 256 --make-vocab-size-divisible-by 64 --num-layers 8
       --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
       --micro-batch-size 2 --global-batch-size 8 --train-iters 8 --lr 3e-3
       --lr-decay-style cosine --lr-warmup-iters 2 --min-lr 1e-4 --weight-decay 0.1
       --clip-grad 1.0 --log-interval 1 --eval-iters 0 --seed 1234
       --hidden-dropout 0.1 --attention-dropout 0.1 --log-params-norm)
DIST=(--ckpt-format torch_dist)

# Iterations 5..8 after a save at 4, without timestamps and times. A resumed run's second line
# also counts its first iteration (Megatron main's training_log), so iteration 6 is left out.
resumed() {
    sed -nE '/iteration +(5|7|8)\/ +8 \|/{s/^ \[[^]]*\]//; s/ elapsed time per iteration \(ms\): [0-9.]+ \|//; p}' "$1"
}
run_np() { # np args...
    local np=$1
    shift
    if [ "$np" -eq 1 ]; then "$MC_BIN" "$@"; else mpirun_mc "$np" "$@"; fi
}

"$MC_BIN" "${FLAGS[@]}" >"$MC_TMP/base" 2>&1
check "the uninterrupted single-rank run" grep -q 'iteration        8/       8' "$MC_TMP/base"
in_sanitizer_build || "$MC_BIN" "${FLAGS[@]}" --bf16 >"$MC_TMP/base16" 2>&1

# layout_case NAME SAVE-NP "SAVE FLAGS" LOAD-NP "LOAD FLAGS" [BASE]: saves at iteration 4 under
# one layout, loads under the other, and compares iterations 5..8 with the base run.
layout_case() {
    local name=$1 snp=$2 sflags=$3 lnp=$4 lflags=$5 base=${6:-$MC_TMP/base} dir=$MC_TMP/$1
    if { [ "$snp" -gt 1 ] || [ "$lnp" -gt 1 ]; } && ! have_mpirun; then
        skip "$name" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
        return
    fi
    # shellcheck disable=SC2086
    run_np "$snp" "${FLAGS[@]}" $sflags "${DIST[@]}" --save "$dir" --save-interval 4 \
        >"$MC_TMP/$name.save" 2>&1
    local rc1=$?
    # shellcheck disable=SC2086
    run_np "$lnp" "${FLAGS[@]}" $lflags --load "$dir" --ckpt-step 4 >"$MC_TMP/$name.load" 2>&1
    local rc2=$?
    # the lm loss within its float32 rounding where the data-parallel size changes (lib.sh)
    resumed "$base" >"$MC_TMP/$name.want"
    resumed "$MC_TMP/$name.load" >"$MC_TMP/$name.got"
    diff "$MC_TMP/$name.want" "$MC_TMP/$name.got" >"$MC_TMP/$name.diff"
    if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ "$(wc -l <"$MC_TMP/$name.got")" -eq 3 ] &&
        same_lines_float32_loss "$MC_TMP/$name.want" "$MC_TMP/$name.got"; then
        ok "$name: iterations 5..8 after loading equal the run that did not stop"
    else
        not_ok "$name (rc=$rc1,$rc2): $(head -c 600 "$MC_TMP/$name.diff") $(grep -h 'error' "$MC_TMP/$name.save" "$MC_TMP/$name.load" | head -c 400)"
    fi
}

# ---- one rank: the files, exact resume ----
S=$MC_TMP/single
layout_case single 1 "" 1 ""
S=$MC_TMP/single
check "single: the files of Megatron's layout" \
    bash -c "[ \"\$(ls -A '$S/iter_0000004' | sort | tr '\n' ' ')\" = '.metadata __0_0.distcp __0_1.distcp common.pt metadata.json ' ] &&
             [ \"\$(cat '$S/latest_checkpointed_iteration.txt')\" = 8 ] &&
             grep -q '\"sharded_backend\": \"torch_dist\"' '$S/iter_0000004/metadata.json'"
check "single: the save says its format" grep -q 'in torch_dist format' "$MC_TMP/single.save"
check "single: the load says the checkpoint is distributed" \
    grep -q 'loading distributed checkpoint from .* at iteration 4' "$MC_TMP/single.load"

# ---- any layout loads any other ----
PTD="--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2"
layout_case "tp2-pp2-vpp2-distopt-to-1" 4 "$PTD --use-distributed-optimizer" 1 ""
layout_case "1-to-dp2-distopt" 1 "" 2 "--use-distributed-optimizer"
left_to_release "dp2-distopt-to-tp2-distopt" ||
    layout_case "dp2-distopt-to-tp2-distopt" 2 "--use-distributed-optimizer" 2 \
        "--tensor-model-parallel-size 2 --use-distributed-optimizer"
layout_case "tp2-sp-fully-reshardable-to-pp2-vpp2-distopt" 2 \
    "--tensor-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer --dist-ckpt-optim-fully-reshardable" \
    2 "--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 --use-distributed-optimizer"
left_to_release "pp2-to-tp2-dp2-distopt" ||
    layout_case "pp2-to-tp2-dp2-distopt" 2 "--pipeline-model-parallel-size 2" 4 \
        "--tensor-model-parallel-size 2 --use-distributed-optimizer"
left_to_release "bf16-pp2-to-1-distopt" ||
    layout_case "bf16-pp2-to-1-distopt" 2 "--bf16 --pipeline-model-parallel-size 2" 1 \
        "--bf16 --use-distributed-optimizer" "$MC_TMP/base16"

# ---- --dist-ckpt-strictness: the optimizer's keys are unexpected with --no-load-optim ----
O=$MC_TMP/1-to-dp2-distopt
"$MC_BIN" "${FLAGS[@]}" --load "$O" --ckpt-step 4 --no-load-optim --dist-ckpt-strictness log_unexpected \
    >"$MC_TMP/strict.log" 2>&1
check "--dist-ckpt-strictness log_unexpected: the optimizer's keys are logged" \
    grep -q "WARNING: Unexpected keys (not found in sharded_state_dict): {'optimizer.state.exp_avg" "$MC_TMP/strict.log"
"$MC_BIN" "${FLAGS[@]}" --load "$O" --ckpt-step 4 --no-load-optim >"$MC_TMP/strict.ok" 2>&1
check "--dist-ckpt-strictness assume_ok_unexpected (the default) says nothing" \
    bash -c "[ $? -eq 0 ] && ! grep -q 'Unexpected keys' '$MC_TMP/strict.ok'"
"$MC_BIN" "${FLAGS[@]}" --load "$O" --ckpt-step 4 --no-load-optim --dist-ckpt-strictness raise_unexpected \
    >/dev/null 2>"$MC_TMP/strict.err"
one_error_line "--dist-ckpt-strictness raise_unexpected: one line listing them" \
    "raise_unexpected: [0-9]+ unexpected keys .*'optimizer.state.exp_avg" $? "$MC_TMP/strict.err"
"$MC_BIN" "${FLAGS[@]}" --load "$O" --ckpt-step 4 --dist-ckpt-strictness raise_all >"$MC_TMP/strict.all" 2>&1
check "--dist-ckpt-strictness raise_all: a full load has no unexpected key (rc=$?)" \
    grep -q 'iteration        8/' "$MC_TMP/strict.all"

# ---- fp16: the loss scaler resumes (plain optimizer: common.pt; distributed: an object) ----
in_sanitizer_build || "$MC_BIN" "${FLAGS[@]}" --fp16 --initial-loss-scale 4096 --loss-scale-window 3 >"$MC_TMP/base-fp16" 2>&1
left_to_release "fp16" ||
    layout_case fp16 1 "--fp16 --initial-loss-scale 4096 --loss-scale-window 3" 1 \
        "--fp16 --initial-loss-scale 4096 --loss-scale-window 3" "$MC_TMP/base-fp16"
left_to_release "fp16-distopt" ||
    layout_case fp16-distopt 1 "--fp16 --initial-loss-scale 4096 --loss-scale-window 3 --use-distributed-optimizer" 1 \
        "--fp16 --initial-loss-scale 4096 --loss-scale-window 3 --use-distributed-optimizer" "$MC_TMP/base-fp16"

# ---- --async-save ----
layout_case async 1 "--async-save" 1 ""

# ---- the CUDA backend (the emulated device): its checkpoint loads on the CPU and resumes ----
if left_to_release "a checkpoint of --device cuda (emulated device)"; then
    :
elif [ -n "${MC_EMU_BUILD:-}" ] && [ -x "$MC_EMU_BUILD/megatron-c" ]; then
    "$MC_EMU_BUILD/megatron-c" "${FLAGS[@]}" --device cuda --use-distributed-optimizer "${DIST[@]}" \
        --save "$MC_TMP/emu" --save-interval 4 --exit-interval 4 >"$MC_TMP/emu.save" 2>&1
    rc1=$?
    "$MC_BIN" "${FLAGS[@]}" --load "$MC_TMP/emu" --ckpt-step 4 >"$MC_TMP/emu.load" 2>&1
    rc2=$?
    check "saved by --device cuda (emulated device), loaded on the CPU: iterations 5..8 equal the run that did not stop (rc=$rc1,$rc2)" \
        bash -c "[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ \$(grep -c 'iteration .*/       8 |' '$MC_TMP/emu.load') -eq 4 ] &&
                 diff <(sed -nE '/iteration +(5|7|8)\/ +8 \|/{s/^ \[[^]]*\]//; s/ elapsed time per iteration \(ms\): [0-9.]+ \|//; p}' '$MC_TMP/base') \
                      <(sed -nE '/iteration +(5|7|8)\/ +8 \|/{s/^ \[[^]]*\]//; s/ elapsed time per iteration \(ms\): [0-9.]+ \|//; p}' '$MC_TMP/emu.load') >/dev/null"
else
    skip "a checkpoint of --device cuda (emulated device)" "no emulated build (MC_EMU_BUILD='${MC_EMU_BUILD:-}'; make emu)"
fi

# ---- damaged files: one line naming the file ----
C=$MC_TMP/corrupt
cp -r "$S" "$C"
I=$C/iter_0000004
load_error() { # name pattern
    "$MC_BIN" "${FLAGS[@]}" --load "$C" --ckpt-step 4 >"$MC_TMP/err.out" 2>"$MC_TMP/err.err"
    one_error_line "$1" "$2" $? "$MC_TMP/err.err"
    rm -rf "$C"
    cp -r "$S" "$C"
}
truncate -s 100 "$I/.metadata"
load_error "a truncated .metadata: one error naming it" "error: .*corrupt/iter_0000004/\.metadata: "
truncate -s 1000 "$I/__0_0.distcp"
load_error "a truncated .distcp: one error naming it" "error: .*corrupt/iter_0000004/__0_0\.distcp"
# the middle of the file: inside the largest tensor's data
printf 'garbage' | dd of="$I/__0_1.distcp" bs=1 seek=$(($(stat -c %s "$I/__0_1.distcp") / 2)) conv=notrunc 2>/dev/null
load_error "a damaged .distcp: one error naming it" "error: .*corrupt/iter_0000004/__0_1\.distcp"
truncate -s 500 "$I/common.pt"
load_error "a truncated common.pt: one error naming it" "error: .*corrupt/iter_0000004/common\.pt: "
echo '{"sharded_backend": "zarr"}' >"$I/metadata.json"
load_error "a metadata.json of another backend: one error naming it" \
    "error: .*corrupt/iter_0000004/metadata\.json: "
rm "$I/common.pt"
load_error "a missing common.pt: one error naming it" "error: .*corrupt/iter_0000004/common\.pt"

# ---- another model: one line naming what differs ----
"$MC_BIN" "${FLAGS[@]}" --num-layers 4 --load "$S" --ckpt-step 4 >/dev/null 2>"$MC_TMP/shape.err"
one_error_line "another number of layers: one line naming it" \
    "common.pt: saved with num_layers 8 but this run has 4 \(--num-layers\): load with the model shape" $? "$MC_TMP/shape.err"
"$MC_BIN" "${FLAGS[@]}" --ffn-hidden-size 64 --load "$S" --ckpt-step 4 >/dev/null 2>"$MC_TMP/ffn.err"
one_error_line "another ffn size: one line naming the tensor and both shapes" \
    "'decoder.layers.mlp.linear_fc1.weight' is \[8, 128, 32\] in the checkpoint but \[8, 64, 32\] in this run" $? "$MC_TMP/ffn.err"
# --use-checkpoint-args reads a torch_dist checkpoint's args (common.pt)
"$MC_BIN" --device cpu --mock-data --vocab-size 256 --lr 3e-3 --train-iters 8 --micro-batch-size 2 \
    --global-batch-size 8 --load "$S" --ckpt-step 4 \
    --use-checkpoint-args --use-checkpoint-opt-param-scheduler --exit-interval 5 --eval-iters 0 >"$MC_TMP/uca.log" 2>&1
check "--use-checkpoint-args takes a torch_dist checkpoint's model arguments (rc=$?)" \
    bash -c "grep -q 'successfully loaded checkpoint from .* at iteration 4' '$MC_TMP/uca.log' && grep -qE 'num_layers \.+ 8$' '$MC_TMP/uca.log'"

# ---- kill -9 during a save leaves the previous checkpoint loadable ----
K=$MC_TMP/killed
if ! left_to_release "kill -9 in the middle of a save"; then
    "$MC_BIN" "${FLAGS[@]}" "${DIST[@]}" --save "$K" --save-interval 4 --exit-interval 4 >/dev/null 2>&1
    MC_TEST_CKPT_WRITE_DELAY_MS=3000 "$MC_BIN" "${FLAGS[@]}" "${DIST[@]}" --load "$K" --save "$K" \
        --save-interval 2 >"$MC_TMP/kill.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        compgen -G "$K/iter_0000006.tmp-*" >/dev/null && break
        sleep 0.1
    done
    mid=0
    compgen -G "$K/iter_0000006.tmp-*" >/dev/null && mid=1
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    "$MC_BIN" "${FLAGS[@]}" --load "$K" --exit-interval 5 >"$MC_TMP/kill.resume" 2>&1
    rc=$?
    check "kill -9 in the middle of a save (mid=$mid): the tracker still names iteration 4, which loads (rc=$rc)" \
        bash -c "[ $mid -eq 1 ] && [ \"\$(cat '$K/latest_checkpointed_iteration.txt')\" = 4 ] && [ $rc -eq 0 ] &&
                 grep -q 'loading distributed checkpoint from .* at iteration 4' '$MC_TMP/kill.resume'"
fi

# ---- Megatron-LM's own checkpoints ----
source "$(dirname "$0")/megatron_ref.sh"
REF=$TORCH_DIST_REF
for layout in tp1pp1 tp2pp1 tp1pp2; do
    if [ ! -d "$REF/$layout" ]; then
        skip "Megatron's $layout checkpoint" "$REF/$layout is absent (set MEGATRON_C_SHARED)"
        continue
    fi
    extra=()
    [ $layout = tp2pp1 ] && extra=(--no-load-optim --no-load-rng)
    for np in 1 2; do
        if [ $np -eq 2 ] && ! have_mpirun; then
            skip "Megatron's $layout at tp 2" "mpirun is not installed"
            continue
        fi
        tp=()
        [ $np -eq 2 ] && tp=(--tensor-model-parallel-size 2)
        run_np $np "${RF[@]}" "${tp[@]}" "${extra[@]}" --load "$REF/$layout" >"$MC_TMP/ref.log" 2>&1
        rc=$?
        check "Megatron's $layout loads at tp $np and trains iterations 11 and 12 (rc=$rc $(grep -h error "$MC_TMP/ref.log" | head -c 300))" \
            bash -c "[ $rc -eq 0 ] && grep -q 'successfully loaded checkpoint from .* at iteration 10' '$MC_TMP/ref.log' &&
                     grep -qE 'iteration +12/ +12 .*lm loss: [0-9.]+E' '$MC_TMP/ref.log'"
    done
done

# ---- Megatron's checkpoints loaded and saved again at their layout: the same files ----
# No iteration is trained (--train-iters 10 is the checkpoint's), so the save at the end holds
# what was loaded: every key, dtype, shape, chunk and tensor hash must be Megatron's.
DUMP=$MC_BUILD/test/tools/dcp_dump
for case in "tp1pp1 1" "tp2pp1 2 --tensor-model-parallel-size 2 --no-load-optim --no-load-rng --no-save-optim" \
    "tp1pp2 2 --pipeline-model-parallel-size 2"; do
    read -r layout np extra <<<"$case"
    if [ ! -d "$REF/$layout" ] || [ ! -x "$DUMP" ]; then
        skip "Megatron's $layout saved again" "$REF/$layout or $DUMP is absent"
        continue
    fi
    if [ "$np" -gt 1 ] && ! have_mpirun; then
        skip "Megatron's $layout saved again" "mpirun is not installed"
        continue
    fi
    out=$MC_TMP/again-$layout
    # shellcheck disable=SC2086
    run_np "$np" "${RF[@]}" --train-iters 10 $extra --load "$REF/$layout" "${DIST[@]}" --save "$out" \
        --save-interval 7 >"$out.log" 2>&1
    rc=$?
    "$DUMP" "$out/iter_0000010" >"$out.dump" 2>&1 && "$DUMP" --chunks "$out/iter_0000010" >"$out.chunks" 2>&1
    python3 "$(dirname "$0")/dcp_vs_manifest.py" "$REF/$layout.manifest.json" "$out.dump" "$out.chunks" \
        >"$out.cmp" 2>&1
    check "Megatron's $layout loaded and saved again: the same keys, dtypes, shapes, chunks and hashes (rc=$rc: $(tail -3 "$out.cmp" | tr '\n' ' ' | head -c 400))" \
        bash -c "[ $rc -eq 0 ] && grep -q ', 0 differences' '$out.cmp'"
done

# With PyTorch 2.x (scripts/install-deps.sh --torch2): the distributed optimizer's per-domain
# param_groups list its groups in Megatron's order (first appearance on the stage: the second
# pipeline stage starts with a LayerNorm, so its first group has no weight decay).
PY2=${MC_TORCH2_PYTHON:-$(dirname "$0")/../../build/venv-torch2/bin/python}
groups_of() { # iter-dir: "key: wd_mult,wd_mult" per optimizer object
    DCP_CHECK_REPR=1 "$PY2" "$(dirname "$0")/../ref/dcp_check.py" "$1" 2>/dev/null |
        awk -F'\t' '$1 ~ /\.optimizer\/shard_0_1$/ { s = $4; o = ""; while (match(s, /.wd_mult.: [0-9.]+/)) {
            o = o substr(s, RSTART + 11, RLENGTH - 11) ","; s = substr(s, RSTART + RLENGTH) } print $1 ": " o }'
}
if [ -x "$PY2" ] && "$PY2" -c 'import torch.distributed.checkpoint' 2>/dev/null && [ -d "$MC_TMP/again-tp1pp2" ]; then
    groups_of "$REF/tp1pp2/iter_0000010" >"$MC_TMP/groups.ref"
    groups_of "$MC_TMP/again-tp1pp2/iter_0000010" >"$MC_TMP/groups.mc"
    check "the per-domain param_groups in Megatron's order ($(tr '\n' ' ' <"$MC_TMP/groups.mc"))" \
        bash -c "[ \$(wc -l <'$MC_TMP/groups.ref') -eq 2 ] && cmp -s '$MC_TMP/groups.ref' '$MC_TMP/groups.mc'"
else
    skip "the per-domain param_groups in Megatron's order" "no PyTorch 2.x (scripts/install-deps.sh --torch2) or no tp1pp2 save"
fi
