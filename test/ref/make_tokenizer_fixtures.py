#!/usr/bin/env python3
"""Makes the small byte-level BPE tokenizers of test/fixtures/tokenizers/, trained
with the `tokenizers` package on tinyshakespeare:

    build/venv-tok/bin/python test/ref/make_tokenizer_fixtures.py [OUTDIR]

* llama3/   Llama 3's pre-tokenizer (Split with its regex, then ByteLevel without regex),
            ignore_merges, merges as ["a", "b"] lists, <|begin_of_text|> / <|end_of_text|>
            added after the vocabulary, the post-processor's BOS (TemplateProcessing).
* qwen2/    Qwen2's regex, an NFC normalizer, merges as "a b" strings, <|endoftext|>,
            <|im_start|>, <|im_end|> added after the vocabulary, no BOS.
* nemo/     Mistral NeMo (Tekken) style: its regex (= Megatron's tiktoken v2 pattern), <unk>,
            <s>, </s> as the first ids, the post-processor's <s>.
* gpt2style/  ByteLevel with its own regex (GPT-2's pattern), no Split: older byte-level files.
* tiktoken.json  Megatron's tiktoken vocabulary format ([{"rank", "token_bytes" (base64),
            "token_str"}], ranks 0..255 the single bytes), derived from llama3's merges,
            plus a few whole words that the v1 pattern keeps whole and v2 cuts.

The files are deterministic for a given tokenizers version; what matters is only that they are
valid tokenizers, since the tests compare megatron-c with this package on them.
"""
import base64
import json
import os
import sys

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from tokenizers import processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.environ.get("MEGATRON_C_SHARED", os.path.join(ROOT, "..", "shared"))

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
          r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
         r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
          r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
          r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def text():
    with open(os.path.join(SHARED, "data", "text", "tinyshakespeare.txt"), encoding="utf-8") as f:
        return f.read()


def train(pattern, vocab, specials, ignore_merges=False, nfc=False):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = text().split("\n\n")
    tok.train_from_iterator(corpus, trainer=trainer)
    return tok


def train_gpt2_style(vocab):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"],
                                  show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(text().split("\n\n"), trainer=trainer)
    return tok


def save(tok, d, config, merges_as_strings=False):
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "tokenizer.json")
    tok.save(path)
    with open(path, encoding="utf-8") as f:
        j = json.load(f)
    if merges_as_strings:  # the older "a b" form (Qwen2's files); the newer is ["a", "b"]
        j["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m
                                for m in j["model"]["merges"]]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, separators=(",", ":"))
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1)
    print("%s: %d tokens" % (d, tok.get_vocab_size(with_added_tokens=True)))


def tiktoken_vocab(tok, path):
    """Ranks: the 256 bytes, then each merge's result in merge order (Megatron's format)."""
    j = json.loads(tok.to_str())
    b2c = {}
    for b, c in zip(range(256), bytes_to_unicode()):
        b2c[c] = b
    ranks = [bytes([i]) for i in range(256)]
    seen = set(ranks)
    for m in j["model"]["merges"]:
        a, b = m if isinstance(m, list) else m.split(" ")
        t = bytes(b2c[c] for c in a + b)
        if t not in seen:
            seen.add(t)
            ranks.append(t)
    # whole pieces under v1 that v2 cuts at case changes: tiktoken takes a piece that is a
    # token as that token, so these make the two patterns' ids differ
    for t in (b"CamelCaseWords", b" iPhone", b"XMLHttpRequest"):
        if t not in seen:
            seen.add(t)
            ranks.append(t)
    out = [{"rank": i, "token_bytes": base64.b64encode(t).decode("ascii"),
            "token_str": t.decode("utf-8", errors="replace")} for i, t in enumerate(ranks)]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
    print("%s: %d ranks" % (path, len(out)))


def bytes_to_unicode():
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = [], 0
    for b in range(256):
        if b in keep:
            chars.append(chr(b))
        else:
            chars.append(chr(0x100 + extra))
            extra += 1
    return chars


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "test", "fixtures",
                                                              "tokenizers")
    llama = train(LLAMA3, 2000, [], ignore_merges=True)
    llama.add_special_tokens(["<|begin_of_text|>", "<|end_of_text|>"])
    llama.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", 2000)]),
    ])
    save(llama, os.path.join(out, "llama3"),
         {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>",
          "eos_token": "<|end_of_text|>"})
    qwen = train(QWEN2, 1500, [], nfc=True)
    qwen.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    qwen.post_processor = processors.ByteLevel(trim_offsets=False)
    save(qwen, os.path.join(out, "qwen2"),
         {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None,
          "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}, merges_as_strings=True)
    nemo = train(TEKKEN, 2500, ["<unk>", "<s>", "</s>"])
    nemo.post_processor = processors.TemplateProcessing(single="<s> $A",
                                                        special_tokens=[("<s>", 1)])
    save(nemo, os.path.join(out, "nemo"),
         {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>",
          "eos_token": "</s>", "unk_token": "<unk>"})
    save(train_gpt2_style(1500), os.path.join(out, "gpt2style"),
         {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>"})
    tiktoken_vocab(llama, os.path.join(out, "tiktoken.json"))


if __name__ == "__main__":
    main()
