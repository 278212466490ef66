#!/usr/bin/env python3
"""Reference for megatron-c's SentencePiece tokenizers: Megatron core_v0.15.0's semantics stated
over the PyPI `sentencepiece` package, and the writer of what tools/preprocess_data.py would
write with them (test/integration/test_tokenizer_sp.sh compares megatron-c's bytes with these).

    PY=build/venv-tok/bin/python    # scripts/install-deps.sh makes it (sentencepiece, numpy)
    $PY test/ref/sp_tokenizer_ref.py stress OUT.jsonl          # the stress documents
    $PY test/ref/sp_tokenizer_ref.py info --model M --type T [--legacy] [--extra-ids N]
    $PY test/ref/sp_tokenizer_ref.py expect --model M --type T [--legacy] [--extra-ids N] \\
        [--append-eod] --input A.jsonl [B.jsonl ...] --output-prefix P
    $PY test/ref/sp_tokenizer_ref.py bench --model M           # encode tokens/s, one thread
(expect is also bench/bench-data.sh's Python peer of preprocess_data.py for these types.)

The facts (Megatron's source at core_v0.15.0):
* Without --legacy-tokenizer (tools/preprocess_data.py and pretrain_gpt.py's datasets use
  megatron/core/tokenizers): the three types are all the library class SentencePieceTokenizer
  built with no options: ids = encode_as_ids(text); eod = eos_id(); pad = pad_id();
  vocab_size = get_piece_size(). --vocab-extra-ids is not passed to it.
* --legacy-tokenizer (megatron/training/tokenizer/tokenizer.py):
  - SentencePieceTokenizer: vocab = {id_to_piece(i): i}; then '<CLS>', '<SEP>', '<EOD>',
    '<MASK>', the pad piece ('<PAD>' when pad_id() is -1: id_to_piece raises IndexError), the bos
    piece ('<BOS>'), the eos piece ('<EOS>'), '<extra_id_0>'... are each added to the vocab
    (id = current vocab size) when missing, and kept, in that order, as the special tokens.
    tokenize: repeatedly find the special token whose str.index in the rest of the text is
    smallest (min over the dict, so the first in order on a tie), encode_as_ids the text before
    it, append its id, continue after it; then encode_as_ids the rest. eod = id of '<EOD>',
    pad = id of the pad token, vocab_size = len(vocab).
  - GPTSentencePieceTokenizer: encode_as_ids; eod = eos_id(); pad = pad_id(); vocab = pieces.
  - Llama2Tokenizer: [bos_id()] + encode(text); eod = eos_id(); no pad (the dataset falls back
    to -1); vocab = pieces.
* Training pads the legacy class's vocab_size (Megatron's global tokenizer is always legacy).
* tools/preprocess_data.py (one json key, no sentence splitting): per line, ids =
  tokenize(text) (+ [eod] with --append-eod when non-empty); the .bin holds them in
  DType.optimal_dtype(tokenizer.vocab_size) (uint16 below 65500, else int32), the .idx is
  Megatron's MMIDIDX index (one sequence per non-empty document).
"""
import argparse
import json
import os
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


