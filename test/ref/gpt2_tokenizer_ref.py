#!/usr/bin/env python3
"""Reference GPT-2 byte-level BPE tokenizer (the algorithm of OpenAI's encoder.py, which Megatron's
legacy GPT2BPETokenizer wraps), and the generator of test/fixtures/bpe_corpus.txt.

    /usr/bin/python3 test/ref/gpt2_tokenizer_ref.py --check    # == Megatron's tinyshakespeare ids
    /usr/bin/python3 test/ref/gpt2_tokenizer_ref.py --bench    # tokens/s on tinyshakespeare
    /usr/bin/python3 test/ref/gpt2_tokenizer_ref.py --fixture test/fixtures/bpe_corpus.txt

Needs Debian's python3-regex (Unicode 15.0). Files come from $MEGATRON_C_SHARED (default
../shared relative to the repository root): data/gpt2/gpt2-{vocab.json,merges.txt},
data/text/tinyshakespeare.jsonl, data/megatron-ref/tinyshakespeare_tokens.jsonl.

What Megatron's legacy tokenizer does, stated as facts and re-implemented here:
* vocab: json.load of the vocab file; vocab_size = len(vocab); eod = vocab['<|endoftext|>'].
* merges: the file's text split at '\\n', dropping the first element (the '#version' line) and
  the last (empty when the file ends with a newline); each line split on whitespace gives a
  pair; rank = index (a repeated pair keeps its last index).
* pre-tokenisation: regex.findall of the pattern below on the str.
* each piece is encoded to UTF-8 and each byte mapped through bytes_to_unicode; then BPE: while
  some adjacent pair has a rank, take the lowest-ranked pair and merge every occurrence of it,
  scanning left to right without overlap.
* ids: vocab.get(symbol, 0) (an unknown symbol becomes id 0; never happens with GPT-2's files).
* A str with a lone surrogate (possible from a JSON "\\ud800" escape) makes Megatron raise
  UnicodeEncodeError in token.encode('utf-8').

Raw bytes (megatron-c's API takes bytes): decoded with errors='surrogateescape', i.e. each byte
that is not part of a well-formed UTF-8 sequence becomes one lone surrogate U+DC80+byte, which
the pattern treats like any char outside \\s, \\p{L} and \\p{N}; each piece is encoded back with
errors='surrogateescape', so that byte itself goes through BPE. Valid UTF-8 is unaffected, and
decode(encode(x)) == x for any bytes x.
"""
import argparse
import json
import os
import random
import sys
import time

import regex

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def shared_dir():
    return os.environ.get("MEGATRON_C_SHARED", os.path.join(ROOT, "..", "shared"))


def byte_to_char_table():
    """bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes (in
    increasing order) to U+0100, U+0101, ..."""
    keep = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    table = {}
    extra = 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + extra)
            extra += 1
    return table


class GPT2Ref:
    def __init__(self, vocab_path, merges_path):
        with open(vocab_path, encoding="utf-8") as f:
            self.vocab = json.load(f)
        self.inv = {i: s for s, i in self.vocab.items()}
        with open(merges_path, encoding="utf-8") as f:
            lines = f.read().split("\n")[1:-1]
        self.ranks = {}
        for r, line in enumerate(lines):
            self.ranks[tuple(line.split())] = r
        self.b2c = byte_to_char_table()
        self.c2b = {c: b for b, c in self.b2c.items()}
        self.pat = regex.compile(PATTERN)
        self.cache = {}
        self.eod = self.vocab["<|endoftext|>"]

    def bpe(self, word):
        hit = self.cache.get(word)
        if hit is not None:
            return hit
        syms = list(word)
        while len(syms) > 1:
            best, best_rank = None, None
            for a, b in zip(syms, syms[1:]):
                r = self.ranks.get((a, b))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = (a, b), r
            if best is None:
                break
            out, i = [], 0
            while i < len(syms):
                if i + 1 < len(syms) and syms[i] == best[0] and syms[i + 1] == best[1]:
                    out.append(best[0] + best[1])
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            syms = out
        self.cache[word] = syms
        return syms

    def encode_str(self, text, errors="strict"):
        ids = []
        for piece in self.pat.findall(text):
            word = "".join(self.b2c[b] for b in piece.encode("utf-8", errors))
            ids.extend(self.vocab.get(s, 0) for s in self.bpe(word))
        return ids

    def encode_bytes(self, data):
        return self.encode_str(data.decode("utf-8", "surrogateescape"), "surrogateescape")

    def decode_bytes(self, ids):
        return bytes(self.c2b[c] for i in ids for c in self.inv[i])


