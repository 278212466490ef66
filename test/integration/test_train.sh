#!/usr/bin/env bash
# End-to-end training on the CPU backend with mock data: the issue's command line, log format,
# falling loss, determinism, --train-samples, exits, --version and --help.
source "$(dirname "$0")/lib.sh"

MODEL=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64
       --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 8 --train-iters 50
       --lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 5 --min-lr 1e-4 --weight-decay 0.1
       --clip-grad 1.0 --vocab-size 512 --log-interval 10 --eval-interval 25
       --eval-iters 2 --seed 1234)
FLAGS=(--device cpu --mock-data "${MODEL[@]}")

"$MC_BIN" "${FLAGS[@]}" >"$MC_TMP/run1" 2>"$MC_TMP/err1"
check "issue command line trains (exit 0)" test $? -eq 0
check "no stderr output on a good run" test ! -s "$MC_TMP/err1"

# The log line of MEGATRON.md section 8, with the optional fields absent.
LINE='^ \[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}\] iteration +[0-9]+/ +50 \| consumed samples: +[0-9]+ \| elapsed time per iteration \(ms\): [0-9]+\.[0-9] \| learning rate: [0-9]\.[0-9]{6}E[-+][0-9]{2} \| global batch size: +8 \| lm loss: [0-9]\.[0-9]{6}E[-+][0-9]{2} \| loss scale: 1\.0 \| grad norm: [0-9]+\.[0-9]{3} \| number of skipped iterations: +0 \| number of nan iterations: +0 \|$'
n=$(grep -cE "$LINE" "$MC_TMP/run1")
check "log lines at iterations 1,10,20,30,40,50 in Megatron's format ($n)" test "$n" -eq 6
check "iteration field is {:8d}/{:8d}" grep -q 'iteration       10/      50 | consumed samples:           80 |' "$MC_TMP/run1"
# lr printed after the scheduler step: iteration 1 shows lr(8 samples) = 1e-3 * 8/40
check "learning rate at iteration 1 is lr(gbs) in warmup" grep -q 'iteration        1/      50 .*learning rate: 2.000000E-04 |' "$MC_TMP/run1"
check "validation at 25 and 50" test "$(grep -c '^ validation loss at iteration [0-9]* | lm loss value: [0-9.E+-]* | lm loss PPL: [0-9.E+-]* | $' "$MC_TMP/run1")" -eq 2
check "final validation and test" grep -q ' validation loss at iteration 50 on test set | lm loss value:' "$MC_TMP/run1"
check "padded vocab line" grep -q '^ > padded vocab (size: 512) with 0 dummy tokens (new size: 512)$' "$MC_TMP/run1"
check "device logged" grep -q '^> device: cpu' "$MC_TMP/run1"
check "memory plan logged" grep -q 'activations (1 microbatch in flight)' "$MC_TMP/run1"

loss() { grep -E "iteration +$1/" "$2" | sed -E 's/.*lm loss: ([0-9.E+-]+) .*/\1/'; }
l1=$(loss 1 "$MC_TMP/run1")
l50=$(loss 50 "$MC_TMP/run1")
check "loss falls ($l1 -> $l50)" awk -v a="$l1" -v b="$l50" 'BEGIN { exit !(b < 0.9 * a) }'

# Determinism: the same flags give bit-identical losses and grad norms.
"$MC_BIN" "${FLAGS[@]}" >"$MC_TMP/run2" 2>&1
strip() { grep -E 'lm loss|validation' "$1" | sed -E 's/^ \[[^]]*\]//; s/elapsed time per iteration \(ms\): [0-9.]+ \|//'; }
check "bit-identical losses run to run" diff <(strip "$MC_TMP/run1") <(strip "$MC_TMP/run2")

# Dropout changes the numbers (it is on by default) and is deterministic too.
"$MC_BIN" "${FLAGS[@]}" --hidden-dropout 0 --attention-dropout 0 >"$MC_TMP/nodrop" 2>&1
check "dropout takes effect" test "$(loss 10 "$MC_TMP/nodrop")" != "$(loss 10 "$MC_TMP/run1")"

# --eod-mask-loss drops eod positions from the loss, so training differs.
"$MC_BIN" "${FLAGS[@]}" --eod-mask-loss >"$MC_TMP/eod" 2>&1
check "--eod-mask-loss takes effect" test "$(loss 50 "$MC_TMP/eod")" != "$(loss 50 "$MC_TMP/run1")"

# --skip-train: evaluation only, at iteration 0.
"$MC_BIN" "${FLAGS[@]}" --skip-train >"$MC_TMP/skip" 2>&1
check "--skip-train evaluates without training" bash -c "grep -q 'validation loss at iteration 0 on validation set' '$MC_TMP/skip' && ! grep -q 'consumed samples' '$MC_TMP/skip'"

# Evaluation with its own batch sizes.
"$MC_BIN" "${FLAGS[@]}" --eval-micro-batch-size 4 --eval-global-batch-size 16 --train-iters 25 >"$MC_TMP/evalbs" 2>&1
check "--eval-micro-batch-size/--eval-global-batch-size" grep -q 'validation loss at iteration 25 on test set' "$MC_TMP/evalbs"

