#!/usr/bin/env bash
# Mixed precision on the CPU backend, where 16-bit storage runs the same
# logic as on a GPU (kernels/cpu/precision.c):
#  - --bf16 and --fp16: 16-bit parameters and activations, fp32 master params (the memory plan
#    says so), fp32 gradients for bf16 and for fp16 with --accumulate-allreduce-grads-in-fp32;
#  - the loss curves of bf16, and of fp16 with a constant --loss-scale, track fp32's within 1%
#    (a 16-bit number carries 8 or 11 significant bits, 2^-9 = 0.2% relative rounding per
#    stored value; the measured gap over these 24 iterations is ~1e-4);
#  - fp16's dynamic loss scaler: starting from 2^32 the first steps overflow and are skipped
#    (no grad norm, no learning-rate step, counted in "number of skipped iterations"), and the
#    logged scale follows Megatron's DynamicGradScaler rule step by step (hysteresis, backoff,
#    growth after --loss-scale-window good steps);
#  - overflow under a loss scaler skips iterations instead of stopping the run, even with
#    --check-for-nan-in-loss-and-grad on (a constant scaler keeps it on); a NaN in bf16 stops it
#    with one line naming the iteration and rank;
#  - layouts in bf16: pp 2 with virtual stages gives the single-rank numbers exactly when nothing
#    is summed in another order (untied embeddings); tied pp 2 x vpp 2, tp 2 with sequence
#    parallelism and dp 2 with the distributed optimizer track it within 1e-3 (their sums run in
#    another order, and a 16-bit rounding can then flip).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

FLAGS=(--device cpu --mock-data --vocab-size 256 --num-layers 4 --hidden-size 64 --num-attention-heads 4
       --seq-length 32 --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8
       --train-iters 24 --lr 3e-3 --lr-decay-style cosine --lr-warmup-iters 3 --min-lr 3e-4
       --weight-decay 0.1 --clip-grad 1.0 --log-interval 1 --eval-interval 12 --eval-iters 2
       --seed 1234 --log-params-norm)

run() { # name args...: one rank; the log in $MC_TMP/name
    local name=$1
    shift
    "$MC_BIN" "${FLAGS[@]}" "$@" >"$MC_TMP/$name" 2>"$MC_TMP/$name.err"
    local rc=$?
    if [ $rc -ne 0 ]; then
        not_ok "$name: exits 0 (rc=$rc: $(tail -c 300 "$MC_TMP/$name.err"))"
        return 1
    fi
    ok "$name: exits 0"
}

# Logged lm losses of two runs agree within a relative tolerance, line by line (24 iterations).
losses() { sed -nE 's/.*\| lm loss: ([0-9.E+-]+) \|.*/\1/p' "$1"; }
track() { # ref run tol
    paste -d' ' <(losses "$1") <(losses "$2") | awk -v tol="$3" '
        { n++; d = $1 - $2; if (d < 0) d = -d; if (d > tol * $1) bad++ }
        END { exit !(n == 24 && bad == 0) }'
}

run fp32
run bf16 --bf16
run fp16-const --fp16 --loss-scale 1024
run fp16-dynamic --fp16 --loss-scale-window 4
run fp16-fp32grads --fp16 --loss-scale 1024 --accumulate-allreduce-grads-in-fp32

# ---- what is stored in which type ----
check "bf16: the memory plan shows bf16 parameters, fp32 gradients and fp32 master params" \
    bash -c "grep -q 'parameters (bf16)' '$MC_TMP/bf16' && grep -q 'gradients (fp32)' '$MC_TMP/bf16' &&
             grep -q 'Adam m, v, fp32 params)' '$MC_TMP/bf16'"
check "fp16: fp16 gradients and fp32 main grads beside the master params" \
    bash -c "grep -q 'parameters (fp16)' '$MC_TMP/fp16-const' && grep -q 'gradients (fp16)' '$MC_TMP/fp16-const' &&
             grep -q 'fp32 params, fp32 grads)' '$MC_TMP/fp16-const'"
