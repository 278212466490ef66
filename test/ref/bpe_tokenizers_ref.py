#!/usr/bin/env python3
"""The reference side of test/integration/test_tokenizers_bpe.sh: megatron-c's HuggingFaceTokenizer
and TikTokenizer ids against the Python packages' own encodings (tokenizers, tiktoken), as
Megatron core_v0.15.0 calls them.

    bpe_tokenizers_ref.py stress OUT.jsonl
        The stress set as JSON lines: every valid UTF-8 case of test/fixtures/bpe_corpus.txt (the
        GPT-2 tests' corpus) plus cases for what these tokenizers add (NFC, added tokens, the
        patterns' classes and case-insensitive contractions, long runs).
    bpe_tokenizers_ref.py check --kind hf|hf-legacy|tiktoken --model PATH --jsonl IN
                                --prefix PREFIX [--append-eod] [--pattern v1|v2]
                                [--vocab-size N] [--num-special N]
        Encodes every document of IN (key "text") in Python and compares the ids with the
        .bin/.idx that `megatron-c preprocess-data` wrote at PREFIX: the token stream and each
        document's length. hf: Megatron's default tokenizer (tokenize(): no special tokens);
        hf-legacy: --legacy-tokenizer (tokenizer(text).input_ids: the post-processor's tokens);
        tiktoken: CustomTikTokenizer.tokenize (encode_ordinary; ids shifted by --num-special).
        Prints the first differing document and exits 1 on a difference.
"""
import argparse
import base64
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

