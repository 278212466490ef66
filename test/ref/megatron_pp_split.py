"""Megatron-LM's own pipeline layer split, for test/unit/parallel/test_pp_split.c.

Runs, taken out of Megatron-LM's files by their syntax tree (the modules themselves need torch
and the whole of megatron.core):

  - transformer_block.py        get_num_layers_to_build
  - transformer_layer.py        get_transformer_layer_offset
  - pipeline_parallel/utils.py  is_vp_first_stage, is_vp_last_stage
  - transformer_config.py       the statements of TransformerConfig.__post_init__ that check the
                                split (the ones naming num_layers_in_first_pipeline_stage or
                                account_for_embedding_in_pipeline_split)

on a config object holding the fields they read, for a table of cases, and prints one line per
case (test/fixtures/megatron_pp_split.txt):

    <L> <pp> <vpp> <first> <last> <emb> <loss> ok <offset>+<n> ...   every virtual stage, chunk
                                                                    major: (chunk 0, rank 0),
                                                                    (chunk 0, rank 1), ...
    <L> <pp> <vpp> <first> <last> <emb> <loss> refused              Megatron raises
    <L> <pp> <vpp> <first> <last> <emb> <loss> crashed              Megatron divides by zero

first/last 0: unset (None); vpp 1: None (validate_args' rule). Every case with vpp > 1 has
pp > 1 (validate_args refuses interleaving without pipelining). Uneven first/last stages are
tabled with pp > 1 only: with pp 1 Megatron's checks pass some counts by accident (first 1,
last 4 of 1 layer) and the one stage then builds the last count whatever --num-layers says;
megatron-c refuses uneven stages without pipelining. Megatron raises (AssertionError,
ValueError) for a split it refuses: "refused". With pp 2, both first and last given and virtual
stages, its checks pass but get_transformer_layer_offset divides by the number of middle stages
(0) on rank 1: "crashed"; megatron-c runs that split (the C test checks it holds the layers
once, first and last counts on their ranks). A case Megatron accepts whose
stages do not hold layers 0..L-1 once each, in order, is a model Megatron builds wrongly:
the C test expects megatron-c to refuse it.

    M=/work/.mirror/NVIDIA+Megatron-LM/repo
    python3 test/ref/megatron_pp_split.py $M HEAD > test/fixtures/megatron_pp_split.txt

(the first argument a git directory, bare or not, the second a revision of it).
"""
import ast
import subprocess
import sys
import types

FILES = {
    "block": "megatron/core/transformer/transformer_block.py",
    "layer": "megatron/core/transformer/transformer_layer.py",
    "utils": "megatron/core/pipeline_parallel/utils.py",
    "config": "megatron/core/transformer/transformer_config.py",
}


def source(git_dir, rev, path):
    return subprocess.run(["git", "-C", git_dir, "show", f"{rev}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def functions(text, path, names):
    tree = ast.parse(text)
    keep = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    if len(keep) != len(names):
        sys.exit(f"{path}: not all of {names} found")
    return keep


def split_checks(text, path):
    """TransformerConfig.__post_init__'s top-level statements that check the split, as a
    function of self."""
    tree = ast.parse(text)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TransformerConfig")
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__post_init__")
    keep = [s for s in init.body
            if any(w in ast.unparse(s) for w in ("num_layers_in_first_pipeline_stage",
                                                 "account_for_embedding_in_pipeline_split"))]
    if len(keep) != 2:  # the conflict check, the layout / uneven / account-for chain
        sys.exit(f"{path}: expected 2 split checks in __post_init__, found {len(keep)}")
    fn = ast.FunctionDef(name="split_checks", args=ast.arguments(
        posonlyargs=[], args=[ast.arg(arg="self")], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=keep, decorator_list=[], returns=None, type_params=[])
    return [ast.fix_missing_locations(fn)]


def load(git_dir, rev):
    text = {k: source(git_dir, rev, p) for k, p in FILES.items()}
    utils = types.ModuleType("megatron.core.pipeline_parallel.utils")
    exec(compile(ast.Module(body=functions(text["utils"], FILES["utils"],
                                           ["is_vp_first_stage", "is_vp_last_stage"]),
                            type_ignores=[]), FILES["utils"], "exec"), utils.__dict__)
    # get_transformer_layer_offset imports is_vp_first_stage from here
    sys.modules["megatron.core.pipeline_parallel.utils"] = utils
    env = {"Optional": __import__("typing").Optional, "is_vp_first_stage": utils.is_vp_first_stage,
           "is_vp_last_stage": utils.is_vp_last_stage,
           "TransformerConfig": object, "parallel_state": None, "LayerType": None}
    body = (functions(text["block"], FILES["block"], ["get_num_layers_to_build"])
            + functions(text["layer"], FILES["layer"], ["get_transformer_layer_offset"])
            + split_checks(text["config"], FILES["config"]))
    exec(compile(ast.Module(body=body, type_ignores=[]), "megatron", "exec"), env)
    return env


def split(env, L, pp, vpp, first, last, emb, loss):
    c = types.SimpleNamespace(
        num_layers=L, pipeline_model_parallel_size=pp,
        virtual_pipeline_model_parallel_size=vpp if vpp > 1 else None,
        num_layers_in_first_pipeline_stage=first or None,
        num_layers_in_last_pipeline_stage=last or None,
        account_for_embedding_in_pipeline_split=bool(emb),
        account_for_loss_in_pipeline_split=bool(loss),
        pipeline_model_parallel_layout=None, mtp_num_layers=None)
    try:
        env["split_checks"](c)
        out = []
        for v in range(vpp):
            for r in range(pp):
                vp = v if vpp > 1 else None
                n = env["get_num_layers_to_build"](c, vp_stage=vp, pp_rank=r)
                off = env["get_transformer_layer_offset"](c, vp_stage=vp, pp_rank=r)
                out.append(f"{off}+{n}")
        return "ok " + " ".join(out)
    except (AssertionError, ValueError):
        return "refused"
    except ZeroDivisionError:
        return "crashed"


def cases():
    """The account-for flags on even splits; uneven first/last stages; both at once."""
    for L in range(1, 17):
        for pp in (1, 2, 3, 4, 8):
            for vpp in (1, 2, 3, 4) if pp > 1 else (1,):
                for emb in (0, 1):
                    for loss in (0, 1):
                        yield L, pp, vpp, 0, 0, emb, loss
    for L in range(1, 13):
        for pp in (2, 3, 4):  # pp 1: see the module's docstring
            for vpp in (1, 2, 3) if pp > 1 else (1,):
                for first in range(0, 5):
                    for last in range(0, 5):
                        if first or last:
                            yield L, pp, vpp, first, last, 0, 0
    for L, pp, vpp, first, last, emb, loss in ((8, 2, 1, 4, 0, 1, 0), (8, 2, 1, 0, 4, 0, 1),
                                               (9, 3, 1, 3, 3, 1, 1), (8, 4, 2, 2, 2, 0, 1)):
        yield L, pp, vpp, first, last, emb, loss


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    env = load(sys.argv[1], sys.argv[2])
    rev = subprocess.run(["git", "-C", sys.argv[1], "rev-parse", sys.argv[2]], check=True,
                         capture_output=True, text=True).stdout.strip()
    print(f"# Megatron-LM {rev} get_num_layers_to_build / get_transformer_layer_offset: "
          "test/ref/megatron_pp_split.py")
    print("# L pp vpp first last emb loss: ok offset+layers per (chunk, rank), or refused")
    for case in cases():
        print(" ".join(map(str, case)), split(env, *case))


if __name__ == "__main__":
    main()
