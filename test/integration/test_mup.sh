#!/usr/bin/env bash
# --use-mup and --mup-* (Maximal Update Parametrization, as Megatron-LM main: not in
# core_v0.15.0). The numbers themselves are unit-tested (test/unit/optim/test_mup.c); here the
# end-to-end effects, on a tiny model (2 layers, hidden 32, 2 heads of 16, seq 32, vocab 256):
# - width_mult 1 (--mup-base-hidden-size = --hidden-size) changes only the softmax scale: with
#   --mup-attn-scale-power 0.5 (1/sqrt(16) = 0.25, MuP's power 1 gives 1/16) every logged
#   number equals the run without MuP, and with MuP's default power 1 the losses differ;
# - width_mult 2 (base 16): with lr 0 the logged params norm (the init, never updated) is that
#   of a run without MuP given --init-method-std 0.02/sqrt(2) and --embedding-init-method-std
#   0.02: the hidden weights start at std/sqrt(width_mult), linear_proj and linear_fc2 at
#   std/(sqrt(2L) sqrt(width_mult)), the embeddings unscaled;
# - Megatron's refusals, one line each.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

FLAGS=(--device cpu --mock-data --vocab-size 256 --num-layers 2 --hidden-size 32
       --num-attention-heads 2 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 2
       --global-batch-size 2 --train-iters 3 --lr 1e-3 --log-interval 1 --eval-iters 0
       --seed 1234 --log-params-norm --make-vocab-size-divisible-by 128)
run() { # out args...
    local out=$1
    shift
    "$MC_BIN" "${FLAGS[@]}" "$@" >"$MC_TMP/$out" 2>"$MC_TMP/$out.err"
}

run base && run w1 --use-mup --mup-base-hidden-size 32 --mup-attn-scale-power 0.5 &&
    run w1mup --use-mup
check "runs with and without --use-mup exit 0" test $? -eq 0
check "width_mult 1 with the standard softmax scale: every logged number as without MuP" \
    test -n "$(log_numbers "$MC_TMP/base")" -a "$(log_numbers "$MC_TMP/w1")" = "$(log_numbers "$MC_TMP/base")"
check "width_mult 1 with MuP's 1/d_head softmax scale: the losses differ" \
    test "$(log_numbers "$MC_TMP/w1mup" | head -1 | cut -d' ' -f1)" != "$(log_numbers "$MC_TMP/base" | head -1 | cut -d' ' -f1)"

run w2 --use-mup --mup-base-hidden-size 16 --lr 0 --min-lr 0 &&
    run w2ref --init-method-std "$(python3 -c 'import math; print(repr(0.02 / math.sqrt(2.0)))')" \
        --embedding-init-method-std 0.02 --lr 0 --min-lr 0
check "width_mult 2 runs exit 0" test $? -eq 0
pnorm() { log_numbers "$1" | cut -d' ' -f3 | sort -u; }
check "width_mult 2: the init's params norm is that of std/sqrt(2) hidden weights, embeddings at std" \
    test -n "$(pnorm "$MC_TMP/w2")" -a "$(pnorm "$MC_TMP/w2")" = "$(pnorm "$MC_TMP/w2ref")"
run w2plain --use-mup --mup-base-hidden-size 32 --lr 0 --min-lr 0
check "width_mult 1's init differs (the check can fail)" \
    test "$(pnorm "$MC_TMP/w2plain")" != "$(pnorm "$MC_TMP/w2")"

run bad --use-mup --mup-base-hidden-size 0
one_error_line "--mup-base-hidden-size 0: one line" "--mup-base-hidden-size must be positive" $? "$MC_TMP/bad.err"
run bad2 --use-mup --mup-base-hidden-size 16 --save "$MC_TMP/ck" --save-interval 2
one_error_line "width_mult 2 with --save: not implemented yet, one line" \
    "--use-mup .*--save/--load is not implemented yet" $? "$MC_TMP/bad2.err"

# width_mult 1 saves and resumes (its optimizer has Megatron's usual groups); the checkpoint's
# args carry use_mup, and export-hf refuses MuP's softmax scale by name.
run first --use-mup --save "$MC_TMP/ck1" --save-interval 2 --exit-interval 2 &&
    run second --use-mup --load "$MC_TMP/ck1"
check "width_mult 1: save at 2 and --load exit 0" test $? -eq 0
check "width_mult 1: --load continues the uninterrupted run's loss at iteration 3" \
    test "$(log_numbers "$MC_TMP/second" | tail -1 | cut -d' ' -f1)" = "$(log_numbers "$MC_TMP/w1mup" | tail -1 | cut -d' ' -f1)"
