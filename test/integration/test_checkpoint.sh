#!/usr/bin/env bash
# Checkpoints: --save / --load in Megatron's legacy layout.
#  - exact resume: 24 iterations with --save-interval 12 against loading iteration 12 and
#    training to 24 give the same log strings for iterations 13..24 (lm loss, grad norm, params
#    norm, learning rate, consumed samples) and the same validation and test lines, for a single
#    rank, dp 2 with the distributed optimizer, tp 2 x pp 2 with 2 virtual stages per rank, and
#    all of them at once (8 ranks, with sequence parallelism);
#  - the layout on disk (tracker, iter_0000012/mp_rank_TT[_PPP]/model_optim_rng.pt,
#    distrib_optim.pt), and a distributed-optimizer checkpoint loading at another dp size;
#  - kill -9 during and around saves leaves the tracker naming a loadable checkpoint, and the
#    next save removes the unfinished one;
#  - one-line errors: a corrupted file (CRC, naming the file), another tp layout, a missing
#    shard, a missing checkpoint with --exit-on-missing-checkpoint (and the warning without);
#  - with python3-torch: torch.load opens the files and sees Megatron's keys, names, shapes,
#    the args Namespace, an optimizer state torch's AdamW accepts, and parameter values whose
#    norm is the logged params norm.
# ci-sanitize: checkpoint writing and reading on many ranks, the async save's writer thread;
#   its runs (tp 2 x pp 2 x vpp 2 with SP on 8 ranks, dp 2 distopt) are also the sanitizers'
#   sample of tensor- and pipeline-parallel training (test_tp and test_pp are not repeated);
#   the sanitizer build's run leaves the single-rank bf16/fp16 resumes, tp 2 x pp 2 alone and the
#   kill -9 trials to the release build's
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

PY=/usr/bin/python3
# megatron_enums: the AttnBackend class the args pickle, for torch.load without Megatron
export PYTHONPATH="$(cd "$(dirname "$0")/../ref" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
# 8 layers: tp 2 x pp 2 x vpp 2 has two layers per chunk. 16 sequences per step.
FLAGS=(--device cpu --mock-data --vocab-size 256 --make-vocab-size-divisible-by 64 --num-layers 8
       --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
       --micro-batch-size 2 --global-batch-size 16 --train-iters 24 --lr 3e-3
       --lr-decay-style cosine --lr-warmup-iters 3 --min-lr 1e-4 --weight-decay 0.1
       --clip-grad 1.0 --log-interval 1 --eval-interval 12 --eval-iters 2 --seed 1234
       --hidden-dropout 0.1 --attention-dropout 0.1 --log-params-norm)

# The lines that must not change on resuming: iterations 13..24 without the timestamp and the
# elapsed time, and the validation and test lines after iteration 12.
# Megatron main logs the first iteration of a run without resetting the interval (training_log's
# should_reset = not is_first_iteration), so a resumed run's second line also counts its first
# iteration: that line is left out.
resumed_lines() {
    sed -nE '/iteration +(13|1[5-9]|2[0-4])\/ +24 \|/{s/^ \[[^]]*\]//; s/ elapsed time per iteration \(ms\): [0-9.]+ \|//; p}
             /validation loss at iteration 24 |on validation set|on test set/p' "$1"
}
same_resume() { # full resumed
    local n
    n=$(resumed_lines "$2" | grep -c '^ iteration ')
    diff <(resumed_lines "$1") <(resumed_lines "$2") >"$MC_TMP/resume.diff" && [ "$n" -eq 11 ]
}

run_np() { # np args...: one rank directly, more under mpirun
    local np=$1
    shift
    if [ "$np" -eq 1 ]; then "$MC_BIN" "$@"; else mpirun_mc "$np" "$@"; fi
}

