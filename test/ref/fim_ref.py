#!/usr/bin/env python3
"""Reference of Megatron's GPTFIMDataset transform (megatron/training/datasets/fim_dataset.py,
Megatron-LM main of 2026-08), written from its facts, to check megatron-c's --fim-data samples.

    /usr/bin/python3 test/ref/fim_ref.py VOCAB MERGES RAW FIM [--rate R --spm-rate R
        --split-sample TOK --fragment-rate R --no-prefix STR --seed S]

RAW and FIM are `megatron-c inspect-data --format ids` outputs of the same samples, without and
with --fim-data (num_workers 0: one RandomState read in sample order). Prints "ok N" when every
FIM sample equals the reference applied to the raw one, else the first difference; exit 1.

Facts (Megatron's code):
* one numpy RandomState(seed) per dataset, drawn in the order samples are read;
* the text is cut at every eod id (--fim-eod-token); each non-empty segment is transformed and
  followed by its eod; the part after the last eod is transformed too (even when empty);
* with a split token: a segment holding it draws binomial(1, fim_rate); 1 transforms each
  non-empty fragment (followed by the split token) and the part after the last one at the
  fragment rate; a segment without it is transformed at fim_rate;
* transforming at rate r: binomial(1, r); then the text is decoded without special tokens (for
  GPT-2: <|endoftext|>), kept as is when it starts with --fim-no-prefix, else cut at
  sorted(randint(0, len(text) + 1, size=2)) characters; the pieces are encoded again;
  binomial(1, spm_rate) picks SPM [pre, suf] suffix [mid] prefix middle, else PSM
  [pre] prefix [suf] suffix [mid] middle;
* the result is cut to the original length or filled with the FIM pad id.
The tokenizer is the project's reference of Megatron's GPT-2 BPE (gpt2_tokenizer_ref.py).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_tokenizer_ref import GPT2Ref  # noqa: E402


class FimRef:
    def __init__(self, tok, vocab, a):
        self.tok, self.a = tok, a
        self.rng = np.random.RandomState(seed=a.seed)
        ids = [vocab[t] for t in ("<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>",
                                  "<|endoftext|>")]
        self.pre, self.mid, self.suf, self.pad, self.eod = ids
        self.split = vocab[a.split_sample] if a.split_sample else None

    def text(self, ids):
        ids = [i for i in ids if i != self.eod]  # all_special_tokens of GPT-2: <|endoftext|>
        return self.tok.decode_bytes(ids).decode("utf-8", errors="replace")

    def enc(self, s):
        return self.tok.encode_str(s) if s else []

    def permute(self, seq, rate):
        if not self.rng.binomial(1, rate):
            return list(seq)
        contents = self.text(seq)
        if self.a.no_prefix is not None and contents.startswith(self.a.no_prefix):
            return list(seq)
        b = sorted(self.rng.randint(low=0, high=len(contents) + 1, size=2))
        p, m, s = contents[:b[0]], contents[b[0]:b[1]], contents[b[1]:]
        p, m, s = self.enc(p), self.enc(m), self.enc(s)
        if self.rng.binomial(1, self.a.spm_rate):
            return [self.pre, self.suf] + s + [self.mid] + p + m
        return [self.pre] + p + [self.suf] + s + [self.mid] + m

    def split_permute(self, seq):
        if self.split is None or self.split not in seq:
            return self.permute(seq, self.a.rate)
        if not self.rng.binomial(1, self.a.rate):
            return list(seq)
        out, cur = [], 0
        for loc, t in enumerate(seq):
            if t != self.split:
                continue
            if loc - cur > 0:
                out += self.permute(seq[cur:loc], self.a.fragment_rate) + [self.split]
            cur = loc + 1
        return out + self.permute(seq[cur:], self.a.fragment_rate)

    def sample(self, seq):
        out, cur = [], 0
        for loc, t in enumerate(seq):
            if t != self.eod:
                continue
            if loc - cur > 0:
                out += self.split_permute(seq[cur:loc]) + [self.eod]
            cur = loc + 1
        out += self.split_permute(seq[cur:])
        return (out + [self.pad] * len(seq))[:len(seq)]


def read_ids(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            i, ids = line.rstrip("\n").split("\t")
            rows.append((int(i), [int(x) for x in ids.split()]))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vocab")
    ap.add_argument("merges")
    ap.add_argument("raw")
    ap.add_argument("fim")
    ap.add_argument("--rate", type=float, default=0.5)
    ap.add_argument("--spm-rate", type=float, default=0.5)
    ap.add_argument("--split-sample")
    ap.add_argument("--fragment-rate", type=float)
    ap.add_argument("--no-prefix")
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    with open(a.vocab) as f:
        vocab = json.load(f)
    ref = FimRef(GPT2Ref(a.vocab, a.merges), vocab, a)
    raw, fim = read_ids(a.raw), read_ids(a.fim)
    assert len(raw) == len(fim) and len(raw) > 0, (len(raw), len(fim))
    changed = 0
    for (i, r), (j, got) in zip(raw, fim):
        want = ref.sample(r)
        if i != j or want != got:
            print(f"sample {i}: reference {want}\nmegatron-c {got}")
            return 1
        changed += want != r
    print(f"# fim_ref: {len(raw)} samples equal, {changed} of them transformed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
