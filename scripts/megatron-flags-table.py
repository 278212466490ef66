#!/usr/bin/env python3
"""Writes the flag-table entries for the option strings of Megatron-LM's pretrain_gpt.py that
the table lacks: the rest of the surface, recognised and refused by name.

Usage: python3 scripts/megatron-flags-table.py   (from the repository root)

Reads test/fixtures/megatron-flags-*.tsv (scripts/megatron-flags.py's output for core_v0.15.0
and main) and the names already in config/flags_{model,train,legacy}.c, and writes
config/flags_moe.c, flags_mla_fp8.c, flags_serving.c, flags_services.c and flags_misc.c. It was
run once to write those files; they are the table from then on, edited by hand like the
others (re-running overwrites them).

Each entry takes Megatron's type, nargs, choices, default, group and help: main's where main
has the flag, core_v0.15.0's otherwise, except the group, which is core_v0.15.0's title where it
has the flag (the table's older parts use those titles) and main's otherwise. Choices are the
union of both versions'. Status: a no-op only for the few flags listed in NOOP below, whose
effect lies in machinery megatron-c does not have (the run is the same); everything else "not
implemented yet", with the feature it belongs to as the note, so that a non-default value is
refused by name.
"""
import ast
import csv
import glob
import re
import sys

FIXTURES = sorted(glob.glob("test/fixtures/megatron-flags-*.tsv"))
OLD_PARTS = ["config/flags_model.c", "config/flags_train.c", "config/flags_legacy.c"]

# Owned by other branches (being added there): not written here.
OWNED = set(
    """--rampup-batch-size --decoupled-lr --decoupled-min-lr --apply-layernorm-1p
--check-weight-hash-across-dp-replicas-interval --log-progress --profile --profile-step-start
--profile-step-end --profile-ranks --use-pytorch-profiler --use-persistent-ckpt-worker
--dist-ckpt-workers --ckpt-assume-constant-structure --non-persistent-save-interval
--non-persistent-ckpt-type --non-persistent-global-ckpt-dir --non-persistent-local-ckpt-dir
--non-persistent-local-ckpt-algo --persistent-save-interval""".split()
)


def owned(name):
    return name in OWNED or "tensorboard" in name or "wandb" in name


# Accepted and ignored: what they steer does not exist in megatron-c, so the run is the same.
NOOP = {
    "--manual-gc": "Python's garbage collector; megatron-c has none",
    "--manual-gc-interval": "Python's garbage collector; megatron-c has none",
    "--no-manual-gc-eval": "Python's garbage collector; megatron-c has none",
    "--manual-gc-eval": "Python's garbage collector; megatron-c has none",
    "--disable-jit-fuser": "TorchScript's fuser; megatron-c's kernels are C and CUDA, never "
    "TorchScript",
    "--disable-manual-gc-eval": "Python's garbage collector; megatron-c has none",
    "--disable-msc": "turns off the Multi-Storage Client (a no-op at main), which megatron-c "
    "does not use",
}
# Not no-ops although megatron-c lacks what they steer: Megatron checks the run against them.
TODO_NOTES = {
    # Megatron then refuses --use-distributed-optimizer with torch checkpoints
    "--disable-gloo-process-groups": "Megatron's checks of runs without Gloo process groups",
}

# The same by pattern: switches that only turn off what megatron-c does not have.
NOOP_PATTERNS = [
    (r"^--(disable|no)-flight-recorder-", "PyTorch's NCCL flight recorder (TORCH_NCCL_*); "
     "megatron-c has none"),
    (r"^--(disable|no)-tp-comm-", "only used with --tp-comm-overlap (not implemented yet); "
     "ignored otherwise, as in Megatron"),
]


def noop_reason(name):
    if name in NOOP:
        return NOOP[name]
    return next((why for pat, why in NOOP_PATTERNS if re.search(pat, name)), None)