# --train-samples: Megatron sets train_iters = train_samples // gbs = 6 (48 samples).
S_FLAGS=("${FLAGS[@]/--train-iters/--train-samples}")
S_FLAGS=("${S_FLAGS[@]/--lr-warmup-iters/--lr-warmup-samples}")
"$MC_BIN" "${S_FLAGS[@]}" --log-interval 1 >"$MC_TMP/samples" 2>"$MC_TMP/samples.err"
check "--train-samples runs (exit 0)" test $? -eq 0
check "--train-samples 50 stops after 6 iterations (48 samples)" grep -q 'iteration        6/       6 | consumed samples:           48 |' "$MC_TMP/samples"

"$MC_BIN" "${FLAGS[@]}" --exit-interval 7 --log-interval 1 >"$MC_TMP/exit" 2>&1
rc=$?
check "--exit-interval exits 0" test $rc -eq 0
check "--exit-interval stops at iteration 7" grep -q 'exiting program at iteration 7' "$MC_TMP/exit"
check "--exit-interval: no iteration 8" bash -c "! grep -q 'iteration        8/' '$MC_TMP/exit'"

"$MC_BIN" "${FLAGS[@]}" --exit-duration-in-mins 0.000001 >"$MC_TMP/dur" 2>&1
check "--exit-duration-in-mins stops after one iteration" grep -q 'exiting program after' "$MC_TMP/dur"

"$MC_BIN" "${FLAGS[@]}" --log-throughput --log-params-norm --log-num-zeros-in-grad --train-iters 2 --lr-warmup-iters 1 --log-interval 1 >"$MC_TMP/opt" 2>&1
check "optional log fields in order" grep -qE 'elapsed time per iteration \(ms\): [0-9.]+ \| throughput per GPU \(TFLOP/s/GPU\): [0-9.]+ \| learning rate: .* \| grad norm: [0-9.]+ \| num zeros: [0-9]+\.0 \| params norm: [0-9.]+ \| number of skipped' "$MC_TMP/opt"

"$MC_BIN" --version >"$MC_TMP/ver" 2>&1
check "--version names the build" grep -qE '^megatron-c [0-9]+\.[0-9]+\.[0-9]+ .*' "$MC_TMP/ver"
check "--version says CUDA or CPU only" grep -qE 'built with: (CUDA|CPU only)' "$MC_TMP/ver"
"$MC_BIN" --help >"$MC_TMP/help" 2>&1
check "--help exits 0 and lists flags with defaults" grep -q -- '--num-layers' "$MC_TMP/help"

# docs/FLAGS.md is generated from the flag table and must be current.
"$MC_BIN" --flags-markdown >"$MC_TMP/flags.md" 2>&1
check "docs/FLAGS.md matches the flag table (make docs)" diff -q "$MC_TMP/flags.md" "$(dirname "$0")/../../docs/FLAGS.md"

# Bad input: one line, exit 2, nothing on stdout.
expect_user_error "unknown flag suggests the closest" 'did you mean --hidden-size' "${FLAGS[@]}" --hiden-size 64
expect_user_error "non-numeric value" 'num-layers' "${FLAGS[@]}" --num-layers two
expect_user_error "gbs divisibility" 'global batch size \(9\) is not divisible by micro batch size \(2\) times data parallel size \(1\)' "${FLAGS[@]}" --global-batch-size 9
expect_user_error "not implemented flag" 'not implemented yet' "${FLAGS[@]}" --fp32-residual-connection
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    skip "--device cuda without a GPU is refused" "a GPU is visible here (scripts/gpu-test.sh trains on it)"
else
    expect_user_error "--device cuda without a GPU is refused" 'cuda' "${FLAGS[@]}" --device cuda
fi
expect_user_error "no data" 'mock-data' --device cpu "${MODEL[@]}"
"$MC_BIN" --device cpu --mock-data --vocab-size 50257 --num-layers 48 --hidden-size 8192 --num-attention-heads 64 \
  --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 8 --train-iters 1 --lr 1e-4 >"$MC_TMP/big" 2>"$MC_TMP/big.err"
rc=$?
check "a plan larger than memory: exit 2 with one line naming the need" bash -c "[ $rc -eq 2 ] && [ \$(wc -l <'$MC_TMP/big.err') -eq 1 ] && grep -q 'memory plan needs' '$MC_TMP/big.err' && grep -q 'activations' '$MC_TMP/big'"

# The arguments block names Megatron's attributes: a store_false flag under its dest with the
# attribute's value, a field two flags fill once.
"$MC_BIN" "${FLAGS[@]}" --train-iters 6 --no-log-loss-scale-to-tensorboard --disable-bias-linear \
    >"$MC_TMP/argsblock" 2>&1
check "arguments block: log_loss_scale_to_tensorboard False, add_bias_linear False, once each" \
    bash -c "grep -qE '^  log_loss_scale_to_tensorboard \.+ False$' '$MC_TMP/argsblock' &&
             grep -qE '^  add_bias_linear \.+ False$' '$MC_TMP/argsblock' &&
             [ \$(grep -cE '^  add_bias_linear ' '$MC_TMP/argsblock') -eq 1 ] &&
             ! grep -qE '^  (no|disable)_(log_loss_scale|bias_linear)' '$MC_TMP/argsblock'"