# resume_case NAME NP DIR FLAGS...: the uninterrupted run saving every 12, then the resumed one.
resume_case() {
    local name=$1 np=$2 dir=$3
    shift 3
    if [ "$np" -gt 1 ] && ! have_mpirun; then
        skip "$name: exact resume" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
        return 1
    fi
    run_np "$np" "${FLAGS[@]}" "$@" --save "$dir" --save-interval 12 >"$MC_TMP/$name.full" 2>"$MC_TMP/$name.full.err"
    local rc=$?
    if [ $rc -ne 0 ]; then
        not_ok "$name: training with --save exits 0 (rc=$rc: $(tail -c 400 "$MC_TMP/$name.full.err"))"
        return 1
    fi
    check "$name: the tracker names iteration 24" test "$(cat "$dir/latest_checkpointed_iteration.txt")" = 24
    run_np "$np" "${FLAGS[@]}" "$@" --load "$dir" --ckpt-step 12 >"$MC_TMP/$name.resumed" 2>"$MC_TMP/$name.resumed.err"
    rc=$?
    if [ $rc -ne 0 ]; then
        not_ok "$name: resuming from iteration 12 exits 0 (rc=$rc: $(tail -c 400 "$MC_TMP/$name.resumed.err"))"
        return 1
    fi
    check "$name: the resumed run says it loaded iteration 12" \
        grep -q "successfully loaded checkpoint from $dir .* at iteration 12" "$MC_TMP/$name.resumed"
    if same_resume "$MC_TMP/$name.full" "$MC_TMP/$name.resumed"; then
        ok "$name: iterations 13..24 and validation are identical after resuming"
    else
        not_ok "$name: iterations 13..24 and validation are identical after resuming ($(head -c 600 "$MC_TMP/resume.diff"))"
    fi
}

# ---- exact resume ----
S=$MC_TMP/single
resume_case single 1 "$S"
check "single: iter_0000012/mp_rank_00/model_optim_rng.pt and no temporary names" \
    bash -c "[ -f '$S/iter_0000012/mp_rank_00/model_optim_rng.pt' ] && [ -f '$S/iter_0000024/mp_rank_00/model_optim_rng.pt' ] && ! ls -d '$S'/*.tmp-* 2>/dev/null"

# The comparison can fail: without the optimizer state the resumed iterations differ.
"$MC_BIN" "${FLAGS[@]}" --load "$S" --ckpt-step 12 --no-load-optim >"$MC_TMP/noopt" 2>&1
rc=$?
differs() { ! same_resume "$@"; }
check "single: --no-load-optim resumes (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && grep -q 'iteration *24/' '$MC_TMP/noopt'"
check "single: without the optimizer state iterations 13..24 differ (the comparison can fail)" \
    differs "$MC_TMP/single.full" "$MC_TMP/noopt"
# --finetune: the weights only, from iteration 0 with a fresh optimizer and schedule
"$MC_BIN" "${FLAGS[@]}" --load "$S" --finetune --train-iters 2 --lr-warmup-iters 0 --eval-interval 1 \
    >"$MC_TMP/finetune" 2>&1
rc=$?
check "single: --finetune loads the model at iteration 0 and trains from 1 (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && grep -q 'successfully loaded checkpoint from .* at iteration 0' '$MC_TMP/finetune' &&
        grep -q 'iteration        1/       2 | consumed samples:           16 |' '$MC_TMP/finetune'"
# Saving an iteration that exists (resume at 12 into the same directory saves 24 again): the
# new tree replaces the old in one step and loads.
"$MC_BIN" "${FLAGS[@]}" --load "$S" --ckpt-step 12 --save "$S" --save-interval 12 >"$MC_TMP/resave" 2>&1
rc1=$?
"$MC_BIN" "${FLAGS[@]}" --load "$S" >"$MC_TMP/reload" 2>&1
rc2=$?
check "single: re-saving iteration 24 replaces it and it loads (rc=$rc1, $rc2)" \
    bash -c "[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && grep -q 'loaded checkpoint from .* at iteration 24' '$MC_TMP/reload' &&
        ! compgen -G '$S/*.tmp-*' >/dev/null && [ \$(ls '$S' | wc -l) -eq 3 ]"

