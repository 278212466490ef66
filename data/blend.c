/* Megatron's blend and split helpers; see blend.h. */
#include "base/error.h"
#include "data/blend.h"

#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>


/* ---- Python float() ------------------------------------------------------------------------ */

/* digitpart: digit (["_"] digit)*; copies the digits to *o. Returns the characters consumed. */
static size_t digitpart(const char *s, char **o)
{
    size_t i = 0;
    if (!isdigit((unsigned char)s[0])) return 0;
    for (;;) {
        *(*o)++ = s[i++];
        if (isdigit((unsigned char)s[i])) continue;
        if (s[i] == '_' && isdigit((unsigned char)s[i + 1])) {
            i++;
            continue;
        }
        return i;
    }
}

int mc_parse_py_float(const char *s, double *out)
{
    while (isspace((unsigned char)*s)) s++;
    size_t len = strlen(s);
    while (len && isspace((unsigned char)s[len - 1])) len--;
    if (len == 0 || len > 4000) return -1;
    char buf[4096], *o = buf;
    size_t i = 0;
    bool neg = false;
    if (s[i] == '+' || s[i] == '-') neg = s[i++] == '-';
    size_t rest = len - i;
    if ((rest == 3 && !strncasecmp(s + i, "inf", 3)) ||
        (rest == 8 && !strncasecmp(s + i, "infinity", 8))) {
        *out = neg ? -INFINITY : INFINITY;
        return 0;
    }
    if (rest == 3 && !strncasecmp(s + i, "nan", 3)) {
        *out = neg ? -NAN : NAN;
        return 0;
    }
    if (neg) *o++ = '-';
    size_t a = digitpart(s + i, &o);
    i += a;
    size_t b = 0;
    if (i < len && s[i] == '.') {
        *o++ = s[i++];
        b = digitpart(s + i, &o);
        i += b;
    }
    if (a == 0 && b == 0) return -1;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        *o++ = s[i++];
        if (i < len && (s[i] == '+' || s[i] == '-')) *o++ = s[i++];
        size_t e = digitpart(s + i, &o);
        if (e == 0) return -1;
        i += e;
    }
    if (i != len) return -1;
    *o = '\0';
    *out = strtod(buf, NULL); /* correctly rounded, as Python's float() */
    return 0;
}

/* ---- get_blend_from_list --------------------------------------------------------------------- */

static char *strip_dup(const char *s)
{
    while (isspace((unsigned char)*s)) s++;
    size_t len = strlen(s);
    while (len && isspace((unsigned char)s[len - 1])) len--;
    char *r = malloc(len + 1);
    if (r) {
        memcpy(r, s, len);
        r[len] = '\0';
    }
    return r;
}

void mc_blend_free(mc_blend_t *b)
{
    if (!b) return;
    for (int i = 0; i < b->n; i++) free(b->prefixes[i]);
    free(b->prefixes);
    free(b->weights);
    memset(b, 0, sizeof *b);
}

int mc_blend_from_list(mc_blend_t *b, char *const *list, int n, char *err, size_t en)
{
    memset(b, 0, sizeof *b);
    if (n <= 0) return mc_errf(err, en, "empty data path list");
    bool weighted = n % 2 == 0;
    double *w = NULL;
    if (weighted) {
        w = malloc(sizeof *w * (size_t)(n / 2));
        if (!w) return mc_errf(err, en, "out of memory");
        /* Megatron: `is_none = map(...); if any(is_none): assert all(is_none)` on one iterator,
         * so after the first non-float every later weight must be a non-float too. */
        int first_bad = -1;
        for (int i = 0; i < n / 2; i++) {
            bool ok = mc_parse_py_float(list[2 * i], &w[i]) == 0;
            if (!ok && first_bad < 0) first_bad = i;
            if (ok && first_bad >= 0) {
                free(w);
                return mc_errf(err, en,
                               "data path list mixes weights and prefixes: '%s' is not a weight "
                               "but '%s' is (give 'w1 p1 w2 p2 ...' or only prefixes)",
                               list[2 * first_bad], list[2 * i]);
            }
        }
        if (first_bad >= 0) {
            free(w);
            w = NULL;
            weighted = false;
        }
    }
    int k = weighted ? n / 2 : n;
    b->prefixes = calloc((size_t)k, sizeof *b->prefixes);
    if (!b->prefixes) {
        free(w);
        return mc_errf(err, en, "out of memory");
    }
    b->n = k;
    b->weights = w;
    for (int i = 0; i < k; i++) {
        b->prefixes[i] = strip_dup(weighted ? list[2 * i + 1] : list[i]);
        if (!b->prefixes[i]) {
            mc_blend_free(b);
            return mc_errf(err, en, "out of memory");
        }
    }
    return 0;
}

/* ---- numpy sum and normalize ----------------------------------------------------------------- */

