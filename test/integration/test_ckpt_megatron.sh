#!/usr/bin/env bash
# Megatron-LM's own checkpoints: test/ref/megatron_ckpt.py writes a tiny GPT's
# checkpoint in Megatron's exact legacy structure (args Namespace with torch dtypes and Megatron
# enums, Python/numpy/torch/CUDA RNG states, rerun state machine, TE or local names, fp32,
# bf16 with fp32 master params, distributed optimizer with one buffer per model chunk) in four
# layouts, all holding the same full state (reference.pt). megatron-c must:
#  - load each at its layout and hold exactly the reference's fp32 weights, Adam moments, step,
#    iteration and consumed samples (re-saved and compared in torch, bit for bit), and evaluate
#    the loss torch computes from those weights (and not from their bf16 rounding);
#  - continue training with the same losses from every layout, and differently without the
#    optimizer state (--no-load-optim);
#  - refuse foreign or broken content with one line;
#  - take the model's arguments from the checkpoint with --use-checkpoint-args (and the layout
#    with --use-mp-args-from-checkpoint-args), training like the run given every flag;
#  - convert a Megatron checkpoint to another layout (megatron-c convert-checkpoint).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

PY=/usr/bin/python3
REF=$(cd "$(dirname "$0")/../ref" && pwd)/megatron_ckpt.py
if ! "$PY" -c "import torch, numpy" 2>/dev/null; then
    skip "Megatron-LM checkpoints" "python3-torch or python3-numpy is not installed (scripts/install-deps.sh --torch)"
    exit 0
fi
FX=$MC_TMP/fixture
if ! "$PY" "$REF" write "$FX" >"$MC_TMP/fixture.log" 2>&1; then
    not_ok "megatron_ckpt.py writes the fixture ($(tail -c 400 "$MC_TMP/fixture.log"))"
    exit 0
fi

# the fixture's run: 4 layers, iteration 10 of 20, gbs 8, evaluation every 10 iterations
MODEL=(--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 32
       --max-position-embeddings 32)
RUN=(--device cpu --mock-data --vocab-size 256 --make-vocab-size-divisible-by 64
     --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --lr-decay-style cosine
     --lr-warmup-iters 2 --min-lr 1e-4 --weight-decay 0.1 --clip-grad 1.0 --log-interval 1
     --eval-interval 10 --eval-iters 2 --seed 1234 --log-params-norm)
FLAGS=("${MODEL[@]}" "${RUN[@]}")
PTD="--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2"
declare -A LAYOUT=(
    [tp1_fp32_local]="1"
    [tp1_bf16_te]="1"
    [tp1_fp16_local]="1"
    [tp2_fp32_local]="2 --tensor-model-parallel-size 2"
    [tp2_pp2_vpp2_bf16_te_distopt]="8 $PTD --use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 3000"
    [tp2_pp2_vpp2]="4 $PTD"
)
VARIANTS=(tp1_fp32_local tp1_bf16_te tp1_fp16_local tp2_fp32_local tp2_pp2_vpp2_bf16_te_distopt)