TOOL=${MC_BUILD:-build/rel}/test/tools/ckpt_tool
if [ -x "$TOOL" ]; then
    "$TOOL" dump "$MC_TMP/ck1/iter_0000002/mp_rank_00/model_optim_rng.pt" >"$MC_TMP/ck1.json"
    python3 - "$MC_TMP/ck1.json" >"$MC_TMP/args.out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = dict(dict((k, v) for k, v in d["dict"])["args"]["state"]["dict"])
print(sorted((k, s[k]) for k in s if k.startswith("mup_") or k == "use_mup"))
PY
    check "the checkpoint's args store the MuP flags as given (base hidden size None)" \
        grep -qF "[('mup_attn_scale_power', 1), ('mup_base_head_dim', None), ('mup_base_hidden_size', None), ('mup_embedding_mult', 1), ('mup_output_mult', 1), ('mup_width_mult', 1), ('use_mup', True)]" "$MC_TMP/args.out"
else
    skip "the checkpoint's args" "$TOOL is not built (make tests)"
fi
"$MC_BIN" export-hf --load "$MC_TMP/ck1" --output "$MC_TMP/hf" >"$MC_TMP/hf.out" 2>"$MC_TMP/hf.err"
one_error_line "export-hf of a MuP model: one line" "--use-mup: GPT2LMHeadModel and LlamaForCausalLM" \
    $? "$MC_TMP/hf.err"

# width_mult 2 training (hidden lr and eps / 2, logits / 2, embeddings x 2): the same numbers under
# tp 2 with sequence parallelism (the multipliers on this rank's rows and vocabulary slice), and
# on the emulated CUDA device (its attention with MuP's softmax scale).
W2=(--use-mup --mup-base-hidden-size 16 --mup-embedding-mult 2 --train-iters 4)
run w2train "${W2[@]}"
check "width_mult 2 trains (exit 0)" test $? -eq 0
if have_mpirun; then
    mpirun_mc 2 "${FLAGS[@]}" "${W2[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
        >"$MC_TMP/tp2" 2>"$MC_TMP/tp2.err"
    check "width_mult 2 under tp 2 + sp: the single rank's numbers" \
        same_log_numbers "$MC_TMP/w2train" "$MC_TMP/tp2" 4
    mpirun_mc 2 "${FLAGS[@]}" "${W2[@]}" --context-parallel-size 2 >"$MC_TMP/cp2" 2>"$MC_TMP/cp2.err"
    check "width_mult 2 under cp 2 (the ring's blocks with MuP's scale): the single rank's numbers" \
        same_log_numbers "$MC_TMP/w2train" "$MC_TMP/cp2" 4
else
    skip "width_mult 2 under tp 2" "mpirun is not installed"
fi
if [ -n "${MC_EMU_BUILD:-}" ] && [ -x "$MC_EMU_BUILD/megatron-c" ]; then
    "$MC_EMU_BUILD/megatron-c" "${FLAGS[@]}" "${W2[@]}" --device cuda >"$MC_TMP/emu" 2>"$MC_TMP/emu.err"
    check "width_mult 2 on the emulated device: the CPU's numbers" \
        same_log_numbers "$MC_TMP/w2train" "$MC_TMP/emu" 4
    # cuDNN's fused attention (bf16) takes the scale as a by-value scalar: with weights large
    # enough for the scale to matter (1/16 against 1/4 moves the first loss by about 2%), its
    # first loss is the CPU's within bf16's 1e-3, and not that of the standard scale
    B16=(--bf16 --attention-dropout 0 --hidden-dropout 0 --init-method-std 0.5 --train-iters 1)
    "$MC_EMU_BUILD/megatron-c" "${FLAGS[@]}" "${W2[@]}" "${B16[@]}" --device cuda \
        >"$MC_TMP/cudnn" 2>"$MC_TMP/cudnn.err"
    run cpu16 "${W2[@]}" "${B16[@]}" && run cpu16std "${W2[@]}" "${B16[@]}" --mup-attn-scale-power 0.5
    l1() { log_numbers "$1" | head -1 | cut -d' ' -f1; }
    near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = (a - b) / b; exit !(d < t && -d < t) }'; }
    cudnn_close() { grep -q "cuDNN" "$MC_TMP/cudnn" && near "$(l1 "$MC_TMP/cudnn")" "$(l1 "$MC_TMP/cpu16")" 1e-3; }
    std_far() { ! near "$(l1 "$MC_TMP/cudnn")" "$(l1 "$MC_TMP/cpu16std")" 1e-2; }
    check "cuDNN's attention (bf16) with MuP's softmax scale: the CPU's first loss within 1e-3" cudnn_close
    check "... and not the standard scale's (the check can fail)" std_far
else
    skip "width_mult 2 on the emulated device" "no emulated build (MC_EMU_BUILD)"
fi