def load_ref():
    d = os.path.join(shared_dir(), "data", "gpt2")
    return GPT2Ref(os.path.join(d, "gpt2-vocab.json"), os.path.join(d, "gpt2-merges.txt"))


def shakespeare_docs():
    path = os.path.join(shared_dir(), "data", "text", "tinyshakespeare.jsonl")
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def check(tok):
    docs = shakespeare_docs()
    path = os.path.join(shared_dir(), "data", "megatron-ref", "tinyshakespeare_tokens.jsonl")
    with open(path, encoding="utf-8") as f:
        want = [json.loads(line) for line in f]
    assert len(docs) == len(want), (len(docs), len(want))
    total = 0
    for i, (text, ids) in enumerate(zip(docs, want)):
        assert ids and ids[-1] == tok.eod, "document %d does not end with eod" % i
        got = tok.encode_str(text) + [tok.eod]
        if got != ids:
            raise SystemExit("document %d differs: %r vs %r" % (i, got[:20], ids[:20]))
        total += len(ids)
    # the legacy tokenizer raises on a lone surrogate (what json.loads makes of "\ud800")
    try:
        tok.encode_str("a\ud800b")
        raise SystemExit("lone surrogate did not raise")
    except UnicodeEncodeError:
        pass
    print("tinyshakespeare: %d documents, %d tokens (with eod) identical to Megatron's"
          % (len(docs), total))


def check_regex_classes():
    """The installed `regex` module must match \\p{L}, \\p{N} and \\s exactly as the shared table
    (Megatron's Unicode 15.0 classes) says, or the fixture would encode another Unicode version."""
    path = os.path.join(shared_dir(), "data", "megatron-ref", "regex_unicode_classes.json")
    with open(path, encoding="utf-8") as f:
        want = json.load(f)
    for key, pat in (("L", r"\p{L}"), ("N", r"\p{N}"), ("s", r"\s")):
        r = regex.compile(pat)
        got, start = [], None
        for cp in range(0x110001):
            hit = cp <= 0x10FFFF and not 0xD800 <= cp <= 0xDFFF and r.match(chr(cp)) is not None
            if hit and start is None:
                start = cp
            elif not hit and start is not None:
                got.append([start, cp - 1])
                start = None
        if got != want[key]:
            raise SystemExit("regex %s: %s differs from %s" % (regex.__version__, pat, path))
    print("regex %s: \\p{L}, \\p{N}, \\s match %s" % (regex.__version__, os.path.basename(path)))


def bench(tok):
    docs = shakespeare_docs()
    tok.cache = {}
    t0 = time.perf_counter()
    n = 0
    for text in docs:
        n += len(tok.encode_str(text)) + 1
    dt = time.perf_counter() - t0
    print("python reference: %d tokens in %.3f s = %.0f tokens/s (one thread; BPE cache starting empty, as in a fresh Megatron worker)"
          % (n, dt, n / dt))


# ------------------------------------------------------------------------------------------
# the corpus fixture

