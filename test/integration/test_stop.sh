#!/usr/bin/env bash
# Stopping well:
#  - --exit-signal-handler: SIGTERM sent during training to one rank or to every rank, on one
#    rank, under mpirun and under srun --mpi=pmix: the job finishes the iteration, saves, prints
#    Megatron's exit line and exits 0; the checkpoint resumes with the losses of an uninterrupted
#    run; --exit-signal picks another signal; without the flag SIGTERM kills as usual;
#  - --exit-interval and --exit-duration-in-mins save before exiting;
#  - --async-save: files equal to a synchronous save's (but for the async_save argument), the
#    same resumed losses, iterations completing while a save is in flight, the next save and the
#    exit waiting for the write, kill -9 during an asynchronous save leaving the previous
#    checkpoint loadable, and a failed background write ending the job with one line naming the
#    file (as a failed synchronous one does).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

# A constant learning rate and a long --train-iters: runs that stop at different iterations
# follow the same schedule and data order, so an interrupted run and its resumption can be
# compared with an uninterrupted one.
FLAGS=(--device cpu --mock-data --vocab-size 256 --num-layers 2 --hidden-size 32
       --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 2
       --global-batch-size 8 --train-iters 100000 --lr 1e-3 --lr-decay-style constant
       --weight-decay 0.1 --log-interval 1 --eval-iters 0 --seed 1234 --hidden-dropout 0.1
       --attention-dropout 0.1 --log-params-norm)

# The log lines of iterations first..last without the timestamp and the elapsed time.
iter_lines() { # file first last
    awk -v a="$2" -v b="$3" '
        match($0, /iteration +[0-9]+\//) {
            n = substr($0, RSTART, RLENGTH); gsub(/[^0-9]/, "", n); n += 0
            if (n >= a && n <= b) {
                sub(/^ \[[^]]*\]/, ""); sub(/ elapsed time per iteration \(ms\): [0-9.]+ \|/, ""); print
            }
        }' "$1"
}
# same_iters REF RUN first last: the same lines, one per iteration, RUN resumed at first.
# Megatron main logs the first iteration of a run without resetting the interval (training_log's
# should_reset = not is_first_iteration), so a resumed run's second line also counts its first
# iteration: that line is left out.
resumed_iter_lines() { iter_lines "$1" "$2" "$3" | awk -v skip="$(($2 + 1))" '!index($0, " iteration " sprintf("%8d", skip) "/")'; }
same_iters() {
    local want=$(($4 - $3))
    diff <(resumed_iter_lines "$1" "$3" "$4") <(resumed_iter_lines "$2" "$3" "$4") >"$MC_TMP/iters.diff" &&
        [ "$(resumed_iter_lines "$2" "$3" "$4" | wc -l)" -eq "$want" ]
}
wait_line() { # file pattern seconds: until the file has a line matching pattern (grep -E)
    local until=$((SECONDS + $3))
    until grep -qE -- "$2" "$1" 2>/dev/null; do
        [ $SECONDS -ge $until ] && return 1
        sleep 0.05
    done
}
tracker() { cat "$1/latest_checkpointed_iteration.txt" 2>/dev/null; }
# launch NP|srun:NP args...: megatron-c on NP ranks (directly for one), in the foreground
launch() {
    local how=$1
    shift
    case $how in
        1) "$MC_BIN" "$@" ;;
        srun:*) "${SRUN[@]}" -n "${how#srun:}" "$MC_BIN" "$@" ;;
        *) "${MPIRUN[@]}" -x MC_FAULT_JOB -np "$how" "$MC_BIN" "$@" ;;
    esac
}

