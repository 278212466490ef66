#!/usr/bin/env bash
# --apply-layernorm-1p, as Transformer Engine's zero_centered_gamma in
# Megatron core_v0.15.0: every norm computes with 1 + w, w starts at zero, checkpoints hold w.
# A run with it starts from the same function as a run without it (1 + 0 = 1) and gets the same
# gradients (d(1 + w)/dw = 1) and updates (no weight decay on 1-D parameters either way), so:
#  - its losses equal the plain run's (the printed digits; 1 + w and the plain weight round
#    differently in the last bit only), for the GPT (LayerNorm) and the Llama block (RMSNorm,
#    q/k_layernorm);
#  - its checkpoint's norm weights are the plain run's minus 1 (so near zero: w, not 1 + w);
#  - resumed from its checkpoint it continues with the straight run's losses;
#  - tensor parallelism (tp 2, sequence parallel) and pipeline parallelism (pp 2) give the
#    single rank's losses;
#  - the CUDA backend (on the emulated device) gives the CPU's losses.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

TOOL=${MC_BUILD:-build/rel}/test/tools/ckpt_tool
GPT=(--device cpu --mock-data --vocab-size 256 --num-layers 2 --hidden-size 16
     --num-attention-heads 2 --seq-length 16 --max-position-embeddings 16 --micro-batch-size 2
     --global-batch-size 4 --lr 1e-2 --log-interval 1 --eval-iters 0 --seed 1234)
LLAMA=("${GPT[@]}" --normalization RMSNorm --qk-layernorm --position-embedding-type rope --swiglu
       --ffn-hidden-size 32 --disable-bias-linear)

losses() { grep -o 'lm loss: [^ ]*' "$1" | cut -d' ' -f3 | tr '\n' ' '; }
# a checkpoint tensor's values, one per line ($TOOL's JSON, read with Python's json module)
values() { # checkpoint-dir tensor-name
    "$TOOL" dump "$1/iter_0000008/mp_rank_00/model_optim_rng.pt" | python3 -c '
import json, sys
def find(o, key):
    if isinstance(o, dict):
        for k, v in o.get("dict", []):
            if k == key: return v
        subs = list(o.values())
    else:
        subs = o if isinstance(o, list) else []
    for v in subs:
        if isinstance(v, (dict, list)):
            r = find(v, key)
            if r is not None: return r
print("\n".join(repr(x) for x in find(json.load(sys.stdin), sys.argv[1])["values"]))' "$2"
}
# every value of tensor $3 in checkpoint $2 equals the one in checkpoint $1 minus 1 (1e-5)
minus_one() {
    paste <(values "$1" "$3") <(values "$2" "$3") |
        awk 'BEGIN { n = 0 } { n++; d = $1 - 1 - $2; if (d < -1e-5 || d > 1e-5 || $2 < -0.5 || $2 > 0.5) bad = 1 }
             END { exit bad || n == 0 }'
}

for model in GPT LLAMA; do
    declare -n F=$model
    "$MC_BIN" "${F[@]}" --train-iters 8 --save "$MC_TMP/$model-plain" --save-interval 8 >"$MC_TMP/plain" 2>&1
    "$MC_BIN" "${F[@]}" --train-iters 8 --save "$MC_TMP/$model-1p" --save-interval 8 --apply-layernorm-1p \
        >"$MC_TMP/$model-1p.out" 2>&1
    rc=$?
    a=$(losses "$MC_TMP/plain") b=$(losses "$MC_TMP/$model-1p.out")
    # 1 + w rounds unlike w itself once Adam has moved it: the numbers agree to the layout
    # tests' tolerances (same_log_numbers), not bit for bit
    check "$model: the --apply-layernorm-1p run exits 0 (rc=$rc; $b)" \
        bash -c "[ $rc -eq 0 ] && [ -n '$a' ]" && check "$model: --apply-layernorm-1p gives the plain run's 8 losses and grad norms" \
        same_log_numbers "$MC_TMP/plain" "$MC_TMP/$model-1p.out" 8
    if [ -x "$TOOL" ]; then
        # Transformer Engine's names: input_layernorm in linear_qkv, pre_mlp_layernorm in linear_fc1
        norms=(decoder.final_layernorm.weight decoder.layers.1.self_attention.linear_qkv.layer_norm_weight
               decoder.layers.0.mlp.linear_fc1.layer_norm_weight)
        [ $model = LLAMA ] && norms+=(decoder.layers.0.self_attention.q_layernorm.weight
                                      decoder.layers.1.self_attention.k_layernorm.weight)
        for t in "${norms[@]}"; do
            check "$model: the checkpoint holds w = the plain run's weight - 1: $t" \
                minus_one "$MC_TMP/$model-plain" "$MC_TMP/$model-1p" "$t"
        done
    else
        skip "$model: the checkpoint's norm weights" "no $TOOL (make tests)"
    fi
    unset -n F
