#!/usr/bin/env python3
"""Runs Megatron-LM's own tokenizer code (a core_v0.15.0 tree, e.g. `git archive`) for
test/integration/test_tokenizer_sp_megatron.sh, on a CPU-only PyTorch (build/venv-torch2):

    python megatron_sp_check.py MLM_DIR JOB [:: JOB ...]     # one process, Megatron imported once
    JOB = preprocess ARGS...   # tools/preprocess_data.py ARGS
        | legacy --type T --model M [--extra-ids N] --input JSONL --output-prefix P
                               # what preprocess_data.py --legacy-tokenizer --append-eod would
                               # write, had its Encoder kept the tokenizer

Megatron's import of megatron.core builds CUDA extensions (torch's load_inline) when it finds a
CUDA toolkit; here that is made to fail with ImportError, which Megatron catches. The legacy mode
exists because core_v0.15.0's preprocess_data.py fails with --legacy-tokenizer (its
Encoder.initializer builds the tokenizer into a local variable, so Encoder.tokenizer is never
set); it encodes with megatron.training.tokenizer.build_tokenizer's tokenizer as Encoder.encode
does and writes with Megatron's IndexedDatasetBuilder.
"""
import argparse
import json
import runpy
import sys

import torch.utils.cpp_extension as ext


def _no_build(*a, **k):
    raise ImportError("no CUDA extension builds here")


ext.load_inline = _no_build


def legacy(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--type")
    ap.add_argument("--model")
    ap.add_argument("--extra-ids", type=int, default=0)
    ap.add_argument("--input")
    ap.add_argument("--output-prefix")
    a = ap.parse_args(argv)
    from megatron.core.datasets import indexed_dataset
    from megatron.training.tokenizer import build_tokenizer

    args = argparse.Namespace(rank=0, tokenizer_type=a.type, tokenizer_model=a.model,
                              vocab_extra_ids=a.extra_ids, make_vocab_size_divisible_by=128,
                              tensor_model_parallel_size=1, padded_vocab_size=None)
    tok = build_tokenizer(args)
    prefix = a.output_prefix + "_text_document"
    builder = indexed_dataset.IndexedDatasetBuilder(
        prefix + ".bin", dtype=indexed_dataset.DType.optimal_dtype(tok.vocab_size))
    with open(a.input, encoding="utf-8") as f:
        for line in f:
            ids = tok.tokenize(json.loads(line)["text"])
            lens = [len(ids)] if ids else []
            if ids:
                ids = ids + [tok.eod]
                lens[-1] += 1
            builder.add_document(ids, lens)
    builder.finalize(prefix + ".idx")
    print("vocab_size %d padded %d eod %d" % (tok.vocab_size, args.padded_vocab_size, tok.eod))


def main():
    mlm, jobs, job = sys.argv[1], [], []
    for a in sys.argv[2:] + ["::"]:
        if a == "::":
            jobs.append(job)
            job = []
        else:
            job.append(a)
    sys.path.insert(0, mlm)
    for job in jobs:
        if job[0] == "legacy":
            legacy(job[1:])
        else:
            sys.argv = [mlm + "/tools/preprocess_data.py"] + job[1:]
            runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    sys.exit(main())