PATTERNS = {
    "v1": r"[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
    "v2": (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
           r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
           r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
}

EXTRA = [
    # NFC (Qwen2's normalizer): decomposed, singleton, excluded, Hangul jamo, reordering
    "cafe\u0301 A\u030angstro\u0308m \u212b \u2126 \u0958 \u1100\u1161\u11a8 \u1100\u1161 \uac00\u11a8",
    "q\u0307\u0323 a\u0323\u0307 e\u0301\u0301 \u0301start ﬁ ｶ \u00c5\u0301",
    "\u0e40\u0e01\u0e34\u0e4d \u0915\u093c \u1e0b\u0323 \u01d5 \u1f82",
    # added tokens of the fixtures, whole, in text, partial, adjacent
    "<|end_of_text|>", "x<|begin_of_text|>y<|end_of_text|>z", "<|im_start|>user\nhi<|im_end|>\n",
    "<|endoftext|><|endoftext|>", "<s></s><unk> <s>x</s>", "<|end_of", "<<|endoftext|>>",
    "text</s>more<s", "<|im_start|><|im_start|>", "<SPECIAL_5> <mask>",
    # classes of the patterns: titlecase, modifiers, marks, case-insensitive contractions
    "\u01c5ungla \u01c8ubljana \u02b0ello \u3005\u3005 na\u0308ive",
    "'S 'T 'RE 'VE 'M 'LL 'D 'Re 'lL \u2019s '\u017f 'K '\u212a", "I'M HERE'S YOU'LL",
    "CamelCaseWords HTTPServer iPhone XMLHttpRequest ABCdef abcDEF",
    "a/b/c path/to/file.txt ../x http://a.b/c/ ///", "x\u0085y \u0085 z\u2028w\u3000v\u00a0u",
    "1 12 123 1234 12345 123456 1234567 \u0661\u0662\u0663 \u2163 \u00bd",
    "\U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469\u200d\U0001f467 \u200b\u200c\u200d",
    "tab\t\tend \r\n\r\n \n\n\n  x\r y\r\n", " \n \n \n", "x \n", "\n \n", "a \r\n b",
    # long runs (scratch growth, uncached pieces, regex backtracking)
    " " * 3000 + "x", "\n" * 1000 + "y", "a" * 5000, "1234567890" * 50, "ab" * 3000,
    "\u00e9" * 2000, ("e\u0301" * 700), "\t " * 1000 + "\n",
]


def stress(out):
    cases = []
    with open(os.path.join(ROOT, "test", "fixtures", "bpe_corpus.txt"), encoding="ascii") as f:
        for line in f:
            if line.startswith("#"):
                continue
            data = bytes.fromhex(line.split("\t")[1])
            try:
                cases.append(data.decode("utf-8"))
            except UnicodeDecodeError:
                pass  # JSON text is UTF-8: invalid bytes are the unit test's
    cases += EXTRA
    with open(out, "w", encoding="utf-8") as f:
        for c in cases:
            f.write(json.dumps({"text": c}) + "\n")
    print("%s: %d documents" % (out, len(cases)))


DTYPES = {1: "B", 2: "b", 3: "h", 4: "i", 5: "q", 6: "d", 7: "f", 8: "H"}


def read_dataset(prefix):
    with open(prefix + ".idx", "rb") as f:
        idx = f.read()
    assert idx[:9] == b"MMIDIDX\x00\x00", "not a Megatron .idx"
    code = idx[17]
    n, d = struct.unpack_from("<QQ", idx, 18)
    lens = struct.unpack_from("<%di" % n, idx, 34)
    with open(prefix + ".bin", "rb") as f:
        data = f.read()
    size = struct.calcsize(DTYPES[code])
    ids = list(struct.unpack("<%d%s" % (len(data) // size, DTYPES[code]), data))
    return list(lens), ids


def encoder(a):
    """(encode(text) -> ids, eod) as Megatron's tokenizer of this kind."""
    if a.kind.startswith("hf"):
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
        with open(os.path.join(a.model, "tokenizer_config.json"), encoding="utf-8") as f:
            eos = json.load(f)["eos_token"]
        eod = tok.token_to_id(eos if isinstance(eos, str) else eos["content"])
        special = a.kind == "hf-legacy"
        return (lambda t: tok.encode(t, add_special_tokens=special).ids), eod
    import tiktoken
    with open(a.model, encoding="utf-8") as f:
        vocab = json.load(f)[: a.vocab_size - a.num_special]
    ranks = {base64.b64decode(x["token_bytes"]): x["rank"] + a.num_special for x in vocab}
    enc = tiktoken.Encoding(name="ref", pat_str=PATTERNS[a.pattern], mergeable_ranks=ranks,
                            special_tokens={})
    return enc.encode_ordinary, 2  # eod: </s>, third of the default special tokens


def check(a):
    encode, eod = encoder(a)
    with open(a.jsonl, encoding="utf-8") as f:
        docs = [json.loads(line)["text"] for line in f if line.strip()]
    lens, got = read_dataset(a.prefix)
    pos, k, ntok = 0, 0, 0
    for i, text in enumerate(docs):
        exp = encode(text)
        if exp and a.append_eod:
            exp = exp + [eod]
        if not exp:
            continue  # Megatron writes no sequence for an empty document
        seq = got[pos:pos + len(exp)]
        if seq != exp or k >= len(lens) or lens[k] != len(exp):
            print("document %d differs: %r" % (i, text[:200]))
            print("  expected %s" % exp[:64])
            print("  megatron-c %s (sequence length %s)" % (seq[:64], lens[k] if k < len(lens) else None))
            return 1
        pos += len(exp)
        k += 1
        ntok += len(exp)
    if pos != len(got) or k != len(lens):
        print("megatron-c wrote %d tokens in %d sequences, expected %d in %d" % (len(got), len(lens), pos, k))
        return 1
    print("ok: %d documents, %d tokens identical" % (len(docs), ntok))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["stress", "check"])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--kind", choices=["hf", "hf-legacy", "tiktoken"])
    ap.add_argument("--model")
    ap.add_argument("--jsonl")
    ap.add_argument("--prefix")
    ap.add_argument("--append-eod", action="store_true")
    ap.add_argument("--pattern", choices=["v1", "v2"], default="v2")
    ap.add_argument("--vocab-size", type=int, default=2 ** 17)
    ap.add_argument("--num-special", type=int, default=1000)
    a = ap.parse_args()
    if a.mode == "stress":
        stress(a.out)
        return 0
    return check(a)


if __name__ == "__main__":
    sys.exit(main())
