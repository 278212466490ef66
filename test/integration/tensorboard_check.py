"""Checks megatron-c's TensorBoard event files with TensorBoard's own reader against the run's log.

Used by test_tensorboard.sh, run by the private venv's python (scripts/install-deps.sh makes it).
Prints TAP lines ("ok - ..." / "not ok - ..."), one per check, each prefixed by the case's name.

  tensorboard_check.py CASE DIR LOG [--expect-tags T1,T2,...] [--tb-interval N] [--pid PID]
                       [--killed] [--queue N --per-iteration N]

Every scalar is compared with the log line or validation block of the same iteration: the values
(within the log's printed precision and float32's), the steps of each tag and the x-axis of each
"vs samples" tag (the consumed samples of the log line at that iteration); and the printed text of
the float32 fields, to the digit, as Megatron's format strings make it from the float32 values the
events hold (check_exact).
"""
import argparse
import glob
import math
import os
import re
import socket
import struct
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.summary.writer.record_writer import masked_crc32c

failed = 0
case = ""


def tap(ok, what):
    global failed
    print(("ok - " if ok else "not ok - ") + case + ": " + what)
    if not ok:
        failed += 1


LINE = re.compile(r"^ \[[^]]*\] iteration +(\d+)/ *\d+ \|(.*)$")
FIELD = re.compile(r" ([a-z A-Z_/()]+?): ([^|]+) \|")
VALID = re.compile(r"^ validation loss at iteration (\d+)(?: on (?:validation|test) set)? \| "
                   r"lm loss value: (\S+) \| lm loss PPL: (\S+) \|")
TIMER = re.compile(r"^    (\S+) \.+: \(([0-9.]+), ([0-9.]+)\)$")


def parse_log(path):
    """{iteration: {field: text}}, [(iteration, loss, ppl)], {iteration: {timer: max ms}}."""
    lines, valid, timers = {}, [], {}
    last = None
    for raw in open(path, errors="replace"):
        raw = raw.rstrip("\n")
        m = LINE.match(raw)
        if m:
            last = int(m.group(1))
            lines[last] = {k.strip(): v.strip() for k, v in FIELD.findall(m.group(2) + " |")}
            continue
        m = VALID.match(raw)
        if m:  # the printed texts (check_exact); float() where compared as numbers
            valid.append((int(m.group(1)), m.group(2), m.group(3)))
            continue
        m = TIMER.match(raw)
        if m and last is not None:
            timers.setdefault(last, {})[m.group(1)] = float(m.group(3))
    return lines, valid, timers


def close(got, want, rel=0.0, abs_=0.0):
    return abs(got - want) <= abs_ + rel * abs(want) + 1e-7 * abs(want)  # float32's rounding


def check_file(d, args):
    files = glob.glob(os.path.join(d, "*"))
    tap(len(files) == 1, "one file in the directory (%d)" % len(files))
    if not files:
        return None
    name = os.path.basename(files[0])
    m = re.match(r"^events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+)\.0$", name)
    tap(bool(m) and m.group(2) == socket.gethostname(),
        "named events.out.tfevents.<time>.<hostname>.<pid>.0 (%s)" % name)
    if args.pid and m:
        tap(m.group(3) == args.pid, "written by the last rank (pid %s, file's %s)" % (args.pid, m.group(3)))
    # every record whole, both CRCs right (a killed run included)
    data = open(files[0], "rb").read()
    off, records, good = 0, 0, True
    while off < len(data):
        if off + 12 > len(data):
            good = False
            break
        (n,) = struct.unpack("<Q", data[off:off + 8])
        (c,) = struct.unpack("<I", data[off + 8:off + 12])
        body = data[off + 12:off + 12 + n]
        tail = data[off + 12 + n:off + 16 + n]
        if c != masked_crc32c(data[off:off + 8]) or len(tail) != 4 or \
                struct.unpack("<I", tail)[0] != masked_crc32c(body):
            good = False
            break
        off += 16 + n
        records += 1
    tap(good, "every record whole with its masked CRC-32Cs (%d records, %d bytes)" % (records, len(data)))
    first = next(iter(EventFileLoader(files[0]).Load()), None)
    tap(first is not None and first.file_version == "brain.Event:2",
        "first event is file_version brain.Event:2")
    return records


