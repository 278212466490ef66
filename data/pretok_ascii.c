/* The ASCII fast path of the Llama 3 / Qwen2 / Tekken (v2) / tiktoken v1 patterns (see
 * data/pretok_ascii.h). Each step follows the pattern's alternatives in order, with the
 * backtracking worked out: \s*[\r\n]+ ends after the run's last \r or \n; \s+(?!\S) gives back
 * the run's last character when a non-space follows; the possessive quantifiers of v1 change
 * nothing here, because what they keep cannot start what follows them. */
#include "data/pretok_ascii.h"

#include <string.h>

#define RE_L "\\p{L}"
#define RE_N "\\p{N}"
#define RE_TAIL "|\\s+(?!\\S)|\\s+"

static const char LLAMA3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n" RE_L RE_N "]?" RE_L "+|" RE_N
                             "{1,3}| ?[^\\s" RE_L RE_N "]+[\\r\\n]*|\\s*[\\r\\n]+" RE_TAIL;
static const char QWEN2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n" RE_L RE_N "]?" RE_L "+|" RE_N
                            "| ?[^\\s" RE_L RE_N "]+[\\r\\n]*|\\s*[\\r\\n]+" RE_TAIL;
static const char TEKKEN[] =
    "[^\\r\\n" RE_L RE_N "]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n" RE_L RE_N
    "]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|" RE_N
    "| ?[^\\s" RE_L RE_N "]+[\\r\\n/]*|\\s*[\\r\\n]+" RE_TAIL;
static const char V1[] = "[^\\r\\n" RE_L RE_N "]?+" RE_L "+|" RE_N "| ?[^\\s" RE_L RE_N
                         "]++[\\r\\n]*|\\s*[\\r\\n]" RE_TAIL;

static const mc_pretok_ascii_t K_LLAMA3 = {1, 3, 0, 0}, K_QWEN2 = {1, 1, 0, 0},
                               K_TEKKEN = {0, 1, 1, 1}, K_V1 = {0, 1, 0, 0};

const mc_pretok_ascii_t *mc_pretok_ascii_find(const char *pattern)
{
    if (strcmp(pattern, LLAMA3) == 0) return &K_LLAMA3;
    if (strcmp(pattern, QWEN2) == 0) return &K_QWEN2;
    if (strcmp(pattern, TEKKEN) == 0) return &K_TEKKEN;
    if (strcmp(pattern, V1) == 0) return &K_V1;
    return NULL;
}

/* Character classes: END past the text, UNK a byte >= 0x80 (decided by PCRE2). WS is \s other
 * than \r and \n; OTH is everything else: [^\s\p{L}\p{N}]. */
enum { END, UNK, UP, LO, DIG, WS, NL, OTH };

static inline int cls(const unsigned char *s, size_t len, size_t i)
{
    if (i >= len) return END;
    unsigned c = s[i];
    if (c >= 0x80) return UNK;
    if (c >= 'a' && c <= 'z') return LO;
    if (c >= 'A' && c <= 'Z') return UP;
    if (c >= '0' && c <= '9') return DIG;
    if (c == '\r' || c == '\n') return NL;
    if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return WS;
    return OTH;
}

#define IS_L(k) ((k) == UP || (k) == LO)
#define PREFIX(k) ((k) == WS || (k) == OTH) /* [^\r\n\p{L}\p{N}] */

/* The end of the run of classes a or b from i, or 0 if a byte >= 0x80 ends it. */
static inline size_t run(const unsigned char *s, size_t len, size_t i, int a, int b)
{
    int k;
    while ((k = cls(s, len, i)) == a || k == b) i++;
    return k == UNK ? 0 : i;
}

/* The letters alternatives at pos: \p{L}+ with an optional prefix, or (case_split) the two
 * case-shaped ones. 0 unknown, 1 no match (*end unset), else 2 with *end. */
static int letters(const mc_pretok_ascii_t *p, const unsigned char *s, size_t len, size_t pos,
                   size_t *end)
{
    int c0 = cls(s, len, pos);
    size_t q = pos;
    if (PREFIX(c0)) {
        int c1 = cls(s, len, pos + 1);
        if (c1 == UNK) return 0;
        if (!IS_L(c1)) return 1;
        q = pos + 1;
    } else if (!IS_L(c0)) {
        return 1;
    }
    if (!p->case_split) {
        size_t e = run(s, len, q, UP, LO);
        return e ? (*end = e, 2) : 0;
    }
    size_t u = run(s, len, q, UP, UP); /* [Lu..]* then [Ll..]+, else [Lu..]+ [Ll..]* */
    if (!u) return 0;
    size_t l = run(s, len, u, LO, LO);
    if (!l) return 0;
    if (l > u || u > q) return *end = l, 2;
    return 1;
}

/* \s*[\r\n]+, \s+(?!\S), \s+ over the whitespace run from pos (c0 is WS or NL). */
static size_t spaces(const unsigned char *s, size_t len, size_t pos)
{
    size_t w = run(s, len, pos, WS, NL);
    if (!w) return 0;
    for (size_t i = w; i > pos; i--)
        if (s[i - 1] == '\r' || s[i - 1] == '\n') return i;
    if (w < len && w - pos >= 2) return w - 1; /* leave the last space to the next piece */
    return w;
}

size_t mc_pretok_ascii_match(const mc_pretok_ascii_t *p, const unsigned char *s, size_t len,
                             size_t pos)
{
    int c0 = cls(s, len, pos);
    if (c0 == UNK) return 0;
    if (p->contractions && s[pos] == '\'') { /* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
        int c1 = cls(s, len, pos + 1), c2 = cls(s, len, pos + 2);
        unsigned a = pos + 1 < len ? s[pos + 1] | 0x20 : 0,
                 b = pos + 2 < len ? s[pos + 2] | 0x20 : 0;
        if (c1 == UNK) return 0; /* 'ſ folds to 's */
        if (IS_L(c1) && (a == 's' || a == 't' || a == 'm' || a == 'd')) return pos + 2;
        if (IS_L(c1) && (a == 'r' || a == 'v' || a == 'l')) {
            if (c2 == UNK) return 0;
            if (IS_L(c2) && ((a == 'l' && b == 'l') || (a != 'l' && b == 'e'))) return pos + 3;
        }
    }
    size_t end;
    int r = letters(p, s, len, pos, &end);
    if (r != 1) return r ? end : 0;
    if (c0 == DIG) { /* \p{N}{1,max} */
        size_t e = pos;
        while (e < pos + (size_t)p->max_digits && cls(s, len, e) == DIG) e++;
        return e < pos + (size_t)p->max_digits && cls(s, len, e) == UNK ? 0 : e;
    }
    size_t q = pos; /* ' ?[^\s\p{L}\p{N}]+[\r\n]*' ([\r\n/]* with slash) */
    if (s[pos] == ' ') {
        int c1 = cls(s, len, pos + 1);
        if (c1 == UNK) return 0;
        if (c1 == OTH) q = pos + 1;
    }
    if (cls(s, len, q) == OTH) {
        size_t e = run(s, len, q, OTH, OTH);
        if (!e) return 0;
        while (e < len && (s[e] == '\r' || s[e] == '\n' || (p->slash && s[e] == '/'))) e++;
        return e;
    }
    return c0 == WS || c0 == NL ? spaces(s, len, pos) : 0;
}