# The feature a flag belongs to, by its name (first match), else by its group.
BY_NAME = [
    (r"moe|expert|router", "mixture of experts (MoE)"),
    (r"mtp", "multi-token prediction"),
    (r"fp8|fp4|mxfp|nvfp|first-last-layers-bf16|num-layers-at-(start|end)-in-bf16",
     "FP8/FP4 training"),
    (r"kitchen|quant", "quantized training"),
    (r"fsdp|zero-stage|data-parallel-sharding", "FSDP"),
    (r"cuda-graph|graph-scope|cuda_graph", "CUDA graphs"),
    (r"q-lora|kv-lora|qk-head-dim|v-head-dim|qk-pos-emb|mla|latent", "multi-latent attention (MLA)"),
    (r"mamba|hybrid", "hybrid Mamba models"),
    (r"tp-comm|tp-overlap", "Transformer Engine's tensor-parallel communication overlap"),
    (r"offload", "offloading to host memory"),
    (r"inference|kv-cache|prefill|decode", "inference"),
    (r"heterogeneous", "heterogeneous layer configurations"),
    (r"\bcp-|context-parallel|hierarchical-context", "context parallelism"),
    (r"yarn|mrope|mscale|beta-fast|beta-slow|original-max-position", "YaRN and mRoPE positions"),
    (r"distill|teacher|kd-", "knowledge distillation"),
    (r"straggler", "the straggler detector"),
    (r"one-logger|one_logger", "one-logger telemetry"),
    (r"retro", "Retro"),
    (r"msc", "the Multi-Storage Client"),
    (r"linear-attention|gated-delta|attention-variant|dsa|indexer", "other attention variants"),
    (r"muon|soap|lion|adaptive|ademamix|precondition|newton-schulz|orthogonal", "other optimizers"),
    (r"torch-dcp|dcp|dist-ckpt|async-save|ckpt-fully-parallel|fully-parallel", "torch_dist checkpoints"),
    (r"nccl|ub-|userbuffer|symmetric|gloo", "NCCL tuning"),
    (r"^fim-", "fill-in-the-middle (FIM) data"),
    (r"^mup-|^use-mup", "Maximal Update Parametrization (MuP)"),
    (r"mhc", "mHC residual connections"),
    (r"flight-recorder", "PyTorch's NCCL flight recorder"),
    (r"^gdp-|^linear-(conv|key|num|value)", "gated delta net layers"),
    (r"^qk-clip", "QK-clip"),
    (r"^save-(activations|dgrads|params|wgrads)-interval", "dumping tensors for debugging"),
    (r"tiktoken|tokenizer-(hf|sentencepiece|metadata|special)|null-tokenizer|chat-template|"
     r"trust-remote-code|gigatoken", "other tokenizers and their options"),
]
BY_GROUP = {
    "moe": "mixture of experts (MoE)",
    "mla": "multi-latent attention (MLA)",
    "inference": "inference",
    "rl": "reinforcement learning",
    "Logits Distillation": "knowledge distillation",
    "straggler": "the straggler detector",
    "one logger": "one-logger telemetry",
    "ft_package": "NVIDIA Resiliency Extension fault tolerance",
    "In-process restart": "in-process restart",
    "rerun engine": "the rerun state machine",
    "msc": "the Multi-Storage Client",
    "workload inspector": "the workload inspector server",
    "opentelemetry": "OpenTelemetry tracing",
    "fault injector": "fault injection",
    "sft": "supervised fine-tuning",
    "modelopt-generic": "Model Optimizer (nvidia-modelopt)",
    "autoresume": "ADLR autoresume",
    "biencoder": "biencoder (ICT) models",
    "vision": "vision models",
    "retro": "Retro",
    "heterogeneous architecture": "heterogeneous layer configurations",
    "experimental_attention_variant": "other attention variants",
    "kitchen": "quantized training",
    "config logger": "the config logger",
    "profiling": "profiling",
}

# Which file each feature's flags go to.
FILES = {
    "config/flags_moe.c": ("mc_flags_moe", "mixture of experts and multi-token prediction",
                           {"mixture of experts (MoE)", "multi-token prediction"}),
    "config/flags_mla_fp8.c": ("mc_flags_mla_fp8", "multi-latent attention, FP8/FP4 and "
                               "quantized training, other attention variants",
                               {"multi-latent attention (MLA)", "FP8/FP4 training",
                                "quantized training", "other attention variants",
                                "YaRN and mRoPE positions"}),
    "config/flags_serving.c": ("mc_flags_serving", "inference, reinforcement learning, "
                               "distillation, fine-tuning and Model Optimizer",
                               {"inference", "reinforcement learning", "knowledge distillation",
                                "supervised fine-tuning", "Model Optimizer (nvidia-modelopt)"}),
    "config/flags_services.c": ("mc_flags_services", "the services around a run: fault "
                                "tolerance, restarts, straggler detection, telemetry, storage",
                                {"the straggler detector", "one-logger telemetry",
                                 "NVIDIA Resiliency Extension fault tolerance",
                                 "in-process restart", "the rerun state machine",
                                 "the Multi-Storage Client", "the workload inspector server",
                                 "OpenTelemetry tracing", "fault injection", "ADLR autoresume",
                                 "the config logger"}),
}
MISC = ("config/flags_misc.c", "mc_flags_misc", "the rest: model, parallelism, training, "
        "checkpointing, data and logging options megatron-c lacks")