run_np() { # np args...
    local np=$1
    shift
    if [ "$np" -eq 1 ]; then "$MC_BIN" "$@"; else mpirun_mc "$np" "$@"; fi
}
# run_variant NAME OUT args...: megatron-c on the variant's layout with FLAGS
run_variant() {
    local name=$1 out=$2
    shift 2
    read -r -a lay <<<"${LAYOUT[$name]}"
    run_np "${lay[0]}" "${FLAGS[@]}" "${lay[@]:1}" "$@" >"$out" 2>"$out.err"
}
needs_mpi() { [ "${LAYOUT[$1]%% *}" = 1 ] || have_mpirun; }
succeeded() { [ "$1" -eq 0 ] && shift && "$@"; } # rc command...
differs() { ! same_log_numbers "$@"; }
rel_close() { awk -v a="$1" -v b="$2" -v tol="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= tol * (b < 0 ? -b : b)) }'; }

# ---- the state loads exactly, and the loss is torch's ----
"$MC_BIN" inspect-data "${FLAGS[@]}" --train-iters 10 --split-name valid --samples 16:32 >"$MC_TMP/valid.ids"
torch_master=$("$PY" "$REF" eval-loss "$FX/reference.pt" "$MC_TMP/valid.ids" master)
torch_bf16=$("$PY" "$REF" eval-loss "$FX/reference.pt" "$MC_TMP/valid.ids" bf16)
for v in "${VARIANTS[@]}"; do
    if ! needs_mpi "$v"; then
        skip "$v: loads exactly" "mpirun is not installed"
        continue
    fi
    impl=transformer_engine
    [ "$v" = tp1_bf16_te ] && impl=local # re-save in the other spec's names once
    # iteration 10 of 10: nothing to train; the final save and evaluation run
    run_variant "$v" "$MC_TMP/$v.load" --train-iters 10 --lr-decay-iters 20 --load "$FX/$v" \
        --use-checkpoint-opt-param-scheduler --save "$MC_TMP/$v.resaved" --save-interval 7 --transformer-impl "$impl"
    rc=$?
    if [ $rc -ne 0 ]; then
        not_ok "$v: loads (rc=$rc: $(tail -c 400 "$MC_TMP/$v.load.err"))"
        continue
    fi
    check "$v: loaded at iteration 10, Megatron's rng state ignored with a warning" \
        bash -c "grep -q 'successfully loaded checkpoint from .* at iteration 10' '$MC_TMP/$v.load' &&
            grep -q \"WARNING: the checkpoint's rng state is Megatron-LM's\" '$MC_TMP/$v.load'"
    if out=$("$PY" "$REF" check-saved "$MC_TMP/$v.resaved" "$v" "$FX/reference.pt" 2>&1); then
        ok "$v: re-saved weights (fp32 masters), Adam moments, step, iteration, consumed samples equal the reference's"
    else
        not_ok "$v: re-saved state equals the reference's ($(echo "$out" | tail -c 400))"
    fi
    mc=$(sed -nE 's/.*validation loss at iteration 10 on validation set \| lm loss value: ([0-9.E+-]+) .*/\1/p' "$MC_TMP/$v.load")
    check "$v: validation loss $mc is torch's $torch_master from the master weights, not $torch_bf16 from their bf16 rounding" \
        bash -c "[ -n '$mc' ] && awk -v m='$mc' -v t='$torch_master' -v b='$torch_bf16' \
            'BEGIN { d = m - t; e = m - b; if (d < 0) d = -d; if (e < 0) e = -e; exit !(d <= 1e-6 && e > 4 * 1e-6) }'"
done
# the comparison can fail: without the optimizer state the Adam moments are not the reference's
run_variant tp1_fp32_local "$MC_TMP/noopt.load" --train-iters 10 --lr-decay-iters 20 --load "$FX/tp1_fp32_local" \
    --use-checkpoint-opt-param-scheduler --save "$MC_TMP/noopt.resaved" --save-interval 7 --no-load-optim
check "the re-save check fails for a load with --no-load-optim (the comparison can fail)" \
    bash -c "! '$PY' '$REF' check-saved '$MC_TMP/noopt.resaved' tp1_fp32_local '$FX/reference.pt' >/dev/null 2>&1"

# ---- training continues, the same from every layout ----
run_variant tp1_fp32_local "$MC_TMP/ref.train" --train-iters 20 --load "$FX/tp1_fp32_local"
rc=$?
check "tp1_fp32_local: trains iterations 11..20 (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && [ \$(grep -c 'iteration *[0-9]*/ *20 |' '$MC_TMP/ref.train') -eq 10 ] &&
        ! grep -q 'iteration *10/' '$MC_TMP/ref.train'"
for v in tp1_bf16_te tp1_fp16_local tp2_fp32_local tp2_pp2_vpp2_bf16_te_distopt; do
    if ! needs_mpi "$v"; then
        skip "$v: continues like tp1_fp32_local" "mpirun is not installed"
        continue
    fi
    run_variant "$v" "$MC_TMP/$v.train" --train-iters 20 --load "$FX/$v"
    rc=$?
    check "$v: iterations 11..20 give tp1_fp32_local's losses, grad and params norms (rc=$rc)" \
        succeeded $rc same_log_numbers "$MC_TMP/ref.train" "$MC_TMP/$v.train" 10
done
run_variant tp1_bf16_te "$MC_TMP/noopt.train" --train-iters 20 --load "$FX/tp1_bf16_te" --no-load-optim
rc=$?
check "--no-load-optim trains (rc=$rc) and differs: the optimizer state is used" \
    succeeded $rc differs "$MC_TMP/ref.train" "$MC_TMP/noopt.train" 10

# ---- foreign or broken content: one line ----
load_error() { # name pattern variant tamper-kind [args...] (LAY: another layout to load at;
    # EVERY=1: one line or more, each matching the pattern)
    local name=$1 pattern=$2 v=$3 kind=$4
    shift 4
    rm -rf "$MC_TMP/bad"
    cp -r "$FX/$v" "$MC_TMP/bad"
    [ "$kind" = none ] || "$PY" "$REF" tamper "$MC_TMP/bad" "$kind"
    read -r -a lay <<<"${LAYOUT[${LAY:-$v}]}"
    run_np "${lay[0]}" "${FLAGS[@]}" "${lay[@]:1}" --train-iters 20 --load "$MC_TMP/bad" "$@" \
        >"$MC_TMP/err.out" 2>"$MC_TMP/err.err"
    local rc=$?
    if [ -n "${EVERY:-}" ]; then every_error_line "$name" "$pattern" $rc "$MC_TMP/err.err"
    else one_error_line "$name" "$pattern" $rc "$MC_TMP/err.err"; fi
}
load_error "a tensor the run's model lacks (q_layernorm without --qk-layernorm): one line naming it" \
    "model_optim_rng.pt: model: unexpected tensor 'decoder.layers.0.self_attention.q_layernorm.weight'" tp1_bf16_te qk-layernorm
load_error "checkpoint_version 2.0: one line" "checkpoint_version 2: only version 3.0" tp1_fp32_local version2
load_error "decoupled learning-rate groups: one line" "parameter groups other than Megatron's standard two" \
    tp1_fp32_local decoupled-lr
load_error "fp32_from_fp16_params not matching the groups: one line" \
    "fp32_from_fp16_params of the group with wd_mult 0.0 has" tp1_bf16_te masters
if have_mpirun; then
    load_error "distrib_optim.pt of another buffer size: one line" \
        "distrib_optim.pt: buffer 0 holds [0-9]+ unpadded elements but this run's has" \
        tp2_pp2_vpp2_bf16_te_distopt distopt-numel
    LAY=tp2_pp2_vpp2 load_error "the distributed optimizer's checkpoint loaded without it: one line" \
        "saved with --use-distributed-optimizer but this run does not use it" \
        tp2_pp2_vpp2_bf16_te_distopt none
fi
load_error "another model shape: one line naming the argument" "saved with hidden_size 64 but this run has 128" \
    tp1_fp32_local none --hidden-size 128
mkdir -p "$MC_TMP/dist/iter_0000010" && echo 10 >"$MC_TMP/dist/latest_checkpointed_iteration.txt" &&
    echo '{"sharded_backend": "torch_dist"}' >"$MC_TMP/dist/iter_0000010/metadata.json"
"$MC_BIN" "${FLAGS[@]}" --train-iters 20 --load "$MC_TMP/dist" >"$MC_TMP/err.out" 2>"$MC_TMP/err.err"
one_error_line "a torch_dist checkpoint without its files: one line naming the missing one" \
    "iter_0000010/common.pt: cannot open" $? "$MC_TMP/err.err"

# ---- --use-checkpoint-args ----
"$MC_BIN" "${RUN[@]}" --train-iters 20 --load "$FX/tp1_fp32_local" --use-checkpoint-args >"$MC_TMP/args.train" 2>&1
rc=$?
check "--use-checkpoint-args without the model's flags: Megatron's 'Setting ... from checkpoint' lines (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && grep -q '^Setting num_layers to 4 from checkpoint' '$MC_TMP/args.train' &&
        grep -q '^Setting max_position_embeddings to 32 from checkpoint' '$MC_TMP/args.train' &&
        grep -q '^Setting attention_dropout to 0.1 from checkpoint' '$MC_TMP/args.train'"
check "--use-checkpoint-args trains like the run given every flag" \
    same_log_numbers "$MC_TMP/ref.train" "$MC_TMP/args.train" 10
load_error "--use-checkpoint-args keeps a model flag given (not None), as Megatron: the load then refuses it" \
    "saved with num_layers 4 but this run has 2" tp1_fp32_local none --use-checkpoint-args --num-layers 2
EVERY=1 load_error "--use-checkpoint-args with a model megatron-c lacks (MoE): a line for each part it lacks" \
    "MoE .*not implemented yet" tp1_fp32_local moe --use-checkpoint-args
expect_user_error "--use-checkpoint-args without --load: Megatron's assertion as one line" \
    "--use-checkpoint-args requires --load" "${RUN[@]}" --train-iters 20 --use-checkpoint-args
if have_mpirun; then
    mpirun_mc 2 "${RUN[@]}" --train-iters 20 --load "$FX/tp2_fp32_local" --use-checkpoint-args \
        --use-mp-args-from-checkpoint-args >"$MC_TMP/mp.train" 2>"$MC_TMP/mp.err"
    rc=$?
    check "--use-mp-args-from-checkpoint-args takes tp 2 from the checkpoint and trains the same (rc=$rc)" \
        succeeded $rc grep -q '^Setting tensor_model_parallel_size to 2 from checkpoint' "$MC_TMP/mp.train"
    check "... and trains like the run given every flag" same_log_numbers "$MC_TMP/ref.train" "$MC_TMP/mp.train" 10
fi

# ---- a Megatron checkpoint converted to another layout ----
"$MC_BIN" convert-checkpoint --load-dir "$FX/tp2_pp2_vpp2_bf16_te_distopt" --save-dir "$MC_TMP/conv" \
    --target-tensor-parallel-size 1 --target-pipeline-parallel-size 1 --target-no-use-distributed-optimizer \
    >"$MC_TMP/conv.log" 2>&1
rc=$?
"$MC_BIN" "${FLAGS[@]}" --train-iters 20 --load "$MC_TMP/conv" >"$MC_TMP/conv.train" 2>&1
rc2=$?
check "Megatron's tp2 x pp2 x vpp2 distributed-optimizer bf16 checkpoint converted to tp 1: trains like tp1_fp32_local (rc=$rc, $rc2)" \
    succeeded $((rc + rc2)) same_log_numbers "$MC_TMP/ref.train" "$MC_TMP/conv.train" 10
# fp16 to tp 2: float16 weights re-rounded from the masters, the grad scaler carried
"$MC_BIN" convert-checkpoint --load-dir "$FX/tp1_fp16_local" --save-dir "$MC_TMP/conv16" \
    --target-tensor-parallel-size 2 >"$MC_TMP/conv16.log" 2>&1
rc=$?
if have_mpirun; then
    mpirun_mc 2 "${FLAGS[@]}" --tensor-model-parallel-size 2 --train-iters 20 --load "$MC_TMP/conv16" >"$MC_TMP/conv16.train" 2>&1
    rc2=$?
    check "Megatron's fp16 checkpoint converted to tp 2: trains like tp1_fp32_local (rc=$rc, $rc2)" \
        succeeded $((rc + rc2)) same_log_numbers "$MC_TMP/ref.train" "$MC_TMP/conv16.train" 10
fi
cat >"$MC_TMP/conv16.py" <<'EOF'
import sys, torch
sys.path.insert(0, sys.argv[3])
import megatron_ckpt  # registers the Megatron classes the args Namespace names
sd = torch.load(sys.argv[1] + "/iter_0000010/mp_rank_01/model_optim_rng.pt", map_location="cpu")
ref = torch.load(sys.argv[2], map_location="cpu")
opt = sd["optimizer"]
w = sd["model"]["decoder.layers.2.mlp.linear_fc1.weight"]
want = ref["param"]["decoder.layers.2.mlp.linear_fc1.weight"][128:].to(torch.float16)
ok = (w.dtype == torch.float16 and torch.equal(w, want) and float(opt["grad_scaler"]["scale"]) == 65536.0
      and opt["grad_scaler"]["hysteresis_tracker"] == 2 and "fp32_from_fp16_params" in opt)
sys.exit(0 if ok else 1)
EOF
check "the converted fp16 files: float16 weights equal torch's rounding of the masters, grad scaler kept" \
    "$PY" "$MC_TMP/conv16.py" "$MC_TMP/conv16" "$FX/reference.pt" "$(dirname "$REF")"
exit 0