def check_args(ea, log):
    """write_args_to_tensorboard: one text per row of the log's arguments block, at step 0."""
    from tensorboard.util import tensor_util
    rows, inside = {}, False
    for raw in open(log, errors="replace"):
        if "-- arguments --" in raw:
            inside = True
        elif "end of arguments" in raw:
            inside = False
        elif inside:
            m = re.match(r"^  (\S+) \.* ?(.*)$", raw.rstrip("\n"))
            if m:
                rows[m.group(1) + "/text_summary"] = m.group(2)
    tags = set(ea.Tags()["tensors"])
    tap(rows and tags == set(rows), "a text per argument of the block (%d rows, %d texts; missing %s, extra %s)"
        % (len(rows), len(tags), sorted(set(rows) - tags)[:3], sorted(tags - set(rows))[:3]))
    bad = []
    for tag in sorted(tags & set(rows)):
        ev = ea.Tensors(tag)
        got = tensor_util.make_ndarray(ev[0].tensor_proto).tolist()
        if len(ev) != 1 or ev[0].step != 0 or got != [rows[tag].encode()] or \
                ea.SummaryMetadata(tag).plugin_data.plugin_name != "text":
            bad.append((tag, got, rows[tag]))
    tap(not bad, "each text holds its argument's value, text plugin, step 0 (differing: %s)" % bad[:3])


def check_exact(sc, lines, valid):
    """Each line's text re-made by Megatron's own format strings from the float32 values
    TensorBoard holds (torch's add_scalar keeps float32, the dtype Megatron prints from): the
    learning rate, loss scale, grad norm and num zeros of the line's iteration, the lm loss as
    training_log's float32 total_loss_dict over the line's window divided in double, and each
    validation block's value and PPL."""
    import numpy as np
    at = {t: dict(pts) for t, pts in sc.items()}
    fmt = {"learning-rate": ("learning rate", "{:.6E}"), "loss-scale": ("loss scale", "{:.1f}"),
           "grad-norm": ("grad norm", "{:.3f}"), "num-zeros": ("num zeros", "{}")}
    for tag, (field, spec) in fmt.items():
        pts = [(it, spec.format(float(np.float32(v))), lines[it][field]) for it, v in
               sorted(at.get(tag, {}).items()) if it in lines and field in lines[it]]
        bad = [p for p in pts if p[1] != p[2]]
        if pts:
            tap(not bad, "'%s' printed as Megatron formats the float32 value, to the digit (%d lines; "
                "(iteration, Megatron's, ours) differing: %s)" % (field, len(pts), bad[:3]))
    loss, logged = at.get("lm loss", {}), sorted(lines)
    pts = []
    for k, it in enumerate(logged):
        window = range(1 if k <= 1 else logged[k - 1] + 1, it + 1)  # main's first line resets nothing
        f = lines[it]
        if "lm loss" not in f or f.get("number of skipped iterations") != "0" or \
                any(i not in loss for i in window):
            continue
        total = np.float32(0.0)
        for i in window:
            total = np.float32(total + np.float32(loss[i]))
        pts.append((it, "{:.6E}".format(float(total) / float(max(1, len(window)))), f["lm loss"]))
    bad = [p for p in pts if p[1] != p[2]]
    if pts:
        tap(not bad, "'lm loss' as training_log's float32 total over the window, to the digit (%d "
            "lines; differing: %s)" % (len(pts), bad[:3]))
    got = sc.get("lm loss validation", [])  # in writing order: the end-of-run blocks share a step
    if got and len(got) == len(valid):
        bad = []
        for (it, v), (vit, text, ppl) in zip(got, valid):
            want = ("{:.6E}".format(float(np.float32(v))),
                    "{:.6E}".format(math.exp(min(20, float(np.float32(v))))))
            if (it, want) != (vit, (text, ppl)):
                bad.append((it, want, (text, ppl)))
        tap(not bad, "validation value and PPL as Megatron formats the float32 loss, to the digit "
            "(%d blocks; differing: %s)" % (len(got), bad[:3]))


def check_moe(sc, lines, args):
    """track_moe_metrics' scalars: each MoE loss at every iteration, averaged over each log line's
    window as the line's value; with --moe-per-layer-logging each layer's 'moe/<name>_layer_<i>',
    their sum over the MoE layers the loss's value."""
    logged, last = sorted(lines), max(lines) if lines else 0
    for name in [n for n in args.moe.split(",") if n]:
        pts = dict(sc.get(name, []))
        tap(sorted(pts) == list(range(1, last + 1)), "'%s' at every iteration (%s)" % (name, sorted(pts)[:4]))
        bad, compared = [], 0
        for k, it in enumerate(logged):
            window = range(1 if k <= 1 else logged[k - 1] + 1, it + 1)
            if name not in lines[it] or any(i not in pts for i in window):
                continue
            got = sum(pts[i] for i in window) / len(window)
            compared += 1
            if not close(got, float(lines[it][name]), 2e-6):
                bad.append((it, got, lines[it][name]))
        tap(not bad and compared == len(logged), "'%s' averaged as each log line's (%d lines; differing: %s)"
            % (name, compared, bad[:3]))
        if not args.moe_layers:
            continue
        layers, moe_layers = (int(x) for x in args.moe_layers.split(","))
        per = [dict(sc.get("moe/%s_layer_%d" % (name, i), [])) for i in range(layers)]
        bad = [it for it in pts if any(it not in p for p in per) or
               not close(sum(p[it] for p in per) / moe_layers, pts[it], 2e-6)]
        tap(not bad and pts, "'moe/%s_layer_<i>' for %d layers, summing to '%s' (differing: %s)"
            % (name, layers, name, bad[:3]))


