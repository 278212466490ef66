/* The fast JSON line scanner of preprocess-data: whether a line is one JSON object as Python's
 * json.loads reads it, and where the wanted top-level values are, in one pass without
 * allocating. Anything it refuses goes to jansson, which decides and words the error. */
#ifndef MC_DATA_JSON_SCAN_H
#define MC_DATA_JSON_SCAN_H

#include <stdbool.h>
#include <stddef.h>

/* A top-level value of a scanned object. */
typedef struct {
    const char *p; /* a string: its raw bytes between the quotes; a list: from '[' */
    size_t n;
    int kind; /* 0 absent, 's' string, '[' list, 'o' other */
    bool esc; /* a string with escapes (mc_json_decode gives its bytes) */
} mc_json_val_t;

/* The elements of a list value the scanner validated. */
typedef struct {
    const char *s, *end;
} mc_json_list_t;

/* Whether line[0..n) is one JSON object as json.loads reads it (RFC 8259 plus NaN, Infinity,
 * -Infinity; strict UTF-8; no control characters in strings; surrogate escapes paired), with no
 * escaped key at its top level and nesting under 512. Fills vals[k] with the last value under
 * keys[k] (key_len[k] bytes) at the top level. */
bool mc_json_scan_object(const char *line, size_t n, const char *const *keys, const size_t *key_len,
                         int nkeys, mc_json_val_t *vals);

/* The bytes of a validated string's raw text raw[0..n) with escapes resolved, into out (room for
 * n bytes: an escape never decodes to more bytes than it is written with). Returns the length. */
size_t mc_json_decode(const char *raw, size_t n, char *out);

static inline mc_json_list_t mc_json_list(const mc_json_val_t *list)
{
    return (mc_json_list_t){list->p + 1, list->p + list->n};
}

/* The next element of a validated list: 1 with *str set when it is a string, 0 at the end, -1
 * when it is anything else. */
int mc_json_list_next(mc_json_list_t *it, mc_json_val_t *str);

/* One key, for tests. Returns 1 when line[0..n) passes mc_json_scan_object; then *kind says what
 * the last value under key is (0 absent, 's' string, '[' list, 'o' anything else) and, for a
 * string, buf (room for n bytes) holds its bytes and *len their count. Returns 0 otherwise. */
int mc_json_line_scan(const char *line, size_t n, const char *key, int *kind, char *buf,
                      size_t *len);

#endif