D=$MC_TMP/dp2
DIST=(--use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 2000)
if resume_case dp2-distopt 2 "$D" "${DIST[@]}"; then
    check "dp2-distopt: one model_optim_rng.pt and distrib_optim.pt (dp rank 0 writes)" \
        bash -c "[ -f '$D/iter_0000012/mp_rank_00/distrib_optim.pt' ] && [ \$(ls '$D/iter_0000012') = mp_rank_00 ]"
    # the distributed optimizer's state does not depend on dp: load it on one rank
    "$MC_BIN" "${FLAGS[@]}" "${DIST[@]}" --load "$D" --ckpt-step 12 >"$MC_TMP/dp1" 2>"$MC_TMP/dp1.err"
    rc=$?
    log_numbers "$MC_TMP/dp2-distopt.resumed" | grep -v '^val' >"$MC_TMP/dp2.numbers"
    log_numbers "$MC_TMP/dp1" | grep -v '^val' >"$MC_TMP/dp1.numbers"
    check "dp2-distopt: loads at dp 1 and continues with the same losses (rc=$rc)" \
        bash -c "[ $rc -eq 0 ] && paste -d' ' '$MC_TMP/dp2.numbers' '$MC_TMP/dp1.numbers' |
            awk '{ d = \$1 - \$4; if (d < 0) d = -d; if (d > 1e-5 * \$1) bad++ } END { exit !(NR == 12 && !bad) }'"
fi

P=$MC_TMP/ptdp
PTD=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2)
if ! left_to_release "tp2-pp2-vpp2: exact resume (ptd-p below runs it with dp 2 and SP)" &&
    resume_case tp2-pp2-vpp2 4 "$P" "${PTD[@]}"; then
    check "tp2-pp2-vpp2: mp_rank_TT_PPP directories" \
        test "$(ls "$P/iter_0000012" | tr '\n' ' ')" = "mp_rank_00_000 mp_rank_00_001 mp_rank_01_000 mp_rank_01_001 "
fi

# everything at once: dp 2 x tp 2 x pp 2 with virtual stages, sequence parallelism and the
# distributed optimizer (the tied embeddings' own bucket on the first and last stage)
resume_case ptd-p 8 "$MC_TMP/ptdp8" "${PTD[@]}" --sequence-parallel "${DIST[@]}" --overlap-param-gather

# ---- mixed precision: the 16-bit model, the fp32 master params and the loss scaler resume ----
# fp16 starts its dynamic scale low with a short window, so the scale moves around iteration 12
# and only a restored scaler (scale, growth and hysteresis trackers) logs the same lines after it.
left_to_release "bf16: exact resume (bf16-dp2-distopt below runs bf16)" || resume_case bf16 1 "$MC_TMP/bf16" --bf16
left_to_release "fp16: exact resume" ||
    resume_case fp16 1 "$MC_TMP/fp16" --fp16 --initial-loss-scale 4096 --loss-scale-window 5
resume_case bf16-dp2-distopt 2 "$MC_TMP/bf16dp" --bf16 "${DIST[@]}"
if in_sanitizer_build; then
    skip "mixed-precision checkpoints in torch.load" "the release build's run checks them (sanitizer build)"
elif "$PY" -c "import torch" 2>/dev/null; then
    cat >"$MC_TMP/mixed.py" <<'EOF'
import re, sys, torch
import megatron_enums  # noqa: F401 (args.attention_backend)
def load(p):
    try:
        return torch.load(p, weights_only=False)
    except TypeError:
        return torch.load(p)
fails = []
def expect(c, what):
    if not c:
        fails.append(what)