def main():
    global case
    p = argparse.ArgumentParser()
    p.add_argument("case")
    p.add_argument("dir")
    p.add_argument("log")
    p.add_argument("--expect-tags", default="")
    p.add_argument("--tb-interval", type=int, default=1)
    p.add_argument("--pid", default="")
    p.add_argument("--killed", action="store_true")
    p.add_argument("--queue", type=int, default=0)
    p.add_argument("--per-iteration", type=int, default=0)
    p.add_argument("--args", action="store_true", help="compare the texts with the arguments block")
    p.add_argument("--moe", default="", help="the MoE losses' names (track_moe_metrics' tags)")
    p.add_argument("--moe-layers", default="", help="with --moe-per-layer-logging: LAYERS,MOE_LAYERS")
    args = p.parse_args()
    case = args.case

    records = check_file(args.dir, args)
    ea = EventAccumulator(args.dir, size_guidance={"scalars": 0, "tensors": 0})
    ea.Reload()
    tags = set(ea.Tags()["scalars"])
    sc = {t: [(e.step, e.value) for e in ea.Scalars(t)] for t in tags}
    lines, valid, timers = parse_log(args.log)

    if args.expect_tags:
        want = set(args.expect_tags.split(","))
        tap(tags == want, "tags as Megatron's for these flags (missing %s, extra %s)"
            % (sorted(want - tags), sorted(tags - want)))

    if args.args:
        check_args(ea, args.log)

    if args.queue:
        # the version and the arguments' texts flushed at start-up, iteration 1's scalars by its
        # log line, then only when --tensorboard-queue-size events wait
        n = records - 1 - len(ea.Tags()["tensors"]) - args.per_iteration
        tap(n > 0 and n % args.queue == 0,
            "after the first log line, events reached the file %d at a time (%d)" % (args.queue, n))
        return

    # training scalars: at every iteration divisible by --tensorboard-log-interval that ran
    last = max(lines) if lines else 0
    steps = [s for s, _ in sc.get("lm loss", [])]
    if args.killed:
        ok = steps == [i for i in range(1, len(steps) + 1) if i % args.tb_interval == 0] or \
            steps == list(range(args.tb_interval, args.tb_interval * (len(steps) + 1), args.tb_interval))
        tap(ok and steps and steps[-1] >= last,
            "lm loss up to the last log line (%d) survives SIGKILL (steps to %s)" % (last, steps[-1:]))
    else:
        want = [i for i in range(1, last + 1) if i % args.tb_interval == 0]
        tap(steps == want, "lm loss at iterations %s (%s)" % (want[:4], steps[:4]))
    for t, pts in sc.items():
        if t.endswith(" vs samples"):
            base = sc.get(t[: -len(" vs samples")], [])
            ok = len(base) == len(pts) and all(v == bv for (_, v), (_, bv) in zip(pts, base))
            # the x-axis: consumed samples of the same iteration's log line
            for (it, _), (x, _) in zip(base, pts):
                if it in lines and int(lines[it]["consumed samples"]) != x:
                    ok = False
            tap(ok, "'%s' holds '%s' against consumed samples" % (t, t[: -len(" vs samples")]))

    # per-iteration values against the log lines (--log-interval 1: each line is its iteration,
    # except the second, which averages the first two as Megatron main's does)
    fields = {
        "learning-rate": ("learning rate", 1e-6, 0.0),
        "decoupled-learning-rate": ("decoupled learning rate", 1e-6, 0.0),
        "batch-size": ("global batch size", 0.0, 0.0),
        "loss-scale": ("loss scale", 0.0, 0.05),
        "grad-norm": ("grad norm", 0.0, 0.0005),
        "num-zeros": ("num zeros", 0.0, 0.0),
        "params-norm": ("params norm", 0.0, 0.0005),
        "world-size": (None, 0, 0),
    }
    for tag, (field, rel, abs_) in fields.items():
        if tag not in sc:
            continue
        bad = [(it, v) for it, v in sc[tag] if it in lines and field and
               (field not in lines[it] or not close(v, float(lines[it][field]), rel, abs_))]
        if tag == "world-size":
            bad = [(it, v) for it, v in sc[tag] if v != float(os.environ.get("TB_WORLD", "1"))]
        tap(not bad and sc[tag], "'%s' equals the log's %s (%d points; differing: %s)"
            % (tag, field or "world size", len(sc[tag]), bad[:3]))
    if "lm loss" in sc:
        # a line's lm loss averages the iterations since the previous line (the first line's
        # iteration included, which main logs without resetting); compared where TensorBoard has
        # every one of them and none was skipped (a skipped step's loss is written, not averaged)
        loss = dict(sc["lm loss"])
        logged = sorted(lines)
        bad, compared = [], 0
        for k, it in enumerate(logged):
            f = lines[it]
            start = 1 if k <= 1 else logged[k - 1] + 1
            window = range(start, it + 1)
            if "lm loss" not in f or f.get("number of skipped iterations") != "0" or \
                    any(i not in loss for i in window):
                continue
            got = sum(loss[i] for i in window) / len(window)
            compared += 1
            if not close(got, float(f["lm loss"]), 2e-6):
                bad.append((it, got, f["lm loss"]))
        tap(not bad and compared > 0, "'lm loss' averaged as each log line's lm loss (%d lines; differing: %s)"
            % (compared, bad[:3]))
    check_moe(sc, lines, args)
    if "grad-norm" in sc and any("grad norm" not in f for f in lines.values()):
        skipped = {it for it, f in lines.items() if "grad norm" not in f}
        tap(not skipped & {s for s, _ in sc["grad-norm"]}, "no grad-norm at skipped iterations %s"
            % sorted(skipped)[:4])

    check_exact(sc, lines, valid)

    # at log lines: iteration time, throughput, timers
    if "iteration-time" in sc:
        bad = [(it, v) for it, v in sc["iteration-time"] if it not in lines or
               not close(v * 1000, float(lines[it]["elapsed time per iteration (ms)"]), 0, 0.05)]
        tap(not bad and set(dict(sc["iteration-time"])) == set(lines),
            "'iteration-time' at each log line equals its elapsed time (differing: %s)" % bad[:3])
    if "throughput" in sc:
        bad = [(it, v) for it, v in sc["throughput"] if
               not close(v, float(lines[it]["throughput per GPU (TFLOP/s/GPU)"]), 0, 0.05)]
        tap(not bad, "'throughput' equals the log's TFLOP/s/GPU (differing: %s)" % bad[:3])
    timer_tags = [t for t in sc if t.endswith("-time") and t != "iteration-time"]
    if timers and timer_tags:
        bad = []
        for it, named in timers.items():
            for name, ms in named.items():
                got = dict(sc.get(name + "-time", [])).get(it)
                if got is None or not close(got * 1000, ms, 0, 0.005):
                    bad.append((it, name, got, ms))
        tap(not bad and timer_tags, "'<timer>-time' equals each timer's max in the log (%d tags; differing: %s)"
            % (len(timer_tags), bad[:3]))

    # validation: each block of the log, at its iteration
    if valid or "lm loss validation" in sc:
        got = sc.get("lm loss validation", [])
        ok = [s for s, _ in got] == [it for it, _, _ in valid] and \
            all(close(v, float(want), 2e-6) for (_, v), (_, want, _) in zip(got, valid))
        tap(ok, "'lm loss validation' equals each validation block (%s vs %s)"
            % (got[:3], [(i, l) for i, l, _ in valid][:3]))
        if "lm loss validation ppl" in sc:
            got = sc["lm loss validation ppl"]
            ok = [s for s, _ in got] == [it for it, _, _ in valid] and \
                all(close(v, float(want), 2e-6) for (_, v), (_, _, want) in zip(got, valid))
            tap(ok, "'lm loss validation ppl' equals each block's PPL")

    if "mem-allocated-bytes" in sc:
        plan = None
        for raw in open(args.log, errors="replace"):
            m = re.match(r"^    total +([0-9.]+) MiB$", raw.rstrip())
            if m:
                plan = float(m.group(1)) * 1024 * 1024
        v = sc["mem-allocated-bytes"][-1][1]
        ok = plan is not None and abs(v - plan) <= 0.01 * plan + 0.006 * 1024 * 1024 and \
            sc["mem-reserved-bytes"][-1][1] == v and sc["mem-max-allocated-bytes"][-1][1] >= v and \
            sc["mem-allocated-count"][-1][1] > 0
        tap(ok, "memory scalars match the memory plan (%s bytes, plan %s)" % (v, plan))


if __name__ == "__main__":
    main()
    sys.exit(1 if failed else 0)