check "fp16 --accumulate-allreduce-grads-in-fp32: fp32 gradients" \
    bash -c "grep -q 'gradients (fp32)' '$MC_TMP/fp16-fp32grads' && grep -q 'parameters (fp16)' '$MC_TMP/fp16-fp32grads'"
check "fp32: the plan is all fp32 with no master copies" \
    bash -c "grep -q 'parameters (fp32)' '$MC_TMP/fp32' && ! grep -q 'fp32 params)' '$MC_TMP/fp32'"

# ---- accuracy against fp32 ----
check "bf16 tracks the fp32 loss curve within 1% at every iteration" track "$MC_TMP/fp32" "$MC_TMP/bf16" 0.01
check "fp16 with --loss-scale 1024 tracks fp32 within 1%" track "$MC_TMP/fp32" "$MC_TMP/fp16-const" 0.01
check "fp16 with fp32 gradient accumulation tracks fp32 within 1%" track "$MC_TMP/fp32" "$MC_TMP/fp16-fp32grads" 0.01
check "bf16 is not fp32 (16-bit storage changes the numbers)" bash -c "! diff -q <(sed -nE 's/.*lm loss: ([^ ]+).*/\1/p' '$MC_TMP/fp32') <(sed -nE 's/.*lm loss: ([^ ]+).*/\1/p' '$MC_TMP/bf16') >/dev/null"
check "bf16 and constant-scale fp16 log loss scale 1.0 and 1024.0 and skip nothing" \
    bash -c "[ \$(grep -c 'iteration .*loss scale: 1.0 | grad norm: .*skipped iterations:   0 |' '$MC_TMP/bf16') -eq 24 ] &&
             [ \$(grep -c 'iteration .*loss scale: 1024.0 | grad norm: .*skipped iterations:   0 |' '$MC_TMP/fp16-const') -eq 24 ]"

# ---- the dynamic loss scaler ----
# Per logged iteration: skipped (0/1), loss scale, has a grad norm, learning rate, consumed samples.
scaler_lines() {
    awk '/ iteration +[0-9]+\// {
        c = $0; sub(/.*consumed samples: +/, "", c); sub(/ .*/, "", c)
        lr = $0; sub(/.*learning rate: /, "", lr); sub(/ .*/, "", lr)
        sc = $0; sub(/.*loss scale: /, "", sc); sub(/ .*/, "", sc)
        sk = $0; sub(/.*number of skipped iterations: +/, "", sk); sub(/ .*/, "", sk)
        print sk, sc, (index($0, "grad norm:") > 0), lr, c }' "$1"
}
# DynamicGradScaler.update from 2^32 with hysteresis 2 and window 4, against every logged line.
follows_rule() {
    scaler_lines "$1" | awk '
        BEGIN { scale = 4294967296; hyst = 2; growth = 0; prev_lr = ""; prev_c = 0 }
        {
            n++
            if (n == 1) first = $1
            if (n == 2) $1 -= first # the second line also counts the first iteration (main)
            if ($1 == 1) { growth = 0; hyst--; if (hyst <= 0) { scale /= 2; if (scale < 1) scale = 1 }; skipped++
                           if ($3 != 0) bad++ ; if (prev_lr != "" && $4 != prev_lr) bad++ }
            else { growth++; if (growth == 4) { growth = 0; hyst = 2; scale *= 2 }; applied++; if ($3 != 1) bad++ }
            if ($2 + 0 != scale) bad++
            if ($5 != prev_c + 8) bad++
            prev_lr = $4; prev_c = $5
        }
        END { exit !(n == 24 && bad == 0 && skipped >= 2 && applied >= 6) }'
}
check "fp16 dynamic scaling: iterations overflow at 2^32 and are skipped, then train" \
    bash -c "grep -q 'iteration        1/      24 .*loss scale: 4294967296.0 | params norm: [0-9.]* | number of skipped iterations:   1 |' '$MC_TMP/fp16-dynamic' &&
             grep -q 'iteration       2[0-4]/.*grad norm' '$MC_TMP/fp16-dynamic'"
