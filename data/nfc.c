/* NFC (see data/nfc.h). Code points are processed as uint32_t; a byte outside well-formed
 * UTF-8 is carried as INVALID | byte (class 0, no decomposition, composes with nothing). */
#include "data/nfc.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "data/bpe.h"

#define INVALID 0x80000000u
#define SBASE 0xAC00u
#define LBASE 0x1100u
#define VBASE 0x1161u
#define TBASE 0x11A7u
#define LCOUNT 19u
#define VCOUNT 21u
#define TCOUNT 28u
#define NCOUNT (VCOUNT * TCOUNT)
#define SCOUNT (LCOUNT * NCOUNT)

static bool in_ranges(const mc_nfc_range_t *r, size_t n, uint32_t cp, uint32_t *value)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid].lo) hi = mid;
        else if (cp > r[mid].hi) lo = mid + 1;
        else {
            if (value) *value = r[mid].value;
            return true;
        }
    }
    return false;
}

static uint32_t ccc(uint32_t cp)
{
    uint32_t v = 0;
    return cp < 0x300 || cp & INVALID ? 0 : in_ranges(mc_nfc_ccc, mc_nfc_nccc, cp, &v) ? v : 0;
}

static const mc_nfc_decomp_t *decomp_of(uint32_t cp)
{
    size_t lo = 0, hi = mc_nfc_ndecomp;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < mc_nfc_decomp[mid].cp) hi = mid;
        else if (cp > mc_nfc_decomp[mid].cp) lo = mid + 1;
        else return &mc_nfc_decomp[mid];
    }
    return NULL;
}

/* The primary composite of a and b, or 0. */
static uint32_t compose(uint32_t a, uint32_t b)
{
    if (a - LBASE < LCOUNT && b - VBASE < VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a - SBASE < SCOUNT && (a - SBASE) % TCOUNT == 0 && b - TBASE - 1 < TCOUNT - 1)
        return a + (b - TBASE);
    uint64_t key = (uint64_t)a << 32 | b;
    size_t lo = 0, hi = mc_nfc_ncomp;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        uint64_t k = (uint64_t)mc_nfc_comp[mid].a << 32 | mc_nfc_comp[mid].b;
        if (key < k) hi = mid;
        else if (key > k) lo = mid + 1;
        else return mc_nfc_comp[mid].c;
    }
    return 0;
}

/* Appends the full canonical decomposition of cp to buf (room for 4 per level is enough:
 * decompositions nest at most 4 deep and each adds one code point). */
static size_t decompose(uint32_t cp, uint32_t *buf)
{
    if (cp - SBASE < SCOUNT) {
        uint32_t s = cp - SBASE, t = s % TCOUNT;
        buf[0] = LBASE + s / NCOUNT;
        buf[1] = VBASE + (s % NCOUNT) / TCOUNT;
        if (t) buf[2] = TBASE + t;
        return t ? 3 : 2;
    }
    const mc_nfc_decomp_t *d = cp & INVALID ? NULL : decomp_of(cp);
    if (!d) {
        buf[0] = cp;
        return 1;
    }
    size_t k = decompose(d->a, buf);
    if (d->b) k += decompose(d->b, buf + k);
    return k;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp & INVALID) {
        o[0] = (char)(cp & 0xFF);
        return 1;
    }
    unsigned char *u = (unsigned char *)o;
    if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        u[0] = (unsigned char)(0xC0 | (cp >> 6));
        u[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        u[0] = (unsigned char)(0xE0 | (cp >> 12));
        u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    u[0] = (unsigned char)(0xF0 | (cp >> 18));
    u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    u[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Canonical ordering (a stable sort of each run of non-starters by class), then the
 * composition of UAX #15's sample code. Returns the new count. */
static size_t order_and_compose(uint32_t *c, size_t n)
{
    for (size_t i = 1; i < n; i++) /* insertion sort: runs are short */
        for (size_t j = i; j > 0 && ccc(c[j]) && ccc(c[j - 1]) > ccc(c[j]); j--) {
            uint32_t t = c[j];
            c[j] = c[j - 1];
            c[j - 1] = t;
        }
    if (n < 2) return n;
    size_t starter = 0, out = 1;
    uint32_t last = ccc(c[0]) ? 256 : 0;
    for (size_t i = 1; i < n; i++) {
        uint32_t ch = c[i], cl = ccc(ch);
        uint32_t comp = c[starter] & INVALID || ch & INVALID ? 0 : compose(c[starter], ch);
        if (comp && (last < cl || last == 0)) {
            c[starter] = comp;
            continue;
        }
        if (cl == 0) starter = out;
        last = cl;
        c[out++] = ch;
    }
    return out;
}

int mc_nfc(const char *s, size_t len, char **out, size_t *out_len)
{
    const unsigned char *u = (const unsigned char *)s;
    bool stable = true;
    for (size_t p = 0; p < len && stable;) {
        uint32_t cp;
        size_t k = u[p] < 0x80 ? 1 : mc_utf8_next(u, len, p, &cp);
        if (k > 1) stable = cp < 0x300 || !in_ranges(mc_nfc_unstable, mc_nfc_nunstable, cp, NULL);
        p += k ? k : 1;
    }
    *out = NULL;
    if (stable) return 0;
    uint32_t *c = malloc((len * 4 + 4) * sizeof(uint32_t)); /* <= 4 code points per byte */
    if (!c) return -1;
    size_t n = 0;
    for (size_t p = 0; p < len;) {
        uint32_t cp;
        size_t k = mc_utf8_next(u, len, p, &cp);
        n += decompose(k ? cp : INVALID | u[p], c + n);
        p += k ? k : 1;
    }
    n = order_and_compose(c, n);
    char *o = malloc(n * 4 + 1);
    if (!o) {
        free(c);
        return -1;
    }
    size_t ol = 0;
    for (size_t i = 0; i < n; i++) ol += put_utf8(o + ol, c[i]);
    free(c);
    *out = o;
    *out_len = ol;
    return 0;
}