done

# resumed from the checkpoint of iteration 4: the straight run's last 4 losses
"$MC_BIN" "${LLAMA[@]}" --apply-layernorm-1p --train-iters 8 >"$MC_TMP/straight" 2>&1
"$MC_BIN" "${LLAMA[@]}" --apply-layernorm-1p --train-iters 8 --exit-interval 4 --save "$MC_TMP/half" \
    --save-interval 4 >/dev/null 2>&1
"$MC_BIN" "${LLAMA[@]}" --apply-layernorm-1p --train-iters 8 --load "$MC_TMP/half" >"$MC_TMP/resumed" 2>&1
rc=$?
# (the second line after a resume averages two iterations, as Megatron's log does: not compared)
a=$(losses "$MC_TMP/straight" | cut -d' ' -f5,7,8) b=$(losses "$MC_TMP/resumed" | cut -d' ' -f1,3,4)
check "resumed at 4 from its checkpoint: the straight run's losses 5, 7 and 8 (rc=$rc; $b)" \
    bash -c "[ $rc -eq 0 ] && [ -n '$a' ] && [ '$a' = '$b' ]"

# tp 2 with sequence parallelism (Llama), pp 2 (the final norm on the last stage): the single
# rank's losses
for layout in "LLAMA --tensor-model-parallel-size 2 --sequence-parallel" \
              "GPT --pipeline-model-parallel-size 2" "LLAMA --pipeline-model-parallel-size 2"; do
    model=${layout%% *}
    declare -n F=$model
    # shellcheck disable=SC2086 # the layout's flags
    "${MPIRUN[@]}" -np 2 "$MC_BIN" "${F[@]}" --apply-layernorm-1p --train-iters 8 ${layout#* } \
        >"$MC_TMP/par" 2>&1
    rc=$?
    a=$(losses "$MC_TMP/$model-1p.out") b=$(losses "$MC_TMP/par")
    check "$layout: exits 0 (rc=$rc; $b)" \
        bash -c "[ $rc -eq 0 ] && [ -n '$a' ]" &&
        check "$layout: the single rank's losses and grad norms" same_log_numbers "$MC_TMP/$model-1p.out" "$MC_TMP/par" 8
    unset -n F
done

# the CUDA backend (on the emulated device): 1 + w by its add op, the CPU's losses within 1e-5
if [ -n "${MC_EMU_BUILD:-}" ] && [ -x "$MC_EMU_BUILD/megatron-c" ]; then
    "$MC_EMU_BUILD/megatron-c" "${LLAMA[@]/cpu/cuda}" --apply-layernorm-1p --train-iters 8 >"$MC_TMP/emu" 2>&1
    rc=$?
    a=$(losses "$MC_TMP/straight") b=$(losses "$MC_TMP/emu")
    check "--device cuda (emulated): the CPU run's losses within 1e-5 (rc=$rc; $b)" \
        bash -c "[ $rc -eq 0 ] && [ \$(wc -w <<<'$b') -eq 8 ] &&
                 paste <(tr ' ' '\n' <<<'$a') <(tr ' ' '\n' <<<'$b') |
                 awk '\$1 != \"\" { d = \$1 - \$2; if (d < 0) d = -d; if (d > 1e-5 * \$1) bad = 1 } END { exit bad }'"
else
    skip "--apply-layernorm-1p on the emulated device" "no emulated build (MC_EMU_BUILD='${MC_EMU_BUILD:-}'; make emu)"
fi