d16, dfp16, ddp, log16 = sys.argv[1:5]
sd = load(d16 + "/iter_0000012/mp_rank_00/model_optim_rng.pt")
m = sd["model"]
weights = [k for k in m if not k.endswith("._extra_state")]
expect(all(m[k].dtype == torch.bfloat16 for k in weights), "bf16: model weights are bfloat16")
expect(sd["args"].bf16 is True, "bf16: args.bf16")
opt = sd["optimizer"]
expect(set(opt.keys()) == {"optimizer", "fp32_from_fp16_params"}, "bf16: Float16Optimizer keys %s" % list(opt))
masters = [t for g in opt["fp32_from_fp16_params"] for t in g]
expect(len(masters) == len(weights) and all(t.dtype == torch.float32 for t in masters), "bf16: fp32 masters")
# every model weight is some master rounded to bfloat16 (Megatron's main-to-model copy), and the
# masters carry more than bfloat16 precision
rounded = {(tuple(t.shape), t.to(torch.bfloat16).float().sum().item(), t.to(torch.bfloat16).float().abs().sum().item()) for t in masters}
for k in weights:
    w = m[k].float()
    expect((tuple(w.shape), w.sum().item(), w.abs().sum().item()) in rounded, "bf16: %s is a master rounded" % k)
expect(any(not torch.equal(t, t.to(torch.bfloat16).float()) for t in masters), "bf16: masters carry more than bf16")
sd = load(dfp16 + "/iter_0000012/mp_rank_00/model_optim_rng.pt")
gs = sd["optimizer"]["grad_scaler"]
expect(set(gs.keys()) == {"scale", "growth_tracker", "hysteresis_tracker"}, "fp16: grad_scaler keys")
logged = [float(x) for x in re.findall(r"iteration +12/.*loss scale: ([0-9.]+) \|", open(log16).read())]
expect(logged and float(gs["scale"]) == logged[0], "fp16: the saved scale %s is the logged one %s" % (gs["scale"], logged))
expect(all(t.dtype == torch.float16 for k, t in sd["model"].items() if not k.endswith("._extra_state")), "fp16: float16 weights")
dist = load(ddp + "/iter_0000012/mp_rank_00/distrib_optim.pt")
keys = list(dist[0].keys())
expect(keys == [(torch.bfloat16, torch.float32)], "bf16 distopt: buffer key %s" % keys)
expect(dist[0][keys[0]]["param"].dtype == torch.float32, "bf16 distopt: fp32 master params")
print("; ".join(fails) if fails else "ok")
EOF
    out=$("$PY" "$MC_TMP/mixed.py" "$MC_TMP/bf16" "$MC_TMP/fp16" "$MC_TMP/bf16dp" "$MC_TMP/fp16.full" 2>&1 | tail -3)
    check "mixed precision files in torch: bfloat16 weights that are their fp32 masters rounded, the grad scaler's state, the distributed optimizer's (bfloat16, float32) buffer ($out)" \
        test "$out" = ok
else
    skip "mixed precision files in torch" "python3-torch is not installed (scripts/install-deps.sh --torch)"
fi

# ---- errors: one line naming the file ----
load_error() { # name pattern np args...
    local name=$1 pattern=$2 np=$3
    shift 3
    run_np "$np" "$@" >"$MC_TMP/err.out" 2>"$MC_TMP/err.err"
    one_error_line "$name" "$pattern" $? "$MC_TMP/err.err"
}
cp -r "$S" "$MC_TMP/corrupt"
F=$MC_TMP/corrupt/iter_0000024/mp_rank_00/model_optim_rng.pt
size=$(stat -c %s "$F")
byte=$(od -An -tu1 -j $((size / 2)) -N1 "$F" | tr -d ' ')
printf '%b' "\\$(printf '%03o' $(((byte + 1) % 256)))" | dd of="$F" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
load_error "a flipped byte: one error naming the file and the CRC" \
    "error: .*corrupt/iter_0000024/mp_rank_00/model_optim_rng.pt: CRC mismatch" 1 "${FLAGS[@]}" --load "$MC_TMP/corrupt"
truncate -s $((size / 3)) "$F"
load_error "a truncated file: one error naming the file" \
    "error: .*corrupt/iter_0000024/mp_rank_00/model_optim_rng.pt: " 1 "${FLAGS[@]}" --load "$MC_TMP/corrupt"
if have_mpirun; then
    load_error "saved at tp 1, loaded at tp 2: one error naming the file and the layout" \
        "error: .*model_optim_rng.pt: saved with tensor_model_parallel_size 1 but this run has 2" \
        2 "${FLAGS[@]}" --tensor-model-parallel-size 2 --load "$S"