class MegatronSP:
    """One of Megatron's SentencePiece tokenizer types, as the facts above say."""

    def __init__(self, model, kind, legacy=False, extra_ids=0):
        import sentencepiece as spm

        self.sp = sp = spm.SentencePieceProcessor(model_file=model)
        n = sp.get_piece_size()
        self.mode = "plain"
        self.eod, self.pad, self.vocab_size = sp.eos_id(), sp.pad_id(), n
        self.train_vocab_size = n
        self.special = {}
        if kind == "SentencePieceTokenizer":
            vocab = {sp.id_to_piece(i): i for i in range(n)}

            def add(tok):
                if tok not in vocab:
                    vocab[tok] = len(vocab)
                self.special.setdefault(tok, vocab[tok])
                return vocab[tok]

            def piece(i, dflt):
                return sp.id_to_piece(i) if 0 <= i < n else dflt

            ids = [add(t) for t in ("<CLS>", "<SEP>", "<EOD>", "<MASK>")]
            pad = add(piece(sp.pad_id(), "<PAD>"))
            add(piece(sp.bos_id(), "<BOS>"))
            add(piece(sp.eos_id(), "<EOS>"))
            for i in range(extra_ids):
                add("<extra_id_%d>" % i)
            self.train_vocab_size = len(vocab)
            if legacy:
                self.mode, self.eod, self.pad = "special", ids[2], pad
                self.vocab_size = len(vocab)
        elif kind == "Llama2Tokenizer":
            if legacy:
                self.mode, self.pad = "bos", -1
        elif kind != "GPTSentencePieceTokenizer":
            raise SystemExit("not a SentencePiece type: %s" % kind)

    def tokenize(self, text):
        enc = self.sp.encode_as_ids
        if self.mode == "bos":
            return [self.sp.bos_id()] + enc(text)
        if self.mode == "plain":
            return enc(text)
        ids, idx = [], 0
        while True:
            found = [(text.find(t, idx), k) for k, t in enumerate(self.special)]
            found = [f for f in found if f[0] >= 0]
            if not found:
                break
            at, k = min(found)  # earliest; on a tie the first in order (k)
            tok = list(self.special)[k]
            ids += enc(text[idx:at]) + [self.special[tok]]
            idx = at + len(tok)
        return ids + enc(text[idx:])