# ---- --exit-signal-handler ----
# signal_case NAME HOW TARGETS DIR FLAGS...: trains in the background with --save DIR and sends
# SIGTERM after iteration 3 to the ranks in TARGETS ("1", "0 1 2 3"); expects exit 0, Megatron's
# exit line, the checkpoint of the iteration it stopped at, and that resuming it for 4 iterations
# gives the lines of a run that was never interrupted.
signal_case() {
    local name=$1 how=$2 targets=$3 dir=$4
    shift 4
    export MC_FAULT_JOB=$$.$RANDOM
    local args=("${FLAGS[@]}" --exit-signal-handler --save "$dir" --save-interval 1000 "$@")
    # emptied here, not only by the job's redirection: wait_line may read the file before the
    # job's shell truncates it, and the last case's "iteration 3" would end the wait at once (the
    # signal then comes before the handler is installed)
    : >"$MC_TMP/sig.out"
    if [ "$how" = 1 ]; then # the process itself, to signal it
        "$MC_BIN" "${args[@]}" >"$MC_TMP/sig.out" 2>"$MC_TMP/sig.err" &
    else
        launch "$how" "${args[@]}" >"$MC_TMP/sig.out" 2>"$MC_TMP/sig.err" &
    fi
    local job=$! r
    if ! wait_line "$MC_TMP/sig.out" 'iteration +3/' 120; then
        not_ok "$name: training started (stderr: $(head -c 300 "$MC_TMP/sig.err"))"
        kill -9 "$job" 2>/dev/null
        wait "$job" 2>/dev/null
        return
    fi
    local pids=()
    for r in $targets; do # every pid first: the first signal ends the job within an iteration
        if [ "$how" = 1 ]; then pids+=("$job"); else pids+=("$(rank_pid "$MC_FAULT_JOB" "$r")"); fi
    done
    kill -TERM "${pids[@]}"
    wait "$job"
    local rc=$? it
    it=$(tracker "$dir")
    if [ $rc -eq 0 ] && [ -n "$it" ] && [ "$it" -ge 3 ] &&
        grep -qE "successfully saved checkpoint from iteration +$it to $dir" "$MC_TMP/sig.out" &&
        grep -qE '^\[exiting program after receiving SIGTERM\.\] datetime: ' "$MC_TMP/sig.out" &&
        ! grep -qE "iteration +$((it + 1))/" "$MC_TMP/sig.out" && [ "$(grep -c '^megatron-c:' "$MC_TMP/sig.err")" -eq 0 ]; then
        ok "$name: saves iteration $it, prints the exit line and exits 0"
    else
        not_ok "$name: saves, prints the exit line and exits 0 (rc=$rc, tracker '$it', stderr: $(head -c 400 "$MC_TMP/sig.err"), out: $(tail -n 3 "$MC_TMP/sig.out" | head -c 400))"
        return
    fi
    local stop=$((it + 4))
    launch "$how" "${FLAGS[@]}" "$@" --load "$dir" --exit-interval "$stop" >"$MC_TMP/sig.resumed" 2>&1
    launch "$how" "${FLAGS[@]}" "$@" --exit-interval "$stop" >"$MC_TMP/sig.ref" 2>&1
    if same_iters "$MC_TMP/sig.ref" "$MC_TMP/sig.resumed" $((it + 1)) "$stop"; then
        ok "$name: the checkpoint resumes with the losses of an uninterrupted run"
    else
        not_ok "$name: the checkpoint resumes with the losses of an uninterrupted run ($(head -c 500 "$MC_TMP/iters.diff"); $(tail -c 300 "$MC_TMP/sig.resumed"))"
    fi
}

signal_case "one rank, SIGTERM" 1 0 "$MC_TMP/sig1"
if have_mpirun; then
    signal_case "mpirun tp 2 x pp 2, SIGTERM to rank 2 only" 4 2 "$MC_TMP/sig4" \
        --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
    # Slurm signals every task; here with the distributed optimizer and an asynchronous save
    # every 2 iterations, so the exit also waits for a write in flight
    signal_case "mpirun dp 2 x tp 2, SIGTERM to every rank, --async-save" 4 "0 1 2 3" "$MC_TMP/sig4all" \
        --tensor-model-parallel-size 2 --use-distributed-optimizer --async-save --save-interval 2
else
    skip "--exit-signal-handler under mpirun" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
fi
if have_srun; then
    signal_case "srun --mpi=pmix dp 2, SIGTERM to rank 1 only" srun:2 1 "$MC_TMP/sigsrun"
else
    skip "--exit-signal-handler under srun" "no Slurm here ($(srun_why))"
fi

# --exit-signal: another signal; without the flag SIGTERM keeps its default action
"$MC_BIN" "${FLAGS[@]}" --exit-signal-handler --exit-signal SIGUSR1 >"$MC_TMP/usr1" 2>&1 &
job=$!
wait_line "$MC_TMP/usr1" 'iteration +3/' 60
kill -USR1 $job
wait $job
rc=$?
check "--exit-signal SIGUSR1: exits 0 after receiving SIGUSR1 (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && grep -q '^\[exiting program after receiving SIGUSR1\.\]' '$MC_TMP/usr1'"
"$MC_BIN" "${FLAGS[@]}" --save "$MC_TMP/nosig" --save-interval 1000 >"$MC_TMP/term" 2>&1 &
job=$!
wait_line "$MC_TMP/term" 'iteration +3/' 60
kill -TERM $job
wait $job
rc=$?
check "without --exit-signal-handler SIGTERM terminates at once (rc=$rc: 128 + 15), saving nothing" \
    bash -c "[ $rc -eq 143 ] && ! grep -q 'exiting program' '$MC_TMP/term' && [ ! -e '$MC_TMP/nosig/latest_checkpointed_iteration.txt' ]"