check "fp16 dynamic scaling follows Megatron's rule at every iteration (skips without grad norm or lr step, hysteresis, growth every 4 good steps)" \
    follows_rule "$MC_TMP/fp16-dynamic"
learns() { # the loss of the last applied iteration is below that of the first one
    sed -nE 's/.*\| lm loss: ([0-9.E+-]+) \|.*grad norm.*/\1/p' "$1" | awk 'NR == 1 { a = $1 } { b = $1 }
        END { exit !(NR >= 2 && b < 0.95 * a) }'
}
check "fp16 dynamic scaling still learns (the last applied loss is 5% below the first)" learns "$MC_TMP/fp16-dynamic"

# ---- the lm loss of intervals with skipped iterations (Megatron main's training_log) ----
# total_loss_dict sums the loss of applied iterations only; its 'lm loss' key exists from the
# first applied iteration of the run on, and the line prints total / max(1, applied) when
# >= 0: no loss at all before any step was applied, 0 in a later interval that skipped every
# step. The first iteration's line resets nothing, so the next line counts it again.
per_iter() { # "iteration skipped loss" per logged line ("-": no lm loss field)
    awk '/ iteration +[0-9]+\// {
        match($0, / iteration +[0-9]+\//); it = substr($0, RSTART + 11, RLENGTH - 12) + 0
        sk = $0; sub(/.*number of skipped iterations: +/, "", sk); sub(/ .*/, "", sk)
        l = "-"; if (index($0, "| lm loss: ")) { l = $0; sub(/.*\| lm loss: /, "", l); sub(/ .*/, "", l) }
        print it, sk, l }' "$1"
}
no_loss_until_applied() { # every line before the first applied step has no lm loss; later
    per_iter "$1" | awk '{ n++ } n <= 2 && $2 != n { bad++ } # lines 1 and 2: 1 and 2 skipped
        $2 == 0 { applied = 1 }
        !applied && $3 != "-" { bad++ }
        !applied { before++ }
        applied && $2 == 0 && $3 == "-" { bad++ }
        applied && $2 == 1 && $3 != "0.000000E+00" { bad++ }
        END { exit !(n == 24 && before >= 3 && applied && bad == 0) }'
}
check "fp16: no lm loss before the first applied step, then 0.000000E+00 on a skipped one (log interval 1)" \
    no_loss_until_applied "$MC_TMP/fp16-dynamic"
run fp16-interval4 --fp16 --loss-scale-window 4 --log-interval 4
# Each --log-interval 4 line against the iterations of the --log-interval 1 run (the same
# steps): its skipped count, and its loss the mean over the applied iterations in its interval
# (iterations 1..4 for the line at 4), absent before the first applied one.
intervals_match() { # interval-1 run, interval-4 run
    awk 'NR == FNR { sk[$1] = $2; l[$1] = $3; next }
        FNR == 1 { if (sk[1] != 1 || sk[2] != 2) bad++; sk[2] = 1 } # both skipped at 2^32
        { k = $1; n++; nsk = 0; nadv = 0; sum = 0
          for (i = prev + 1; i <= k; i++) {
              nsk += sk[i]
              if (sk[i] == 0) { nadv++; sum += l[i]; have = 1 }
          }
          if ($2 != nsk) bad++
          if (!have) { if ($3 != "-") bad++ }
          else if (nadv == 0) { if ($3 != "0.000000E+00") bad++ }
          else { want = sum / nadv; d = $3 - want; if (d < 0) d = -d; if (d > 2e-6 * want) bad++; mixed += nsk > 0 }
          if (k > 1) prev = k }
        END { exit !(n == 7 && bad == 0 && mixed >= 1) }' <(per_iter "$1") <(per_iter "$2")
}
check "fp16 --log-interval 4: each line's skipped count and the mean loss of its applied iterations" \
    intervals_match "$MC_TMP/fp16-dynamic" "$MC_TMP/fp16-interval4"

