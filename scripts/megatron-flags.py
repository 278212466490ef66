#!/usr/bin/env python3
"""Megatron-LM's pretrain_gpt.py command line, as its own argparse parser builds it.

Usage: python3 scripts/megatron-flags.py MEGATRON_SRC > test/fixtures/megatron-flags-REF.tsv

MEGATRON_SRC is a plain tree of Megatron-LM at some commit, e.g.
    git -C /work/.mirror/NVIDIA+Megatron-LM/repo archive core_v0.15.0 | tar -x -C /tmp/mlm-015

The script builds the parser exactly as megatron/training/arguments.py:parse_args does
(argparse.ArgumentParser(allow_abbrev=False), add_megatron_arguments, then pretrain_gpt.py's
extra_args_provider, add_modelopt_args, which Megatron adds when nvidia-modelopt is installed)
and lists parser._option_string_actions: at today's main many flags are generated from
dataclasses (TransformerConfig through megatron/training/argument_utils.py), which grepping
arguments.py would miss. Only building the parser needs the import chain, not torch itself:
torch, triton and numpy are replaced by permissive stubs (a stub's attribute, call or subscript
is another stub), so Python 3.10+ runs it with just packaging, PyYAML, psutil and
typing_extensions installed (what Megatron's modules import at the top level).
A default that comes from a stub (a torch dtype, say) is printed as stub:NAME.

Output: one row per option string, tab-separated, with a header row:
    option  action  type  nargs  default  const  choices  group  dest  source  help
action is argparse's action class (store, store_true, ...); source is "megatron" or
"modelopt" (the extra_args_provider's). Tabs and newlines inside help are written as spaces.

Committed outputs, written on Debian 12's /usr/bin/python3 (3.11, with python3-yaml,
python3-psutil and python3-typing-extensions) in a venv that adds packaging 26.4:
    python3 -m venv --system-site-packages /tmp/v && /tmp/v/bin/pip install packaging
    /tmp/v/bin/python scripts/megatron-flags.py /tmp/mlm-015 \
        > test/fixtures/megatron-flags-core_v0.15.0.tsv     # core_v0.15.0 = 0d7e02bd26
    /tmp/v/bin/python scripts/megatron-flags.py /tmp/mlm-main \
        > test/fixtures/megatron-flags-main-d98e8a64dd.tsv  # main = d98e8a64dd
(594 and 900 option strings; Megatron's import-time warnings about Apex and Transformer
Engine go to stderr.)
"""
import abc
import argparse
import importlib.abc
import importlib.machinery
import os
import sys
import types
import typing

STUBBED = ("torch", "triton", "numpy")


class _Stub:
    """Anything the import chain asks of torch & co.: attributes, calls, subscripts, bases."""

    def __init__(self, name):
        self._n = name

    def __repr__(self):
        return "stub:" + self._n

    def __getattr__(self, name):
        if name == "__file__":  # a torch extension built at import: as if its build failed
            raise ImportError("stub")
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Stub(name)

    def __call__(self, *a, **k):
        # used as a decorator: keep the decorated function
        if len(a) == 1 and callable(a[0]) and not k:
            return a[0]
        return _Stub(self._n + "()")

    def __instancecheck__(self, o):
        return False

    def __or__(self, o):
        return self

    __ror__ = __or__

    def __getitem__(self, k):
        return self

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False

    def __mro_entries__(self, bases):
        # class Foo(torch.autograd.Function): Foo.apply is a stub too; beside a real base (a
        # Protocol, whose metaclass would conflict), nothing
        if all(isinstance(b, _Stub) for b in bases):
            return (_StubBase,)
        return ()


class _StubMeta(abc.ABCMeta):  # ABCMeta: a stub-derived class may also be an ABC
    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Stub(name)


class _StubBase(metaclass=_StubMeta):
    pass


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        v = _Stub(name)
        setattr(self, name, v)
        return v


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _StubModule(spec.name)
        m.__path__ = []
        m.__version__ = "2.9.0"  # compared with packaging.version at import time
        return m

    def exec_module(self, module):
        pass


def build_parser(src):
    sys.path.insert(0, src)
    sys.meta_path.insert(0, _StubFinder())
    if not hasattr(typing, "override"):  # Python 3.12's, used by main's imports
        typing.override = lambda f: f
    from megatron.training import arguments as A
    from megatron.post_training.arguments import add_modelopt_args

    parser = argparse.ArgumentParser(description="Megatron-LM Arguments", allow_abbrev=False)
    parser = A.add_megatron_arguments(parser)
    before = set(parser._option_string_actions)
    parser = add_modelopt_args(parser)
    return parser, before


def text(v):
    if v is None:
        return "None"
    if isinstance(v, type):
        return v.__name__
    if callable(v) and hasattr(v, "__name__") and not isinstance(v, _Stub):
        return v.__name__
    s = repr(v) if not isinstance(v, str) else v
    return " ".join(s.split("\t")).replace("\n", " ")


def action_name(a):
    names = {
        "_StoreAction": "store",
        "_StoreTrueAction": "store_true",
        "_StoreFalseAction": "store_false",
        "_StoreConstAction": "store_const",
        "_AppendAction": "append",
        "_HelpAction": "help",
        "_CountAction": "count",
        "BooleanOptionalAction": "boolean_optional",
    }
    return names.get(type(a).__name__, type(a).__name__)


def group_of(parser):
    titles = {}
    for g in parser._action_groups:
        for a in g._group_actions:
            titles[id(a)] = g.title
    return titles


def main():
    if len(sys.argv) != 2 or not os.path.isdir(os.path.join(sys.argv[1], "megatron")):
        sys.exit("usage: megatron-flags.py MEGATRON_SRC")
    parser, before = build_parser(sys.argv[1])
    titles = group_of(parser)
    cols = "option action type nargs default const choices group dest source help".split()
    print("\t".join(cols))
    for opt in sorted(parser._option_string_actions):
        a = parser._option_string_actions[opt]
        choices = "|".join(text(c) for c in a.choices) if a.choices is not None else ""
        row = [
            opt,
            action_name(a),
            text(a.type) if a.type is not None else "",
            text(a.nargs) if a.nargs is not None else "",
            text(a.default),
            text(a.const) if a.const is not None else "",
            choices,
            titles.get(id(a), ""),
            a.dest,
            "megatron" if opt in before else "modelopt",
            text(a.help or "").replace("\n", " ").replace("\t", " "),
        ]
        print("\t".join(row))


if __name__ == "__main__":
    main()