expect_user_error "--exit-signal SIGKILL is refused (it cannot be caught)" "--exit-signal.*SIGKILL" \
    "${FLAGS[@]}" --exit-signal-handler --exit-signal SIGKILL

# ---- --exit-interval, --exit-duration-in-mins: save, then exit ----
"$MC_BIN" "${FLAGS[@]}" --save "$MC_TMP/ei" --save-interval 1000 --exit-interval 5 >"$MC_TMP/ei.out" 2>&1
rc=$?
check "--exit-interval 5 saves iteration 5, then exits 0 (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && [ \"\$(cat '$MC_TMP/ei/latest_checkpointed_iteration.txt')\" = 5 ] &&
        grep -A3 'successfully saved checkpoint from iteration       5' '$MC_TMP/ei.out' | grep -q '^\[exiting program at iteration 5\]'"
"$MC_BIN" "${FLAGS[@]}" --save "$MC_TMP/ei2" --save-interval 2 --exit-interval 4 >"$MC_TMP/ei2.out" 2>&1
check "--exit-interval at a save interval saves that iteration once" \
    test "$(grep -c 'saving checkpoint at iteration       4' "$MC_TMP/ei2.out")" = 1
"$MC_BIN" "${FLAGS[@]}" --save "$MC_TMP/ed" --save-interval 1000 --exit-duration-in-mins 0.000001 >"$MC_TMP/ed.out" 2>&1
rc=$?
check "--exit-duration-in-mins saves the iteration it stops at, then exits 0 (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && [ \"\$(cat '$MC_TMP/ed/latest_checkpointed_iteration.txt')\" = 1 ] &&
        grep -A3 'successfully saved checkpoint from iteration       1' '$MC_TMP/ed.out' | grep -q '^\[exiting program after '"

# ---- --async-save ----
SHORT=(--train-iters 24 --lr-decay-style cosine --lr-warmup-iters 3 --min-lr 1e-4)
# both save to the same path (it is in the args saved)
"$MC_BIN" "${FLAGS[@]}" "${SHORT[@]}" --save "$MC_TMP/ck" --save-interval 12 >"$MC_TMP/sync.out" 2>&1
rc1=$?
mv "$MC_TMP/ck" "$MC_TMP/sync"
"$MC_BIN" "${FLAGS[@]}" "${SHORT[@]}" --save "$MC_TMP/ck" --save-interval 12 --async-save >"$MC_TMP/async.out" 2>&1
rc2=$?
mv "$MC_TMP/ck" "$MC_TMP/async"
check "--async-save: both runs exit 0, the asynchronous one scheduling its saves (rc=$rc1, $rc2)" \
    bash -c "[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && grep -q 'scheduled an async checkpoint save at iteration      12' '$MC_TMP/async.out'" 
check "--async-save: the log lines of iterations 1..24 are those of synchronous saving" \
    same_iters "$MC_TMP/sync.out" "$MC_TMP/async.out" 1 24
# The files: every zip record byte for byte, but data.pkl, which differs in the one byte of
# args.async_save (NEWTRUE for NEWFALSE), and the serialization id derived from it.
cat >"$MC_TMP/same.py" <<'EOF'
import sys, zipfile
a, b = zipfile.ZipFile(sys.argv[1]), zipfile.ZipFile(sys.argv[2])
na, nb = a.namelist(), b.namelist()
if na != nb:
    sys.exit("records differ: %s vs %s" % (na, nb))
for n in na:
    x, y = a.read(n), b.read(n)
    if n.endswith("/data.pkl"):
        diff = [i for i in range(min(len(x), len(y))) if x[i] != y[i]]
        if len(x) != len(y) or len(diff) != 1 or (x[diff[0]], y[diff[0]]) != (0x89, 0x88):
            sys.exit("data.pkl differs beyond the async_save flag: %d bytes" % len(diff))
        if x.find(b"async_save") < 0 or x.find(b"async_save") > diff[0]:
            sys.exit("the differing byte is not the async_save value")
    elif not n.endswith(".data/serialization_id") and x != y:
        sys.exit("record %s differs" % n)
