"""Megatron-LM's enum classes that a checkpoint's args hold, for torch.load without Megatron.

megatron-c pickles args.attention_backend as Megatron does: a member of
megatron.core.transformer.enums.AttnBackend (flash 1, fused 2, unfused 3, local 4, auto 5), so
unpickling needs that class, as loading Megatron's own checkpoints needs Megatron. Importing this
module makes the class importable under that name: Megatron's own when it is installed, else a
stand-in with the same members and values."""
import enum
import sys
import types

MODULE = "megatron.core.transformer.enums"

try:
    from megatron.core.transformer.enums import AttnBackend  # noqa: F401
except ImportError:
    parts = MODULE.split(".")
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        if name not in sys.modules:
            sys.modules[name] = types.ModuleType(name)
            if i > 1:
                setattr(sys.modules[".".join(parts[:i - 1])], parts[i - 1], sys.modules[name])
    AttnBackend = enum.Enum("AttnBackend", [("flash", 1), ("fused", 2), ("unfused", 3),
                                            ("local", 4), ("auto", 5)], module=MODULE)
    sys.modules[MODULE].AttnBackend = AttnBackend