/* numpy's pairwise_sum (loops_utils.h): 8 accumulators per block of up to 128, halves above. */
static double pairwise_sum(const double *a, int64_t n)
{
    if (n < 8) {
        double r = 0.0;
        for (int64_t i = 0; i < n; i++) r += a[i];
        return r;
    }
    if (n <= 128) {
        double r[8];
        for (int j = 0; j < 8; j++) r[j] = a[j];
        int64_t i;
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

double mc_numpy_sum(const double *a, int64_t n) { return pairwise_sum(a, n); }

void mc_normalize(const double *w, int n, double *out)
{
    double s = mc_numpy_sum(w, n);
    for (int i = 0; i < n; i++) out[i] = w[i] / s;
}

/* ---- split ----------------------------------------------------------------------------------- */

int mc_split_matrix(const char *split, double bookends[3][2], int present[3], char *err, size_t en)
{
    double v[3] = {0.0, 0.0, 0.0};
    int k = 0;
    /* re.findall(r"[.0-9]+", split), then float() of each. */
    for (const char *p = split; *p;) {
        if (!(isdigit((unsigned char)*p) || *p == '.')) {
            p++;
            continue;
        }
        const char *q = p;
        while (isdigit((unsigned char)*q) || *q == '.') q++;
        char tok[64];
        size_t len = (size_t)(q - p);
        if (len >= sizeof tok) return mc_errf(err, en, "--split '%s': number too long", split);
        memcpy(tok, p, len);
        tok[len] = '\0';
        double x;
        if (mc_parse_py_float(tok, &x) != 0)
            return mc_errf(err, en, "--split '%s': '%s' is not a number", split, tok);
        if (k == 3)
            return mc_errf(err, en, "--split '%s': more than 3 weights (give train,valid,test)",
                           split);
        v[k++] = x;
        p = q;
    }
    double s = mc_numpy_sum(v, 3);
    if (!(s > 0.0) || isinf(s))
        return mc_errf(err, en, "--split '%s': the weights must have a positive sum", split);
    for (int i = 0; i < 3; i++) v[i] /= s;
    double e[4];
    e[0] = 0.0;
    for (int i = 0; i < 3; i++) e[i + 1] = e[i] + v[i]; /* Python's reduce, left to right */
    for (int i = 0; i < 3; i++) {
        present[i] = !(e[i + 1] <= e[i]);
        bookends[i][0] = e[i];
        bookends[i][1] = e[i + 1];
    }
    return 0;
}

void mc_split_range(const double bookend[2], int64_t num_elements, int64_t *begin, int64_t *end)
{
    /* int(round(x)): round half to even, which rint does in the default rounding mode. */
    *begin = (int64_t)rint(bookend[0] * (double)num_elements);
    *end = (int64_t)rint(bookend[1] * (double)num_elements);
}

int64_t mc_size_for_dataset(double normalized_weight, int64_t target, double surplus)
{
    double v = ceil(ceil((double)target * normalized_weight) * (1.0 + surplus));
    /* the comparison is false for NaN; converting a double outside int64 is undefined */
    if (!(v >= 0.0 && v < 0x1p62)) return -1;
    return (int64_t)v;
}

int mc_blend_check_weights(const mc_blend_t *b, const char *flag, char *err, size_t en)
{
    if (!b->weights) return 0;
    char shown[MC_SHOWN_MAX + 4];
    for (int i = 0; i < b->n; i++)
        if (!(b->weights[i] > 0.0) || isinf(b->weights[i]))
            return mc_errf(err, en,
                           "%s: the weight %g of '%s' is not a positive finite number "
                           "(Megatron's BlendedDataset needs every weight > 0; give e.g. "
                           "'0.3 a 0.7 b', or leave weights out to blend by size)",
                           flag, b->weights[i], mc_shown(b->prefixes[i], shown));
    if (isinf(mc_numpy_sum(b->weights, b->n)))
        return mc_errf(err, en,
                       "%s: the weights sum to infinity (give smaller weights: only "
                       "their ratios matter)",
                       flag);
    return 0;
}

/* ---- blending indices ------------------------------------------------------------------------ */

int mc_build_blending_indices(int16_t *dataset_index, int64_t *dataset_sample_index,
                              const double *weights, int n, int64_t size)
{
    int64_t *cur = calloc((size_t)n, sizeof *cur);
    if (!cur) return -1;
    for (int64_t i = 0; i < size; i++) {
        double x = (double)i > 1.0 ? (double)i : 1.0;
        int best = 0;
        double err_best = weights[0] * x - (double)cur[0];
        for (int d = 1; d < n; d++) {
            double e = weights[d] * x - (double)cur[d];
            if (e > err_best) {
                err_best = e;
                best = d;
            }
        }
        dataset_index[i] = (int16_t)best;
        dataset_sample_index[i] = cur[best]++;
    }
    free(cur);
    return 0;
}

int mc_build_exhaustive_blending_indices(int16_t *dataset_index, int64_t *dataset_sample_index,
                                         const int64_t *sizes, int n)
{
    int64_t total = 0;
    for (int d = 0; d < n; d++) total += sizes[d];
    int64_t *count = calloc((size_t)n, sizeof *count);
    double *w = malloc(sizeof *w * (size_t)n);
    char *spent = calloc((size_t)n, 1);
    if (!count || !w || !spent) {
        free(count);
        free(w);
        free(spent);
        return -1;
    }
    for (int d = 0; d < n; d++) w[d] = (double)sizes[d] / (double)total;
    for (int64_t i = 0; i < total; i++) {
        double x = (double)i > 1.0 ? (double)i : 1.0;
        int best = -1;
        double err_best = -DBL_MAX /* numeric_limits<double>::lowest() */;
        for (int d = 0; d < n; d++) { /* std::set iterates in ascending order */
            if (spent[d]) continue;
            double e = w[d] * x - (double)count[d];
            if (e > err_best) {
                err_best = e;
                best = d;
            }
        }
        dataset_index[i] = (int16_t)best;
        dataset_sample_index[i] = count[best]++;
        if ((double)sizes[best] - (double)count[best] == 0) spent[best] = 1;
    }
    free(count);
    free(w);
    free(spent);
    return 0;
}