def stress_docs():
    """The stress documents: every valid-UTF-8 input of the GPT-2 corpus fixture (the varied
    cases of test/ref/gpt2_tokenizer_ref.py) and cases for SentencePiece and Megatron's special
    tokens."""
    docs = []
    with open(os.path.join(ROOT, "test/fixtures/bpe_corpus.txt"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                continue
            hexs = line.rstrip("\n").split("\t")[1]
            try:
                docs.append(bytes.fromhex(hexs).decode("utf-8"))
            except UnicodeDecodeError:
                pass  # Megatron only sees str from JSON
    docs += [
        "", " ", "  ", "\n", "\t", "\r\n", "hello  world", "  two leading", "trailing  ",
        "a\u00a0b\u2009c", "\ufb01ne \uff46\uff55\uff4c\uff4c\uff57\uff49\uff44\uff54\uff48 \u2460\u2461",
        "caf\u00e9 na\u00efve e\u0301", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
        "emoji \U0001f600\U0001f44d\U0001f3fd", "\u2581 already \u2581\u2581", "\u200bzero\u200dwidth",
        "\ufeffBOM", "<s>hello</s>", "x<EOD>y", "<CLS><SEP><MASK><PAD>", "<EOD", "<<s>>",
        "<extra_id_10> and <extra_id_1> <extra_id_11>", "<unk> <pad> <BOS> <EOS> <s> </s>",
        "[INST] hi [/INST] <MASK>", "mixed <s></s> <s", "digits 1234567890 3.14 -7e10",
        "a" * 300, "ab " * 200, "\u0000nul and \u0001 controls \u007f",
        "First Citizen:<EOD>\nBefore we proceed any further, hear me speak.<s>All:</s>",
    ]
    # aimed at data/spm.cc's chunk cache (encode split at ASCII spaces): whitespace of every
    # kind at chunk edges, NFKC-made spaces, punctuation-only and very long chunks, literal ▁
    docs += [
        "a    b", "   lead", "trail   ", " x ", "a \tb", "a\t b", "a \n\n b", "\t\tx\t",
        "a \u00a0 b", "a\u00a0 b", "a \u00a0b", "a \u3000 b", "\u3000a\u3000 \u3000b\u3000",
        "a \u2003 b \u2028 c \u200b d", "x \u00a8 y \u00a8y x\u00a8 \u00b4 \u02dc \u309b \u309c",
        "\uff01\uff01 !!! ... ?! \u3002 , ;", "a . b , c", " . ", "(a) [b] {c}",
        "w" * 60 + " " + "w" * 60, "x" * 45 + " " + "y" * 46 + " " + "z" * 47,
        "supercalifragilisticexpialidocious " * 20, "the the the  the   the",
        "a\u2581 b", "a \u2581b", "a\u2581\u2581 \u2581", "\u2581",
        "\U0001f600 \U0001f600\U0001f600 x\U0001f600", "\u0000 \u0001a \u007f b\u0085 c",
        "\u00ad soft \u00adhyphen", "\ufe0f \u200d \u2060 x",
    ]
    return docs


def write_indexed(prefix, docs, dtype_code, itemsize):
    """Megatron's IndexedDatasetBuilder output for one sequence per non-empty document."""
    import numpy as np

    dtype = {2: np.uint16, 4: np.int32}[itemsize]
    lens = [len(ids) for ids in docs if ids]
    doc_idx = [0]
    for ids in docs:
        doc_idx.append(doc_idx[-1] + (1 if ids else 0))
    with open(prefix + ".bin", "wb") as b:
        for ids in docs:
            if ids:
                b.write(np.asarray(ids, dtype=dtype).tobytes())
    ptrs = np.zeros(len(lens), dtype=np.int64)
    if lens:
        ptrs[1:] = np.cumsum(np.asarray(lens[:-1], dtype=np.int64) * itemsize)
    with open(prefix + ".idx", "wb") as x:
        x.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", dtype_code))
        x.write(struct.pack("<Q", len(lens)) + struct.pack("<Q", len(doc_idx)))
        x.write(np.asarray(lens, dtype=np.int32).tobytes() + ptrs.tobytes())
        x.write(np.asarray(doc_idx, dtype=np.int64).tobytes())


def expect(tok, inputs, prefix, append_eod):
    docs = []
    for path in inputs:
        with open(path, encoding="utf-8") as f:
            for line in f:
                ids = tok.tokenize(json.loads(line)["text"])
                if ids and append_eod:
                    if tok.eod < 0:
                        raise SystemExit("no eod")
                    ids.append(tok.eod)
                docs.append(ids)
    code, size = (8, 2) if tok.vocab_size < 65500 else (4, 4)
    write_indexed(prefix + "_text_document", docs, code, size)
    print("documents %d tokens %d" % (len(docs), sum(len(d) for d in docs)))


def bench(tok):
    with open(os.path.join(os.environ.get("MEGATRON_C_SHARED", os.path.join(ROOT, "..", "shared")),
                           "data/text/tinyshakespeare.jsonl"), encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    t0, n = time.perf_counter(), 0
    for t in texts:
        n += len(tok.tokenize(t))
    dt = time.perf_counter() - t0
    print("%d tokens in %.3f s: %.0f tokens/s" % (n, dt, n / dt))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["stress", "info", "expect", "bench"])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--model")
    ap.add_argument("--type", default="GPTSentencePieceTokenizer")
    ap.add_argument("--legacy", action="store_true")
    ap.add_argument("--extra-ids", type=int, default=0)
    ap.add_argument("--append-eod", action="store_true")
    ap.add_argument("--input", nargs="+")
    ap.add_argument("--output-prefix")
    a = ap.parse_args()
    if a.cmd == "stress":
        with open(a.out, "w", encoding="utf-8") as f:
            for d in stress_docs():
                f.write(json.dumps({"text": d}) + "\n")
        return
    tok = MegatronSP(a.model, a.type, a.legacy, a.extra_ids)
    if a.cmd == "info":
        print(tok.vocab_size, tok.train_vocab_size, tok.eod, tok.pad)
    elif a.cmd == "expect":
        expect(tok, a.input, a.output_prefix, a.append_eod)
    else:
        bench(tok)


if __name__ == "__main__":
    sys.exit(main())
