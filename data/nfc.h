/* Unicode Normalization Form C (tokenizer.json's NFC normalizer): canonical decomposition,
 * canonical ordering, canonical composition (UAX #15), with the tables of data/nfc_tables.c
 * (scripts/gen-nfc-tables.py). Bytes that are not well-formed UTF-8 pass through unchanged and
 * block composition across them, like a starter that composes with nothing. */
#ifndef MC_DATA_NFC_H
#define MC_DATA_NFC_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t lo, hi, value;
} mc_nfc_range_t;
typedef struct {
    uint32_t cp, a, b; /* b = 0: a singleton */
} mc_nfc_decomp_t;
typedef struct {
    uint32_t a, b, c;
} mc_nfc_comp_t;

extern const mc_nfc_range_t mc_nfc_ccc[], mc_nfc_unstable[];
extern const mc_nfc_decomp_t mc_nfc_decomp[];
extern const mc_nfc_comp_t mc_nfc_comp[];
extern const size_t mc_nfc_nccc, mc_nfc_nunstable, mc_nfc_ndecomp, mc_nfc_ncomp;

/* NFC of s[0..len). *out = NULL when s is already in NFC (the usual case, checked without
 * copying), else a malloc'd string of *out_len bytes. 0, or -1 out of memory. */
int mc_nfc(const char *s, size_t len, char **out, size_t *out_len);

#endif
