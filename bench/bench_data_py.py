#!/usr/bin/env python3
"""Python peer of `megatron-c preprocess-data` for bench/bench-data.sh: Megatron's
tools/preprocess_data.py pipeline for the legacy GPT-2 BPE tokenizer, re-stated without Megatron
(which cannot be installed here).

    /usr/bin/python3 bench/bench_data_py.py --input X.jsonl --output-prefix P \\
        --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt --append-eod [--workers N]

Per line, as Megatron's Encoder.encode does: json.loads, then for every --json-keys key the
string (or each non-empty string of a list) goes through the GPT-2 byte-level BPE of
test/ref/gpt2_tokenizer_ref.py (OpenAI's encoder.py algorithm, which Megatron's legacy
GPT2BPETokenizer wraps: `regex` pre-tokenisation, a per-process BPE cache); --append-eod adds
<|endoftext|> to a non-empty document. The output is {prefix}_{key}_document.bin/.idx in
Megatron's MMIDIDX v1 format (IndexedDatasetBuilder: np.array(ids, dtype).tobytes() per
document; the .idx written at the end), byte-identical to Megatron's and to megatron-c's.

--workers 1 (default) encodes in the one process, which is Megatron's per-core speed without
its inter-process traffic: Megatron always reads and writes in the main process and encodes in
a multiprocessing.Pool (imap, chunks of 32 lines), pickling every line and every token list
between them, so the real script can only be slower per core. --workers N > 1 (or --pool) runs
that same Pool(N).imap(encode, lines, 32) structure.

Prints one line `python-peer: documents=D tokens=T startup_s=S process_s=P` (startup: imports
and loading the tokenizer files; process: from the first line read to the .idx written).
"""
import argparse
import json
import multiprocessing
import os
import struct
import sys
import time

T0 = time.perf_counter()

import numpy as np  # noqa: E402  (Megatron's builder uses numpy; imported like it)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "test", "ref"))
from gpt2_tokenizer_ref import GPT2Ref  # noqa: E402

MAGIC = b"MMIDIDX\x00\x00"


class Encoder:
    """Megatron's Encoder: one tokenizer per process (Pool initializer)."""

    def __init__(self, args):
        self.args = args

    def initializer(self):
        Encoder.tokenizer = GPT2Ref(self.args.vocab_file, self.args.merge_file)

    def encode(self, json_line):
        data = json.loads(json_line)
        ids, lens = {}, {}
        tok = Encoder.tokenizer
        for key in self.args.json_keys:
            text = data[key]
            sentences = text if isinstance(text, list) else [text]
            doc_ids, sentence_lens = [], []
            for sentence in sentences:
                sentence_ids = tok.encode_str(sentence)
                if len(sentence_ids) > 0:
                    doc_ids.extend(sentence_ids)
                    sentence_lens.append(len(sentence_ids))
            if len(doc_ids) > 0 and self.args.append_eod:
                doc_ids.append(tok.eod)
                sentence_lens[-1] += 1
            ids[key] = doc_ids
            lens[key] = sentence_lens
        return ids, lens, len(json_line)


class Builder:
    """IndexedDatasetBuilder + _IndexWriter (MMIDIDX version 1)."""

    def __init__(self, prefix, dtype, code):
        self.prefix = prefix
        self.dtype = dtype
        self.code = code
        self.bin = open(prefix + ".bin", "wb")
        self.sequence_lengths = []
        self.document_indices = [0]

    def add_document(self, ids, lengths):
        self.bin.write(np.array(ids, dtype=self.dtype).tobytes(order="C"))
        self.sequence_lengths.extend(lengths)
        self.document_indices.append(len(self.sequence_lengths))

    def finalize(self):
        self.bin.close()
        lengths = np.array(self.sequence_lengths, dtype=np.int32)
        pointers = np.zeros(len(lengths), dtype=np.int64)
        if len(lengths) > 1:
            np.cumsum(lengths[:-1].astype(np.int64) * np.dtype(self.dtype).itemsize,
                      out=pointers[1:])
        with open(self.prefix + ".idx", "wb") as f:
            f.write(MAGIC)
            f.write(struct.pack("<Q", 1))
            f.write(struct.pack("<B", self.code))
            f.write(struct.pack("<Q", len(lengths)))
            f.write(struct.pack("<Q", len(self.document_indices)))
            f.write(lengths.tobytes(order="C"))
            f.write(pointers.tobytes(order="C"))
            f.write(np.array(self.document_indices, dtype=np.int64).tobytes(order="C"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--input", required=True)
    ap.add_argument("--output-prefix", required=True)
    ap.add_argument("--vocab-file", required=True)
    ap.add_argument("--merge-file", required=True)
    ap.add_argument("--json-keys", nargs="+", default=["text"])
    ap.add_argument("--append-eod", action="store_true")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--pool", action="store_true",
                    help="use the multiprocessing Pool even with --workers 1 (Megatron's shape)")
    args = ap.parse_args()

    encoder = Encoder(args)
    encoder.initializer()  # the main process loads the tokenizer too (Megatron: for vocab_size)
    vocab_size = len(Encoder.tokenizer.vocab)
    dtype, code = (np.uint16, 8) if vocab_size < 65500 else (np.int32, 4)
    startup = time.perf_counter() - T0

    t1 = time.perf_counter()
    builders = {k: Builder("%s_%s_document" % (args.output_prefix, k), dtype, code)
                for k in args.json_keys}
    docs = tokens = 0
    with open(args.input, "r", encoding="utf-8") as fin:
        if args.workers > 1 or args.pool:
            pool = multiprocessing.Pool(args.workers, initializer=encoder.initializer)
            encoded = pool.imap(encoder.encode, fin, 32)
        else:
            pool = None
            encoded = map(encoder.encode, fin)
        for ids, lens, _ in encoded:
            docs += 1
            for key in ids:
                builders[key].add_document(ids[key], lens[key])
                tokens += len(ids[key])
        if pool is not None:
            pool.close()
            pool.join()
    for b in builders.values():
        b.finalize()
    process = time.perf_counter() - t1
    print("python-peer: documents=%d tokens=%d startup_s=%.3f process_s=%.3f workers=%d%s"
          % (docs, tokens, startup, process, args.workers, " pool" if pool is not None else ""))


if __name__ == "__main__":
    main()