def corpus():
    """(name, bytes) pairs; deterministic."""
    rng = random.Random(20240611)
    cases = []

    def add(name, s):
        cases.append((name, s.encode("utf-8") if isinstance(s, str) else s))

    add("empty", "")
    # ASCII prose
    prose = [
        "Hello world",
        "Hello, world! How are you today?",
        "The quick brown fox jumps over the lazy dog.",
        "First Citizen:\nBefore we proceed any further, hear me speak.",
        "It was the best of times, it was the worst of times, it was the age of wisdom...",
        "  Leading spaces and trailing spaces  ",
        "Mr. Smith (aged 42) said: \"No!\" -- then left; [sic] {braces} <angle> @user #tag",
        "e-mail: someone@example.com, URL: https://example.org/path?q=1&r=a%20b#frag",
        "ALL CAPS SENTENCE WITH NUMBERS 123 AND SYMBOLS $%^&*",
        "mIxEd CaSe wOrDs aNd sTrAnGe sPaCiNg",
        "single",
        "a",
        " ",
        "!",
        "...",
        "?!?!",
        "a.b.c.d",
        "_underscore_names_ and __dunder__",
        "Tab\tseparated\tvalues\t1\t2\t3",
        "line one\nline two\r\nline three\rline four",
        "The year 1984 and 2001: A Space Odyssey.",
        "<|endoftext|>",
        "text<|endoftext|>more text",
        "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
        "Ġ Ċ ĉ and other byte-level look-alikes",
    ]
    for i, s in enumerate(prose):
        add("prose%d" % i, s)
    # code
    code = [
        "int main(void) {\n    printf(\"hello %d\\n\", 42);\n    return 0;\n}\n",
        "def f(x):\n\treturn x ** 2  # square\n\n\nclass A(object):\n    pass\n",
        "for (size_t i = 0; i < n; ++i) a[i] += b[i] * c;",
        "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\"}}",
        "<html><body class=\"x\">&amp; &lt;tag&gt; &#x27;</body></html>",
        "x=>x+1; y = a?.b ?? c; z = a !== b && c || d;",
        "    indented\n        more\n            most\n",
        "#!/bin/sh\nset -eu\nls -la | grep '^d' > /dev/null 2>&1\n",
        "SELECT * FROM users WHERE name = 'O''Brien';",
        "\\begin{equation} E = mc^2 \\end{equation}",
        "git commit -m 'fix: don't crash'",
        "https://github.com/NVIDIA/Megatron-LM/blob/main/tools/preprocess_data.py#L100-L120",
    ]
    for i, s in enumerate(code):
        add("code%d" % i, s)
    # numbers
    nums = [
        "1,234,567.89", "3.14159265358979", "1e-10", "0x1F 0b1010 0o777", "2024-01-01T12:34:56Z",
        "$1,000,000", "10%", "-42", "+7", "1/2 3/4", "123456789012345678901234567890",
        "v1.2.3-rc4", "192.168.0.1:8080", "phone: +1 (555) 123-4567", "1st 2nd 3rd 4th",
        "٠١٢٣٤٥٦٧٨٩ ۰۱۲ ०१२३ ¹²³ ½¼ Ⅻ ⅷ ① ⑳",
    ]
    for i, s in enumerate(nums):
        add("num%d" % i, s)
    # contractions
    contr = [
        "it's don't they're we've I'm you'll he'd",
        "IT'S DON'T THEY'RE WE'VE I'M YOU'LL HE'D",
        "It'S Don'T They'Re We'Ve I'M You'Ll He'D",
        "'s 't 're 've 'm 'll 'd",
        "'S 'T 'RE 'VE 'M 'LL 'D",
        "'s't're've'm'll'd",
        "''s '''t ' s 'x 'r 'v 'l",
        "rock'n'roll o'clock y'all ma'am",
        "students' books, the boss's office",
        "'ll've 'dn't",
        "'",
        "''",
        "x'",
        "'s",
        " 's",
        "!'s",
        "\u2019s it\u2019s curly apostrophes",
        "'re'",
        "'resume 'very 'master 'llama 'double",
    ]
    for i, s in enumerate(contr):
        add("contr%d" % i, s)
    # whitespace
    ws = [
        "a  b", "a   b", "a\t\tb", "a\n\n\nb", "a \n b", "a\n \nb", "   leading", "trailing   ",
        "\n", "\n\n", " ", "  ", "\t", "\r\n", "\t \n \r\n", "a \tb", "a\t b", " \ta",
        "word\n", "word \n", "word\n ", "x" + " " * 37 + "y", "x" + "\n" * 20 + "y",
        "x" + " \t" * 15 + "y", "end with many spaces" + " " * 50, " " * 64, "\t" * 33,
        "\n" * 17, " \u00a0 ", "a\u00a0b", "a \u00a0b", "a\u00a0 b", "1 \t 2", " 1", "  1",
        "  !", " !", "\n!", "\na", "\n a", "a\x0bb\x0cc", "a\x85b \x85 c",
    ]
    for i, s in enumerate(ws):
        add("ws%d" % i, s)
    # scripts
    scripts = [
        "你好，世界！这是一个测试。",
        "我爱北京天安门 天安门上太阳升",
        "日本語のテキスト：ひらがな、カタカナ、漢字。ｶﾀｶﾅ（半角）",
        "東京は日本の首都です。2024年",
        "한국어 텍스트입니다. 안녕하세요!",
        "ᄀᄁᄂ 한글 자모 ㄱㄴㄷ",
        "مرحبا بالعالم! هذا اختبار.",
        "اَلْعَرَبِيَّةُ مع التشكيل",
        "שלום עולם, זה מבחן.",
        "नमस्ते दुनिया! यह एक परीक्षण है।",
        "हिन्दी में संयुक्ताक्षर: क्षत्रिय, ज्ञान, श्री",
        "สวัสดีชาวโลก ภาษาไทย",
        "Привет, мир! Это тест. ЁЖИК",
        "Γειά σου Κόσμε! αβγδε ΑΒΓΔΕ",
        "Ελληνικά: ά έ ή ί ό ύ ώ ΐ ΰ",
        "Ἀθῆναι ᾅδης",
        "Tiếng Việt có dấu: Nguyễn, Trần, Lê",
        "Ærøskøbing Åland Ødegaard straße ÇÄÖÜ",
        "ግዕዝ አማርኛ",
        "ᐃᓄᒃᑎᑐᑦ",
        "ქართული ენა",
        "Հայերեն լեզու",
        "தமிழ் மொழி",
        "ಕನ್ನಡ ಭಾಷೆ",
        "বাংলা ভাষা",
        "ਪੰਜਾਬੀ",
        "မြန်မာ",
        "ខ្មែរ",
        "ລາວ",
        "සිංහල",
        "ᠮᠣᠩᠭᠣᠯ",
        "ꦗꦮ",
        "mixed 中文 and English 和 日本語 text",
    ]
    for i, s in enumerate(scripts):
        add("script%d" % i, s)
    # emoji and symbols
    emoji = [
        "😀 😃 😄 😁", "👍🏽 👋🏿 🙏🏻", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 🏴‍☠️", "🇺🇸🇬🇧🇯🇵",
        "1️⃣ #️⃣ *️⃣", "I ❤️ NY", "😀😀😀😀😀😀😀😀", "text😀text", "a 😀b", "🧑🏽‍💻 coding",
        "♠♣♥♦ ★☆ ✓✗ →←↑↓ ∀∃∈∉ ∑∏√∞", "© ® ™ ° ± × ÷ § ¶ • …", "€ £ ¥ ₹ ₽ ₿ ¢",
        "“quoted” ‘single’ «guillemets» „German“", "— – ‒ ― dashes", "\ufeffBOM at start",
        "zero\u200bwidth\u200cjoiner\u200dchars", "\u2060word\u2060joiner",
        "variation\ufe0fselector\ufe0e", "private use \ue000\uf8ff",
    ]
    for i, s in enumerate(emoji):
        add("emoji%d" % i, s)
    # combining marks
    comb = [
        "e\u0301 a\u0300 o\u0308 n\u0303", "Ame\u0301lie cafe\u0301", "\u0301 leading combining",
        "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349a\u0308lgo",
        "\u0300\u0301\u0302\u0303", "q\u0307\u0323", "x\u20dd circle",
    ]
    for i, s in enumerate(comb):
        add("comb%d" % i, s)
    # control characters and unusual spaces
    ctrl = [
        "\x00", "a\x00b", "\x01\x02\x03", "a\x1cb\x1dc\x1ed\x1fe", " \x1c ", "\x1c\x1d\x1e\x1f",
        "a \x1c b", "\x7f del", "\x1b[31mred\x1b[0m", "bell\x07", "\x08back",
        "a\u2028b\u2029c", "x\u3000y\u3000\u3000z", "\u2000\u2001\u2002\u2003\u200a end",
        "a\u1680b", "a\u202fb\u205fc", "a\u180eb", "a\u200bb", "\u3000", "\u2028\u2029",
        "word\u3000", "\u00a0word", " \u3000word", "\u3000 word", "\u0085", "a\x0b\x0cb",
        "\u00ad soft hyphen", "\u061c arabic mark", "\u2066isolate\u2069",
    ]
    for i, s in enumerate(ctrl):
        add("ctrl%d" % i, s)
    # non-BMP letters and digits
    nonbmp = [
        "𝐀𝐁𝐂 𝑎𝑏𝑐 𝔸𝔹ℂ", "𝟎𝟏𝟐𝟑 𝟘𝟙", "𐌰𐌱𐌲 gothic", "𒐀𒐁 cuneiform numbers", "𠀀𠀁 ext-B 𪛖",
        "𐐀𐐨 deseret", "𓀀𓁐 hieroglyphs", "𞤀𞤢 adlam 𞥑𞥒", "𑁦𑁧 brahmi digits", "a𝐀1𝟏!",
        "\U0010fffd\U000f0000 planes 15/16", "𝕿𝖊𝖝𝖙",
    ]
    for i, s in enumerate(nonbmp):
        add("nonbmp%d" % i, s)
    # long runs
    letters = "abcdefghijklmnopqrstuvwxyz"
    add("long_a", "a" * 1500)
    add("long_letters", "".join(rng.choice(letters) for _ in range(2000)))
    add("long_mixedcase", "".join(rng.choice(letters + letters.upper()) for _ in range(1200)))
    add("long_digits", "".join(rng.choice("0123456789") for _ in range(1200)))
    add("long_punct", "".join(rng.choice("!@#$%^&*()-=+[]{};:,.<>/?|~`") for _ in range(1000)))
    add("long_spaces", " " * 1000 + "x")
    add("long_mixed_ws", "".join(rng.choice(" \t\n\r") for _ in range(1000)) + "y")
    add("long_abc", "abc" * 500)
    add("long_the", " the" * 300)
    add("long_cjk", "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(1000)))
    add("long_emoji", "".join(chr(rng.randrange(0x1F600, 0x1F64F)) for _ in range(300)))
    add("long_base64", "".join(rng.choice(letters + letters.upper() + "0123456789+/")
                               for _ in range(3000)))
    add("long_hex", "".join(rng.choice("0123456789abcdef") for _ in range(1500)))
    add("long_aaab", "a" * 700 + "b" + "a" * 700)
    add("long_dots", "." * 1100)
    add("long_word_repeat", "ing" * 400 + "tion" * 300)
    # invalid UTF-8 (raw-bytes API)
    invalid = [
        b"\x80", b"\xff", b"\xfe\xff", b"abc\x80def", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82(",
        b"\xf0\x9f\x98", b"\xf0\x9f\x98 x", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80",
        b"\xe0\x9f\xbf", b"\xed\xa0\x80", b"\xed\xb2\x80", b"\xed\xa0\xbd\xed\xb8\x80",
        b"\xf0\x80\x80\x80", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80",
        b"hello \xff world", b"\xff hello", b"hello\xff", b" \xff", b"\n\xff", b"'\xff", b"'s\xff",
        b"\xff's", b"a\xffb\xfec", b"\xc3\xa9\xc3", b"caf\xc3\xa9 \xe9t\xe9", b"\x80\x80\x80abc",
        b"12\xff34", b"  \xff", b"\xff  ", b"\xe4\xbd\xa0\xe5\xa5", b"\xef\xbb\xbf\xff",
    ]
    for i, s in enumerate(invalid):
        add("invalid%d" % i, s)
    for i in range(30):
        n = rng.randrange(1, 120)
        add("randbytes%d" % i, bytes(rng.randrange(256) for _ in range(n)))
    # random byte soup biased towards UTF-8-ish and ASCII structure
    for i in range(15):
        parts = []
        for _ in range(rng.randrange(3, 40)):
            k = rng.random()
            if k < 0.3:
                parts.append(rng.choice([b" ", b"  ", b"\n", b"\t", b"'s", b"'", b"a", b"1"]))
            elif k < 0.6:
                parts.append(chr(rng.choice([0xE9, 0x4E2D, 0x1F600, 0x3000, 0xA0, 0x0301, 0x661]))
                             .encode("utf-8"))
            elif k < 0.8:
                parts.append(bytes([rng.choice([0x80, 0xBF, 0xC2, 0xE0, 0xED, 0xF0, 0xF4, 0xFF])]))
            else:
                parts.append(rng.choice([b"word", b"Word", b"123", b"!?", b"\x1c"]))
        add("soup%d" % i, b"".join(parts))
    # random strings from a pool of class-interesting code points (pre-tokeniser fuzz)
    pool = (list(" " * 12) + list("\t\n\r\x0b\x0c") + ["\u00a0", "\u3000", "\u2028", "\x85",
                                                       "\x1c", "\x1f", "\u200b", "\u180e"]
            + list("aAzZ'sSlLtTrRvVmMdDe") * 2 + list("0123456789") + ["\u00b2", "\u2167",
                                                                       "\u0661", "\U0001d7ce"]
            + list("!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~") + ["\u00e9", "\u4e2d", "\u0915",
                                                           "\u093f", "\u0301", "\U0001f600",
                                                           "\u200d", "\U0001f3fd", "\u05d0",
                                                           "\U0001d400", "\u00aa", "\u02b0"])
    for i in range(80):
        n = rng.randrange(1, 60)
        add("fuzz%d" % i, "".join(rng.choice(pool) for _ in range(n)))
    # shakespeare excerpts with perturbations
    docs = shakespeare_docs()
    for i in range(10):
        d = docs[rng.randrange(len(docs))]
        add("shake%d" % i, d.upper() if i % 3 == 0 else d.replace(" ", "  ") if i % 3 == 1 else d)
    return cases


def write_fixture(tok, path):
    cases = corpus()
    names = set()
    out = ["# GPT-2 BPE corpus fixture, generated by test/ref/gpt2_tokenizer_ref.py --fixture.",
           "# One case per line: name TAB input bytes as hex TAB ids (space-separated).",
           "# Invalid UTF-8 follows the surrogateescape rule documented in data/tokenizer.h."]
    total = 0
    for name, data in cases:
        assert name not in names and "\t" not in name and " " not in name, name
        names.add(name)
        ids = tok.encode_bytes(data)
        assert tok.decode_bytes(ids) == data, name
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None:
            assert ids == tok.encode_str(text), name
        out.append("%s\t%s\t%s" % (name, data.hex(), " ".join(str(i) for i in ids)))
        total += len(ids)
    with open(path, "w", encoding="ascii", newline="\n") as f:
        f.write("\n".join(out) + "\n")
    print("%s: %d cases, %d ids, %d bytes" % (path, len(cases), total, os.path.getsize(path)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--fixture", metavar="PATH")
    a = ap.parse_args()
    if not (a.check or a.bench or a.fixture):
        ap.error("nothing to do")
    tok = load_ref()
    assert len(tok.vocab) == 50257 and tok.eod == 50256, (len(tok.vocab), tok.eod)
    if a.check or a.fixture:
        check(tok)
    if a.bench:
        bench(tok)
    if a.fixture:
        check_regex_classes()
        write_fixture(tok, a.fixture)


if __name__ == "__main__":
    sys.exit(main())