fi
mkdir -p "$MC_TMP/trackerdir/latest_checkpointed_iteration.txt"
load_error "a tracker that is a directory: one error naming it" \
    "error: .*trackerdir/latest_checkpointed_iteration.txt: is a directory, not Megatron's tracker file \(remove it" \
    1 "${FLAGS[@]}" --load "$MC_TMP/trackerdir"
load_error "saved at pp 2, loaded at pp 1: one error naming the missing shard" \
    "error: .*iter_0000024/mp_rank_00/model_optim_rng.pt: missing shard file \(the checkpoint holds mp_rank_00_000" \
    1 "${FLAGS[@]}" --load "$MC_TMP/ptdp8"
load_error "--ckpt-step of an iteration not saved: one error naming it and what there is" \
    "error: .*iter_0000013: missing; .* holds iter_0000012, iter_0000024" 1 "${FLAGS[@]}" --load "$S" --ckpt-step 13
load_error "another model shape: one error naming the file and the argument" \
    "error: .*model_optim_rng.pt: saved with hidden_size 32 but this run has 64" \
    1 "${FLAGS[@]}" --hidden-size 64 --load "$S"
load_error "--exit-on-missing-checkpoint without a checkpoint: one error naming the tracker" \
    "error: .*nowhere/latest_checkpointed_iteration.txt: missing, and --exit-on-missing-checkpoint" \
    1 "${FLAGS[@]}" --train-iters 2 --lr-warmup-iters 0 --eval-interval 1 --load "$MC_TMP/nowhere" --exit-on-missing-checkpoint
"$MC_BIN" "${FLAGS[@]}" --train-iters 2 --lr-warmup-iters 0 --eval-interval 1 --load "$MC_TMP/nowhere" >"$MC_TMP/warn" 2>&1
rc=$?
check "a missing checkpoint without --exit-on-missing-checkpoint warns and trains from scratch" \
    bash -c "[ $rc -eq 0 ] && grep -q 'WARNING: could not find the metadata file' '$MC_TMP/warn' && grep -q 'iteration        2/' '$MC_TMP/warn'"
load_error "--save without --save-interval is refused" "--save needs --save-interval" 1 "${FLAGS[@]}" --save "$MC_TMP/x"

# ---- kill -9 at any moment leaves the previous checkpoint loadable ----
# A larger model saved every iteration, so a save is always near; each trial kills the job at
# another moment and then resumes from whatever the tracker names.
# (about 3 MB per checkpoint; --train-iters bounds the disk used if a kill came late)
KILL=(--device cpu --mock-data --vocab-size 512 --num-layers 4 --hidden-size 64
      --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 2
      --global-batch-size 4 --train-iters 300 --lr 1e-3 --log-interval 1 --eval-interval 1000
      --eval-iters 1 --seed 7)