# ---- overflow is the scaler's signal, NaN outside it stops the run ----
run fp16-overflow --fp16 --loss-scale 1073741824 --train-iters 6 --eval-iters 0
check "fp16 with a constant scale that always overflows: every iteration is skipped, no lm loss, the run ends normally" \
    bash -c "[ \$(grep -c 'number of skipped iterations:   1 |' '$MC_TMP/fp16-overflow') -eq 5 ] &&
             grep -q 'iteration        2/.* number of skipped iterations:   2 |' '$MC_TMP/fp16-overflow' &&
             ! grep -q 'grad norm' '$MC_TMP/fp16-overflow' && ! grep -q 'lm loss: ' '$MC_TMP/fp16-overflow'"
"$MC_BIN" "${FLAGS[@]}" --bf16 --lr 1e37 --lr-warmup-iters 0 --clip-grad 0 --train-iters 6 >"$MC_TMP/nan" 2>"$MC_TMP/nan.err"
rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l <"$MC_TMP/nan.err")" -eq 1 ] &&
    grep -qE 'rank 0: error: found NaN (or Inf )?in .* at iteration [0-9]+' "$MC_TMP/nan.err"; then
    ok "bf16: a NaN stops the run with one line naming the iteration and the rank"
else
    not_ok "bf16: a NaN stops the run with one line naming the iteration and the rank (rc=$rc: $(head -c 300 "$MC_TMP/nan.err"))"
fi

# ---- parallel layouts in bf16 (single-rank reference with the same flags) ----
if have_mpirun; then
    FLAGS+=(--bf16)
    cp "$MC_TMP/bf16" "$MC_TMP/ref"
    # Untied, a pipeline changes no sum: the 16-bit activations cross the stages unchanged.
    if run untied-ref --untie-embeddings-and-output-weights; then
        layout_equals "bf16 pp 2 x vpp 2 (untied)" "$MC_TMP/untied-ref" 2 --untie-embeddings-and-output-weights \
            --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1
    fi
    # Otherwise sums run in another order (tied embedding gradients summed over stages, tp
    # partial sums, dp reductions) and a 16-bit rounding can then flip: within 1e-3.
    near() { # ref run
        paste -d' ' <(log_numbers "$1") <(log_numbers "$2") | awk '
            function rel(a, b) { d = a - b; if (d < 0) d = -d; return d / (a < 0 ? -a : a) }
            NF != 6 { bad++; next } $1 ~ /^val/ { if (rel($2, $5) > 1e-3) bad++; n++; next }
            { n++; if (rel($1, $4) > 1e-3 || rel($2, $5) > 2e-2 || rel($3, $6) > 1e-3) bad++ }
            END { exit !(n >= 26 && bad == 0) }'
    }
    for L in "pp 2 x vpp 2|--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1" \
             "tp 2 with sequence parallelism|--tensor-model-parallel-size 2 --sequence-parallel" \
             "dp 2 with the distributed optimizer|--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather"; do
        name=${L%%|*}
        read -ra extra <<<"${L#*|}"
        if mpirun_mc 2 "${FLAGS[@]}" "${extra[@]}" >"$MC_TMP/lay" 2>"$MC_TMP/lay.err"; then
            check "bf16 $name tracks the single-rank run within 1e-3" near "$MC_TMP/ref" "$MC_TMP/lay"
        else
            not_ok "bf16 $name exits 0 ($(tail -c 300 "$MC_TMP/lay.err"))"
        fi
    done
else
    skip "bf16 layouts" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
fi
