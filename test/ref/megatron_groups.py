"""Megatron-LM's own rank groups, dense and expert (parallel folding), for test/unit/test_groups.c.

Runs the RankGenerator class and generate_masked_orthogonal_rank_groups of Megatron-LM's
megatron/core/parallel_state.py, taken out of the file by their syntax tree (the module itself
needs torch.distributed), the way initialize_model_parallel builds its two generators:

    dense  = RankGenerator(tp, ep=1, dp=world/(tp*cp*pp), pp, cp, order)
    expert = RankGenerator(etp, ep, dp=world/(etp*ep*pp), pp, cp=1, order)

and prints, per layout, every group of the kinds initialize_model_parallel makes from them,
in its enumeration order (test/fixtures/megatron_groups.txt):

    layout <world> <tp> <cp> <pp> <ep> <etp> <order>
    <kind> <group> <group> ...      group: world ranks joined by ','

    git -C MEGATRON show core_v0.15.0:megatron/core/parallel_state.py > /tmp/parallel_state.py
    /usr/bin/python3 test/ref/megatron_groups.py /tmp/parallel_state.py > test/fixtures/megatron_groups.txt
"""
import ast
import sys
from typing import List

# (world, tp, cp, pp, ep, etp, order): the facts' 16-rank example, the reference checkpoints'
# layouts (ep2, tp2 + ep2), ep across data parallelism, etp != tp, and the pp-before-dp order.
LAYOUTS = [
    (16, 2, 2, 2, 4, 1, "tp-cp-ep-dp-pp"),
    (2, 1, 1, 1, 2, 1, "tp-cp-ep-dp-pp"),
    (4, 2, 1, 1, 2, 2, "tp-cp-ep-dp-pp"),
    (4, 2, 1, 1, 2, 1, "tp-cp-ep-dp-pp"),
    (8, 1, 1, 1, 4, 1, "tp-cp-ep-dp-pp"),
    (8, 2, 1, 2, 2, 1, "tp-cp-ep-dp-pp"),
    (8, 2, 2, 1, 4, 1, "tp-cp-ep-dp-pp"),
    (16, 4, 1, 2, 2, 2, "tp-cp-ep-dp-pp"),
    (8, 2, 1, 2, 2, 1, "tp-cp-ep-pp-dp"),
    (16, 2, 2, 2, 2, 2, "tp-cp-ep-pp-dp"),
    (8, 1, 1, 1, 1, 1, "tp-cp-ep-dp-pp"),
]
DENSE = ["tp", "cp", "dp", "dp-cp", "pp", "tp-pp", "tp-cp", "tp-dp-cp"]
EXPERT = ["ep", "tp", "tp-ep", "tp-ep-pp", "dp"]
EXPERT_NAMES = {"ep": "ep", "tp": "etp", "tp-ep": "tp-ep", "tp-ep-pp": "tp-ep-pp", "dp": "edp"}


def load(path):
    tree = ast.parse(open(path).read())
    keep = [n for n in tree.body
            if (isinstance(n, ast.FunctionDef) and n.name == "generate_masked_orthogonal_rank_groups")
            or (isinstance(n, ast.ClassDef) and n.name == "RankGenerator")]
    if len(keep) != 2:
        sys.exit(f"{path}: RankGenerator or generate_masked_orthogonal_rank_groups not found")
    env = {"List": List}
    exec(compile(ast.Module(body=keep, type_ignores=[]), path, "exec"), env)
    return env["RankGenerator"]


def main():
    gen = load(sys.argv[1])
    print("# Megatron-LM core_v0.15.0 parallel_state.RankGenerator: test/ref/megatron_groups.py")
    for world, tp, cp, pp, ep, etp, order in LAYOUTS:
        dp, edp = world // (tp * cp * pp), world // (etp * ep * pp)
        dense = gen(tp=tp, ep=1, dp=dp, pp=pp, cp=cp, order=order)
        expert = gen(tp=etp, ep=ep, dp=edp, pp=pp, cp=1, order=order)
        assert dense.get_ranks("pp") == expert.get_ranks("pp")  # initialize_model_parallel's assert
        print(f"layout {world} {tp} {cp} {pp} {ep} {etp} {order}")
        for kind, g, name in [(k, dense, k) for k in DENSE] + [(k, expert, EXPERT_NAMES[k]) for k in EXPERT]:
            groups = g.get_ranks(kind)
            print(name, " ".join(",".join(str(r) for r in grp) for grp in groups))


if __name__ == "__main__":
    main()