K=$MC_TMP/killed
wait_for() { # seconds command...: poll until the command succeeds
    local until=$((SECONDS + $1))
    shift
    until "$@"; do [ $SECONDS -ge $until ] && return 1; done
}
has_tmp() { compgen -G "$K/iter_*.tmp-*" >/dev/null; }
has_tracker() { [ -s "$K/latest_checkpointed_iteration.txt" ]; }
tracker_moved() { [ "$(cat "$K/latest_checkpointed_iteration.txt" 2>/dev/null)" != "$1" ]; }
killed_mid_save=0
kill_trial() { # during | after-publish | random
    local trial=$1 pid it next rc last
    rm -rf "$K"
    "$MC_BIN" "${KILL[@]}" --save "$K" --save-interval 1 >"$MC_TMP/kill.log" 2>&1 &
    pid=$!
    wait_for 60 has_tracker
    case $trial in
        during) wait_for 30 has_tmp ;;
        after-publish) last=$(cat "$K/latest_checkpointed_iteration.txt"); wait_for 30 tracker_moved "$last" ;;
        random) sleep "0.$((RANDOM % 9 + 1))" ;;
    esac
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    if [ "$trial" = during ] && has_tmp; then killed_mid_save=1; fi
    it=$(cat "$K/latest_checkpointed_iteration.txt" 2>/dev/null)
    if [ -z "$it" ] || [ ! -d "$K/$(printf 'iter_%07d' "$it")" ]; then
        not_ok "kill -9 ($trial): the tracker names a checkpoint directory (tracker '$it': $(ls "$K" | tr '\n' ' '))"
        return
    fi
    next=$((it + 1))
    "$MC_BIN" "${KILL[@]}" --load "$K" --save "$K" --save-interval 1000 --exit-interval "$next" \
        >"$MC_TMP/kill.resume" 2>"$MC_TMP/kill.resume.err"
    rc=$?
    check "kill -9 ($trial): iteration $it loads and training continues to $next (rc=$rc $(head -c 300 "$MC_TMP/kill.resume.err"))" \
        bash -c "[ $rc -eq 0 ] && grep -q 'iteration *$next/' '$MC_TMP/kill.resume'"
    check "kill -9 ($trial): the next save leaves no unfinished checkpoint behind" \
        bash -c "! compgen -G '$K/*.tmp-*' >/dev/null && [ \"\$(cat '$K/latest_checkpointed_iteration.txt')\" = $next ]"
}
if ! left_to_release "kill -9 during, after and at random moments around saves"; then
    kill_trial during
    for _ in 1 2 3; do # the save may have finished between seeing it and the kill
        [ $killed_mid_save -eq 1 ] && break
        kill_trial during
    done
    kill_trial after-publish
    kill_trial random
    check "kill -9 landed in the middle of a save at least once (a temporary tree was left)" test $killed_mid_save -eq 1
fi

# ---- the files in PyTorch ----
if in_sanitizer_build; then
    skip "checkpoint files open in torch.load" "the release build's run checks them (sanitizer build)"
    exit 0
fi
if ! "$PY" -c "import torch" 2>/dev/null; then
    skip "checkpoint files open in torch.load" "python3-torch is not installed (scripts/install-deps.sh --torch)"
    exit 0
fi
cat >"$MC_TMP/check.py" <<'EOF'
import argparse, math, re, sys
import torch
import megatron_enums  # noqa: F401 (args.attention_backend)

def load(path):
    try:
        return torch.load(path, weights_only=False)
    except TypeError:  # torch < 1.13
        return torch.load(path)

def logged_params_norm(log, iteration):
    for line in open(log):
        m = re.search(r"iteration +%d/.*params norm: ([0-9.]+)" % iteration, line)
        if m:
            return float(m.group(1))
    raise SystemExit("no params norm for iteration %d in %s" % (iteration, log))

def close(a, b):
    return abs(a - b) <= 1e-3 * max(1.0, abs(b))

fails = []
def expect(cond, what):
    if not cond:
        fails.append(what)

TOP = ["args", "checkpoint_version", "iteration", "optimizer", "opt_param_scheduler", "rng_state",
       "num_floating_point_operations_so_far"]
SCHED = ["max_lr", "lr_warmup_steps", "num_steps", "lr_decay_style", "lr_decay_steps", "min_lr",
         "start_wd", "end_wd", "wd_incr_style", "wd_incr_steps"]

def common(sd, path, tp, pp, vpp):
    for k in TOP:
        expect(k in sd, "%s: no key %s" % (path, k))
    a = sd["args"]
    expect(isinstance(a, argparse.Namespace), "%s: args is not a Namespace" % path)
    expect(a.num_layers == 8 and a.hidden_size == 32 and a.num_attention_heads == 4, "%s: args shape" % path)
    expect(a.tensor_model_parallel_size == tp and a.pipeline_model_parallel_size == pp, "%s: args layout" % path)
    expect(a.virtual_pipeline_model_parallel_size == vpp, "%s: virtual_pipeline_model_parallel_size" % path)
    expect(a.consumed_train_samples == 12 * 16 and a.consumed_valid_samples == 2 * 16,
           "%s: consumed samples %s %s" % (path, a.consumed_train_samples, a.consumed_valid_samples))
    expect(a.lr_decay_iters is None and a.seed == 1234, "%s: None defaults and seed" % path)
    expect(sd["checkpoint_version"] == 3.0 and sd["iteration"] == 12, "%s: version/iteration" % path)
    expect(list(sd["opt_param_scheduler"].keys()) == SCHED, "%s: scheduler keys" % path)
    expect(sd["opt_param_scheduler"]["num_steps"] == 12 * 16, "%s: scheduler num_steps" % path)
    expect(sd["rng_state"][0]["seed"] == 1234, "%s: rng_state" % path)