def load(path):
    with open(path) as f:
        return {r["option"]: r for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)}


def enum_name(s):
    m = re.match(r"<\w+\.(\w+): .*>$", s)
    return m.group(1) if m else s


def first_sentence(help_text):
    s = re.split(r"(?<=[a-z0-9)])\. ", help_text.strip())[0].rstrip(".")
    s = s[0].lower() + s[1:] if s[:2].isalpha() and not s[:2].isupper() else s
    return s if len(s) <= 72 else s[:69].rsplit(" ", 1)[0] + " ..."


# Groups that are one feature whatever their flags are named (--export-kv-cache-quant is
# Model Optimizer's, not quantized training).
WHOLE_GROUPS = {"modelopt-generic", "rl", "Logits Distillation", "sft"}


def feature(name, row):
    if row["group"] in WHOLE_GROUPS:
        return BY_GROUP[row["group"]]
    for pat, what in BY_NAME:
        if re.search(pat, name[2:]):
            return what
    if row["group"] in BY_GROUP:
        return BY_GROUP[row["group"]]
    return None


def c_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def wrap(s, first, rest, width=99):
    """s as C string literals, the first line after `first` characters, the next ones after
    `rest` spaces, each line within width."""
    out, line, col = [], "", first
    for word in re.split(r"(?<= )", s):
        if line and col + len(c_str(line + word)) > width:
            out.append(c_str(line))
            line, col = "", rest
        line += word
    out.append(c_str(line))
    return ("\n" + " " * rest).join(out)


def is_negative(name, row, rows):
    if not name.startswith("--no-"):
        return False
    other = rows.get("--" + name[5:])
    return bool(other and other["dest"] == row["dest"] and other["action"] == row["action"])


def type_and_default(name, row, rows, choices):
    """The C type macro and Megatron's default as the table writes it (None when None)."""
    act, typ, nargs, d = row["action"], row["type"], row["nargs"], row["default"]
    if act in ("store_true", "store_false", "boolean_optional"):
        neg = act == "store_false" or (act == "boolean_optional" and is_negative(name, row, rows))
        if neg:
            return "FALSE_IF_GIVEN", "False" if d == "False" else None
        return "TRUE_IF_GIVEN", "True" if d == "True" else None
    if nargs:
        n = {"+": -1, "*": 0}.get(nargs, None)
        n = int(nargs) if n is None else n
        macro = ("INT_LIST(%d)" if typ == "int" else "LIST(%d)") % n
        dv = None
        if d not in ("None", "") and not d.startswith("stub:"):
            try:
                v = ast.literal_eval(d)
                dv = " ".join(str(x) for x in v) if isinstance(v, (list, tuple)) else str(v)
            except (ValueError, SyntaxError):
                dv = d
        return macro, dv
    d = enum_name(d)
    if choices:
        return "CHOICE(" + ", ".join(c_str(c) for c in choices) + ")", d if d in choices else None
    if d == "None" or d.startswith("stub:"):
        d = None
    if typ == "int":
        return "INT64", d if d is not None and re.fullmatch(r"-?\d+", d) else None
    if typ == "float":
        try:
            float(d)
            return "FLOAT", d
        except (TypeError, ValueError):
            return "FLOAT", None
    return "STRING", d