EOF
for it in 0000012 0000024; do
    f=iter_$it/mp_rank_00/model_optim_rng.pt
    if out=$(python3 "$MC_TMP/same.py" "$MC_TMP/sync/$f" "$MC_TMP/async/$f" 2>&1); then
        ok "--async-save: $f is the synchronous save's, record by record"
    else
        not_ok "--async-save: $f is the synchronous save's, record by record ($out)"
    fi
done
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
    cat >"$MC_TMP/args.py" <<'EOF'
import signal, sys, torch
sys.path.insert(0, sys.argv[2])
import megatron_enums  # noqa: F401 (args.attention_backend)
try:
    sd = torch.load(sys.argv[1], weights_only=False)
except TypeError:  # torch < 1.13
    sd = torch.load(sys.argv[1])
a = sd["args"]
assert a.async_save is True and a.exit_signal_handler is False, (a.async_save, a.exit_signal_handler)
assert a.exit_signal == signal.SIGTERM and isinstance(a.exit_signal, signal.Signals), a.exit_signal
assert a.attention_backend is megatron_enums.AttnBackend.auto, a.attention_backend
EOF
    if out=$(/usr/bin/python3 "$MC_TMP/args.py" "$MC_TMP/async/iter_0000012/mp_rank_00/model_optim_rng.pt" \
        "$(cd "$(dirname "$0")/../ref" && pwd)" 2>&1); then
        ok "torch.load: args.async_save, args.exit_signal as signal.Signals.SIGTERM, args.attention_backend as Megatron's AttnBackend.auto"
    else
        not_ok "torch.load: args.async_save, args.exit_signal as signal.Signals.SIGTERM, args.attention_backend as Megatron's AttnBackend.auto ($(echo "$out" | tail -c 300))"
    fi
else
    skip "torch.load of the args" "python3-torch is not installed (scripts/install-deps.sh --torch)"
fi
"$MC_BIN" "${FLAGS[@]}" "${SHORT[@]}" --load "$MC_TMP/async" --ckpt-step 12 >"$MC_TMP/async.resumed" 2>&1
check "--async-save: resuming iteration 12 gives iterations 13..24 of the uninterrupted run" \
    same_iters "$MC_TMP/sync.out" "$MC_TMP/async.resumed" 13 24

# Megatron's timers after each save and after --load: "(min, max) time across ranks (ms):"
TIMER='^    %s-checkpoint \.+: \([0-9]+\.[0-9]{2}, [0-9]+\.[0-9]{2}\)$'
check "the save-checkpoint time is logged after each of the 2 saves, the load-checkpoint time after --load" \
    bash -c "[ \$(grep -cE \"$(printf "$TIMER" save)\" '$MC_TMP/sync.out') -eq 2 ] &&
        grep -B1 -E \"$(printf "$TIMER" load)\" '$MC_TMP/async.resumed' | grep -q '^(min, max) time across ranks (ms):'"

# The memory plan counts the snapshot: parameters and Adam moments again (rounded MiB)
plan_mib() { sed -nE "s/^    $2 +([0-9.]+) MiB$/\1/p" "$1"; }
p=$(plan_mib "$MC_TMP/async.out" 'parameters \(fp32\)')
m=$(plan_mib "$MC_TMP/async.out" 'optimizer state \(Adam m, v\)')
snap=$(plan_mib "$MC_TMP/async.out" 'async checkpoint snapshot \(host\)')
check "--async-save: the memory plan's snapshot line is parameters + Adam moments ($p + $m = $snap MiB), absent without it" \
    bash -c "[ -n '$snap' ] && awk 'BEGIN { d = $p + $m - $snap; exit !(d < 0.02 && d > -0.02) }' &&
        ! grep -q 'async checkpoint snapshot' '$MC_TMP/sync.out'"

# Training goes on while a save is in flight: the writer is held for a second
# (MC_TEST_CKPT_WRITE_DELAY_MS), and iterations are logged between the save's scheduling and
# its publication. The same hold with synchronous saving logs none (the check can fail).
between() { # file from-pattern to-pattern: iteration lines between the two lines
    awk -v a="$2" -v b="$3" '$0 ~ a { on = 1; next } $0 ~ b { on = 0 } on && /iteration +[0-9]+\//' "$1" | wc -l
}
HOLD=(--train-iters 12 --save-interval 6)
MC_TEST_CKPT_WRITE_DELAY_MS=1000 "$MC_BIN" "${FLAGS[@]}" "${HOLD[@]}" --save "$MC_TMP/held" --async-save \
    >"$MC_TMP/held.out" 2>&1