def model_keys(sd, key):  # the parameters, in the file's order
    return [k for k in sd[key] if not k.endswith("._extra_state")]

def sumsq(t):
    return float((t.double() ** 2).sum())

which, d, log = sys.argv[1], sys.argv[2], sys.argv[3]
norm = logged_params_norm(log, 12)
if which == "single":
    path = d + "/iter_0000012/mp_rank_00/model_optim_rng.pt"
    sd = load(path)
    common(sd, path, 1, 1, None)
    m = sd["model"]
    expect("model0" not in sd, "single: model0 present")
    expect(m["embedding.word_embeddings.weight"].shape == (256, 32), "word embeddings shape")
    expect(m["embedding.position_embeddings.weight"].shape == (32, 32), "position embeddings shape")
    expect(m["decoder.layers.7.self_attention.linear_qkv.weight"].shape == (96, 32), "qkv shape")
    expect(m["decoder.layers.0.mlp.linear_fc2.weight"].shape == (32, 128), "fc2 shape")
    expect("decoder.layers.0.mlp.linear_fc1._extra_state" in m and m["output_layer._extra_state"] is None,
           "_extra_state entries")
    expect("output_layer.weight" not in m, "tied output layer has no weight")
    # --transformer-impl transformer_engine (the default): Transformer Engine's names
    expect("decoder.layers.3.self_attention.linear_qkv.layer_norm_weight" in m and
           "decoder.layers.3.mlp.linear_fc1.layer_norm_bias" in m and "decoder.layers.3.input_layernorm.weight" not in m,
           "Transformer Engine's LayerNorm names")
    keys = model_keys(sd, "model")
    expect(len(keys) == 2 + 8 * 12 + 2, "single: %d tensors" % len(keys))
    expect(close(math.sqrt(sum(sumsq(m[k]) for k in keys)), norm), "single: params norm of the saved weights")
    # the optimizer state dict is torch's: AdamW accepts it for parameters of these shapes
    opt = sd["optimizer"]
    groups = opt["param_groups"]
    expect([g["wd_mult"] for g in groups] == [1.0, 0.0], "param groups wd_mult")
    by_index = {}
    decay = [k for k in keys if not (m[k].dim() == 1 or k.endswith(".bias"))]
    rest = [k for k in keys if k not in decay]
    for i, k in enumerate(decay + rest):
        by_index[i] = k
    expect(sorted(opt["state"].keys()) == list(range(len(keys))), "optimizer state indices")
    for i, k in by_index.items():
        s = opt["state"][i]
        expect(s["exp_avg"].shape == m[k].shape and s["exp_avg_sq"].shape == m[k].shape,
               "exp_avg shape of %s" % k)
        expect(float(s["step"]) == 12 and float(s["exp_avg_sq"].min()) >= 0, "step / exp_avg_sq of %s" % k)
    params = [torch.nn.Parameter(m[k].clone()) for k in decay + rest]
    adam = torch.optim.AdamW([{"params": params[:len(decay)]}, {"params": params[len(decay):]}], lr=1.0)
    adam.load_state_dict(opt)
    expect(adam.state[params[0]]["exp_avg"].shape == params[0].shape, "AdamW took the state")
