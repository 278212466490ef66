#!/usr/bin/env bash
# The kernel benchmark (bench/bench_kernels, bench/bench-kernels.sh): without a CUDA
# build or a GPU it says so in one line and exits 2; with one, a --quick run times every op.
set -u
cd "$(dirname "$0")/../.."
. test/integration/lib.sh
bench="$MC_BUILD/bench/bench_kernels"
[ -x "$bench" ] || { not_ok "bench_kernels is built ($bench)"; exit 0; }

"$bench" --quick >"$MC_TMP/out" 2>"$MC_TMP/err"
rc=$?
if grep -qE 'no CUDA device visible|has no CUDA backend' "$MC_TMP/err"; then
    check "bench_kernels without a GPU: one line, exit 2" \
        test "$rc" -eq 2 -a "$(wc -l <"$MC_TMP/err")" -eq 1 -a ! -s "$MC_TMP/out"
    skip "bench_kernels times every op" "no GPU here"
else
    check "bench_kernels --quick runs (rc $rc: $(head -c 300 "$MC_TMP/err"))" test "$rc" -eq 0
    missing=""
    for op in add add_inplace scale gelu_forward gelu_backward swiglu_forward swiglu_backward dropout_forward \
        layernorm_forward add_layernorm_forward layernorm_backward_acc rmsnorm_forward add_rmsnorm_forward \
        rmsnorm_backward_acc rope embedding_forward embedding_backward ce_max ce_sums ce_backward sumsq \
        count_zeros has_nonfinite linear_forward linear_backward linear_gelu_forward linear_backward_gelu adam_step \
        gemm convert qk_norm_forward qk_norm_backward; do
        grep -q "^$op" "$MC_TMP/out" || missing="$missing $op"
    done
    check "bench_kernels times every op${missing:+ (missing:$missing)}" test -z "$missing"
fi
"$bench" --bogus >/dev/null 2>"$MC_TMP/err"
rc=$?
check "bench_kernels rejects an unknown argument with exit 2" test "$rc" -eq 2 -a "$(wc -l <"$MC_TMP/err")" -eq 1
