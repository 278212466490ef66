#!/usr/bin/env python3
"""Trains the small SentencePiece models in test/fixtures/tokenizers/ on tinyshakespeare.txt
(the test fixtures of megatron-c's SentencePiece tokenizers; nothing is downloaded at test time).

    build/venv-tok/bin/python test/ref/make_sp_models.py [OUT_DIR]

Needs the PyPI `sentencepiece` package (the version pinned in scripts/install-deps.sh) and
$MEGATRON_C_SHARED/data/text/tinyshakespeare.txt. One thread and a fixed input make the output
reproducible with the same sentencepiece version.

* sp_bpe_bytefallback.model: BPE, 1000 pieces, trained as Llama 2's tokenizer was (identity
  normalisation, no removal of extra whitespace, digits split, byte fallback, unk/bos/eos at
  0/1/2, no pad).
* sp_unigram.model: unigram, 2000 pieces, sentencepiece's defaults (NFKC normalisation, extra
  whitespace removed) with a pad piece at id 3 and two user-defined symbols, one of which is
  also one of Megatron's legacy special tokens ('<MASK>').
* sp_bpe_nfkc.model: BPE, 1000 pieces, sentencepiece's defaults (NFKC normalisation, extra
  whitespace removed, no byte fallback: unknown characters are <unk>) and a user-defined
  symbol: the other flag set under which data/spm.cc's chunk cache is on.
"""
import os
import sys

import sentencepiece as spm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "test/fixtures/tokenizers")
    shared = os.environ.get("MEGATRON_C_SHARED", os.path.join(ROOT, "..", "shared"))
    text = os.path.join(shared, "data/text/tinyshakespeare.txt")
    common = dict(input=text, num_threads=1, minloglevel=2, input_sentence_size=0,
                  shuffle_input_sentence=False, max_sentence_length=8192)
    spm.SentencePieceTrainer.train(
        model_prefix=os.path.join(out, "sp_bpe_bytefallback"), model_type="bpe", vocab_size=1000,
        byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        split_digits=True, allow_whitespace_only_pieces=True, add_dummy_prefix=True,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, character_coverage=0.9999, **common)
    spm.SentencePieceTrainer.train(
        model_prefix=os.path.join(out, "sp_unigram"), model_type="unigram", vocab_size=2000,
        pad_id=3, user_defined_symbols=["<MASK>", "[INST]"], **common)
    spm.SentencePieceTrainer.train(
        model_prefix=os.path.join(out, "sp_bpe_nfkc"), model_type="bpe", vocab_size=1000,
        user_defined_symbols=["[INST]"], **common)
    for name in ("sp_bpe_bytefallback", "sp_unigram", "sp_bpe_nfkc"):
        os.remove(os.path.join(out, name + ".vocab"))  # the .model holds everything
        sp = spm.SentencePieceProcessor(model_file=os.path.join(out, name + ".model"))
        print(name, "pieces", sp.get_piece_size(), "unk/bos/eos/pad", sp.unk_id(), sp.bos_id(),
              sp.eos_id(), sp.pad_id())


if __name__ == "__main__":
    main()