elif which == "distopt":
    path = d + "/iter_0000012/mp_rank_00/model_optim_rng.pt"
    sd = load(path)
    common(sd, path, 1, 1, None)
    expect(sd["args"].use_distributed_optimizer is True, "args.use_distributed_optimizer")
    groups = sd["optimizer"]["optimizer"]["param_groups"]
    expect(len(groups) == 2 and all(g["step"] == 12 and "params" not in g for g in groups),
           "DistributedOptimizer param_groups")
    dist = load(d + "/iter_0000012/mp_rank_00/distrib_optim.pt")
    expect(dist["buckets_coalesced"] is True, "buckets_coalesced")
    (dtype, state), = dist[0].items()
    expect(dtype == (torch.float32, torch.float32), "buffer dtype key %s" % (dtype,))
    u = state["numel_unpadded"]
    expect(all(state[k].shape == (u,) for k in ("param", "exp_avg", "exp_avg_sq")), "world tensor sizes")
    expect(close(math.sqrt(sumsq(state["param"])), norm), "distopt: params norm of the world param tensor")
    expect(close(sumsq(state["param"]), sum(sumsq(t) for t in sd["model"].values() if t is not None)),
           "distopt: world params are the model's")
    expect(float(state["exp_avg_sq"].min()) >= 0 and float(state["exp_avg_sq"].max()) > 0, "exp_avg_sq values")
else:  # tp 2 x pp 2 x vpp 2
    total = 0.0
    for tp in range(2):
        for pp in range(2):
            path = "%s/iter_0000012/mp_rank_%02d_%03d/model_optim_rng.pt" % (d, tp, pp)
            sd = load(path)
            common(sd, path, 2, 2, 2)
            expect("model" not in sd and "model0" in sd and "model1" in sd, "%s: model0/model1" % path)
            for c in ("model0", "model1"):
                keys = model_keys(sd, c)
                layers = sorted({int(k.split(".")[2]) for k in keys if k.startswith("decoder.layers.")})
                expect(layers == [0, 1], "%s %s: stage-local layers %s" % (path, c, layers))
                for k in keys:
                    t = sd[c][k]
                    if k.endswith("linear_qkv.weight"):
                        expect(t.shape == (48, 32), "%s: %s shape %s" % (path, k, tuple(t.shape)))
                    if k.endswith("linear_proj.weight"):
                        expect(t.shape == (32, 16), "%s: %s shape %s" % (path, k, tuple(t.shape)))
                    split = t.dim() == 2 or re.search(r"linear_(qkv|fc1)\.bias", k)
                    dup = not split or k == "embedding.position_embeddings.weight"
                    shared = pp == 1 and c == "model1" and k == "output_layer.weight"
                    if (tp == 0 or not dup) and not shared:
                        total += sumsq(t)
            expect(("embedding.word_embeddings.weight" in sd["model0"]) == (pp == 0), "%s: embedding placement" % path)
            expect(("decoder.final_layernorm.weight" in sd["model1"]) == (pp == 1), "%s: final norm placement" % path)
    expect(close(math.sqrt(total), norm), "tp2-pp2-vpp2: params norm over the shards %.4f vs logged %.4f" % (math.sqrt(total), norm))
if fails:
    print("; ".join(fails[:5]))
    sys.exit(1)
EOF
pycheck() { # name which dir log
    if out=$("$PY" "$MC_TMP/check.py" "$2" "$3" "$4" 2>&1); then ok "$1"; else not_ok "$1 ($(echo "$out" | tail -c 400))"; fi
}
[ -f "$S/iter_0000012/mp_rank_00/model_optim_rng.pt" ] &&
    pycheck "torch.load: single rank (keys, Namespace, names, shapes, AdamW state, values)" single "$S" "$MC_TMP/single.full"
[ -f "$D/iter_0000012/mp_rank_00/distrib_optim.pt" ] &&
    pycheck "torch.load: dp 2 distributed optimizer (param groups, distrib_optim.pt world tensors)" distopt "$D" "$MC_TMP/dp2-distopt.full"
[ -d "$P/iter_0000012/mp_rank_01_001" ] &&
    pycheck "torch.load: tp 2 x pp 2 x vpp 2 (model0/model1, stage-local layers, tp slices, values)" ptd "$P" "$MC_TMP/tp2-pp2-vpp2.full"
exit 0