rc=$?
n=$(between "$MC_TMP/held.out" 'scheduled an async checkpoint save at iteration +6 ' 'successfully saved checkpoint from iteration +6 ')
check "--async-save: iterations complete while the save of iteration 6 is written ($n logged in between, rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && [ $n -ge 1 ]"
MC_TEST_CKPT_WRITE_DELAY_MS=1000 "$MC_BIN" "${FLAGS[@]}" "${HOLD[@]}" --save "$MC_TMP/heldsync" >"$MC_TMP/heldsync.out" 2>&1
n=$(between "$MC_TMP/heldsync.out" 'saving checkpoint at iteration +6 ' 'successfully saved checkpoint from iteration +6 ')
check "synchronous saving: no iteration completes during the save ($n in between)" test "$n" -eq 0
check "--async-save: the next save waits for the write in flight" \
    bash -c "grep -A1 '^WARNING: Starting a checkpoint save before previous has finished' '$MC_TMP/held.out' | grep -q 'successfully saved checkpoint from iteration       6'"
check "--async-save: the exit waits for the last write, which is then published" \
    bash -c "tail -n 4 '$MC_TMP/held.out' | grep -q '^Unfinalized async checkpoint saves. Finalizing them synchronously now.' &&
        grep -q 'successfully saved checkpoint from iteration      12' '$MC_TMP/held.out' &&
        [ \"\$(cat '$MC_TMP/held/latest_checkpointed_iteration.txt')\" = 12 ] && ! compgen -G '$MC_TMP/held/*.tmp-*' >/dev/null"

# kill -9 while an asynchronous save is written: the tracker still names the previous
# checkpoint, which loads, and the next save clears the unfinished tree.
K=$MC_TMP/killed
MC_TEST_CKPT_WRITE_DELAY_MS=3000 "$MC_BIN" "${FLAGS[@]}" --save "$K" --save-interval 5 --async-save >"$MC_TMP/k.out" 2>&1 &
job=$!
wait_line "$MC_TMP/k.out" 'scheduled an async checkpoint save at iteration +10 ' 120
# the writer makes its temporary tree just after the line: kill once it is being written
for _ in $(seq 600); do compgen -G "$K/iter_0000010.tmp-*" >/dev/null && break; sleep 0.1; done
kill -9 $job
wait $job 2>/dev/null
it=$(tracker "$K")
check "kill -9 during an asynchronous save: the tracker names the previous checkpoint (5: '$it'), the unfinished one is a temporary tree" \
    bash -c "[ '$it' = 5 ] && [ -d '$K/iter_0000005/mp_rank_00' ] && [ ! -e '$K/iter_0000010' ] && compgen -G '$K/iter_0000010.tmp-*' >/dev/null"
"$MC_BIN" "${FLAGS[@]}" --load "$K" --save "$K" --save-interval 1000 --exit-interval 6 --async-save >"$MC_TMP/k.resumed" 2>&1
rc=$?
check "kill -9 during an asynchronous save: iteration 5 loads, training continues, the next save clears the unfinished tree (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && grep -q 'loaded checkpoint from .* at iteration 5' '$MC_TMP/k.resumed' &&
        [ \"\$(cat '$K/latest_checkpointed_iteration.txt')\" = 6 ] && ! compgen -G '$K/*.tmp-*' >/dev/null"

# A write that fails (here the file-size limit, ulimit -f, which megatron-c turns from a fatal
# signal into a write error) ends the job with one line naming the file, synchronous or not.
write_error() { # name flags...
    local name=$1
    shift
    (ulimit -f 128 && exec "$MC_BIN" "${FLAGS[@]}" --train-iters 6 --save "$MC_TMP/full" --save-interval 2 "$@") \
        >"$MC_TMP/full.out" 2>"$MC_TMP/full.err"
    local rc=$?
    if [ $rc -ne 0 ] && [ "$(grep -c '^megatron-c:' "$MC_TMP/full.err")" -eq 1 ] &&
        grep -qE '^megatron-c: error: .*/full/iter_0000002\.tmp-[0-9a-f]+/mp_rank_00/model_optim_rng\.pt: .*File too large' "$MC_TMP/full.err" &&
        [ ! -e "$MC_TMP/full/latest_checkpointed_iteration.txt" ]; then
        ok "$name"
    else
        not_ok "$name (rc=$rc, stderr: $(head -c 400 "$MC_TMP/full.err"))"
    fi
    rm -rf "$MC_TMP/full"
}
write_error "a failed synchronous write: one line naming the file, no checkpoint published"
write_error "a failed background write: one line naming the file, no checkpoint published" --async-save
exit 0