def entry(name, rows_by_ver, main_rows, old_rows):
    row = main_rows.get(name) or old_rows[name]
    rows = main_rows if name in main_rows else old_rows
    group = old_rows[name]["group"] if name in old_rows else row["group"]
    # Choices where the version whose row it is has them (main's --export-quant-cfg takes any
    # string, core_v0.15.0's a choice), both versions' where both have them.
    choices = []
    for r in (main_rows.get(name), old_rows.get(name)):
        if row["choices"] and r and r["choices"] and r["action"] == row["action"]:
            for c in r["choices"].split("|"):
                c = enum_name(c)
                if c not in choices:
                    choices.append(c)
    macro, d = type_and_default(name, row, rows, choices)
    what = feature(name, row)
    if noop_reason(name):
        status = "NOOP(%s)" % c_str(noop_reason(name))
    else:
        note = TODO_NOTES.get(name) or what or first_sentence(row["help"]) or name[2:]
        status = "TODO(%s)" % c_str(note)
    # main hides --cuda-graph-scope (argparse.SUPPRESS); core_v0.15.0 says what it was
    helps = [r["help"] for r in (row, old_rows.get(name)) if r and r["help"] != "==SUPPRESS=="]
    help_text = next((h for h in helps if h), "(no help in Megatron)")
    parts = ["{.name = %s" % c_str(name), group_macro(group), macro]
    if d is not None:
        parts.append(".def = %s" % c_str(d))
    parts.append(status)
    lines, line = [], "   "
    for part in parts:  # packed into lines of at most 99 columns
        if line.strip() and len(line) + 2 + len(part) > 98:
            lines.append(line + ",")
            line = "    "
        line += (", " if line.strip() else " ") + part if line.strip() else " " + part
    lines.append(line + ",")
    body = "     .help = " + wrap(help_text, 13, 13) + "},"
    return what, group, "\n".join(lines) + "\n" + body


def group_macro(group):
    """The short macro a table file defines for a group title ("transformer configuration": TC)."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", group) if w]
    return "G_" + ("".join(w[0] for w in words) if len(words) > 1 else words[0]).upper()


def main():
    vers = {p: load(p) for p in FIXTURES}
    main_rows = next(v for p, v in vers.items() if "-main-" in p)
    old_rows = next(v for p, v in vers.items() if "-main-" not in p)
    have = set()
    for p in OLD_PARTS:
        have |= set(re.findall(r'\.(?:name|alias) = "([^"]+)"', open(p).read()))
    names = sorted((set(main_rows) | set(old_rows)) - have)
    out = {path: [] for path in list(FILES) + [MISC[0]]}
    groups = {}
    for name in names:
        if owned(name):
            continue
        what, group, text = entry(name, vers, main_rows, old_rows)
        path = next((p for p, (_, _, feats) in FILES.items() if what in feats), MISC[0])
        out[path].append(text)
        groups.setdefault(path, {})[group_macro(group)] = group
    for path, entries in out.items():
        array, about = (FILES[path][0], FILES[path][1]) if path in FILES else (MISC[1], MISC[2])
        with open(path, "w") as f:
            intro = (
                "Flag table, part %s: %s. Megatron-LM's flags that megatron-c recognises and "
                "refuses by name (or, the no-ops, accepts and ignores), written first by "
                "scripts/megatron-flags-table.py from Megatron's parsers at core_v0.15.0 and main "
                "(test/fixtures/megatron-flags-*.tsv); type, default, group and help are "
                "Megatron's." % (path.split("_", 1)[1][:-2], about)
            )
            lines, line = [], ""
            for word in intro.split():
                if line and len(line) + 1 + len(word) > 92:
                    lines.append(line)
                    line = word
                else:
                    line = (line + " " + word).strip()
            lines.append(line)
            f.write("/* " + "\n * ".join(lines) + " */\n")
            f.write('#include "config/flags_table.h"\n\n')
            for macro, title in sorted(groups[path].items()):
                f.write("#define %s .group = %s\n" % (macro, c_str(title)))
            assert len(set(groups[path].values())) == len(groups[path])
            f.write("\n"
                    "/* One flag per entry, its fields packed as written. */\n"
                    "/* clang-format off */\n"
                    "const mc_flag_t %s[] = {\n" % array)
            f.write("\n".join(entries) + "\n};\n/* clang-format on */\n\n")
            f.write("const size_t %s_count = sizeof(%s) / sizeof(%s[0]);\n" % (array, array, array))
        print(path, len(entries), file=sys.stderr)


if __name__ == "__main__":
    main()
