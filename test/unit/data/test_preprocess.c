/* preprocess-data pieces that need no files: Python's float repr (the progress line), and the
 * flag table's abbreviation and typo rules. The pipeline itself is tested end to end in
 * test/integration/test_preprocess.sh. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/py_float.h"
#include "cli/preprocess_args.h"
#include "data/json_scan.h"

static void check_repr(double v, const char *want)
{
    char buf[64];
    mc_py_float_repr(v, buf, sizeof(buf));
    assert_string_equal(buf, want);
}

/* Expected strings are Python 3's repr() of the same doubles. */
static void test_float_repr(void **state)
{
    (void)state;
    check_repr(0.1, "0.1");
    check_repr(12345.0, "12345.0");
    check_repr(100.0, "100.0");
    check_repr(1e16, "1e+16");
    check_repr(1.5e-5, "1.5e-05");
    check_repr(123456789.123, "123456789.123");
    check_repr(2.5, "2.5");
    check_repr(1.0 / 3.0, "0.3333333333333333");
    check_repr(1e-4, "0.0001");
    check_repr(0.00012, "0.00012");
    check_repr(1234567890123456.0, "1234567890123456.0");
    check_repr(12345678901234567.0, "1.2345678901234568e+16");
    check_repr(5e-324, "5e-324");
    check_repr(1.7976931348623157e308, "1.7976931348623157e+308");
    check_repr(-2.25, "-2.25");
    check_repr(0.0, "0.0");
}

static void test_abbreviations(void **state)
{
    (void)state;
    bool amb;
    assert_string_equal(mc_preprocess_flag_resolve("--workers", &amb), "--workers");
    assert_false(amb);
    /* --workers is exact although --workers-to-check starts with it too */
    assert_string_equal(mc_preprocess_flag_resolve("--output", &amb), "--output-prefix");
    assert_string_equal(mc_preprocess_flag_resolve("--merge", &amb), "--merge-file");
    assert_string_equal(mc_preprocess_flag_resolve("-h", &amb), "--help");
    assert_null(mc_preprocess_flag_resolve("--vocab", &amb));
    assert_true(amb);
    assert_null(mc_preprocess_flag_resolve("--bogus", &amb));
    assert_false(amb);
    assert_null(mc_preprocess_flag_resolve("--", &amb));
}

static void test_suggest(void **state)
{
    (void)state;
    assert_string_equal(mc_preprocess_flag_suggest("--output-prefx"), "--output-prefix");
    assert_string_equal(mc_preprocess_flag_suggest("--append_eod"), "--append-eod");
    assert_string_equal(mc_preprocess_flag_suggest("--json-key"), "--json-keys");
    assert_null(mc_preprocess_flag_suggest("--num-layers"));
}

static void test_parse(void **state)
{
    (void)state;
    char *argv[] = {"--input", "in.jsonl", "--json-keys", "text", "title", "text",
                    "--output=out", "--workers", "4", "--partitions=2",
                    "--tokenizer-type", "NullTokenizer", "--vocab-size", "100", "--append-eod",
                    "--max-documents", "10", "--skip-malformed", "--log-interval", "5"};
    mc_preprocess_args_t a;
    mc_preprocess_args_parse(&a, (int)(sizeof(argv) / sizeof(argv[0])), argv);
    assert_string_equal(a.input, "in.jsonl");
    assert_int_equal(a.n_json_keys, 2);
    assert_string_equal(a.json_keys[0], "text");
    assert_string_equal(a.json_keys[1], "title");
    assert_string_equal(a.output_prefix, "out");
    assert_int_equal(a.workers, 4);
    assert_int_equal(a.partitions, 2);
    assert_int_equal(a.vocab_size, 100);
    assert_int_equal(a.max_documents, 10);
    assert_int_equal(a.log_interval, 5);
    assert_true(a.append_eod);
    assert_true(a.skip_malformed);
    assert_false(a.keep_sequential_samples);
    assert_string_equal(a.lang, "english");
    mc_preprocess_args_free(&a);

    char *argv2[] = {"--input", "x", "--output-prefix", "o", "--workers", "1",
                     "--tokenizer-type", "NullTokenizer", "--vocab-size", "7"};
    mc_preprocess_args_parse(&a, (int)(sizeof(argv2) / sizeof(argv2[0])), argv2);
    assert_int_equal(a.n_json_keys, 1);
    assert_string_equal(a.json_keys[0], "text");
    assert_int_equal(a.max_documents, -1);
    assert_int_equal(a.log_interval, 1000);
    assert_int_equal(a.partitions, 1);
    mc_preprocess_args_free(&a);
}

/* ---- the fast line scanner against jansson ---- */

/* jansson's verdict and the string under "text" (NULL if not an object with a string there). */
static int jansson_text(const char *line, size_t n, char **out, size_t *len)
{
    json_error_t e;
    json_t *r = json_loadb(line, n, JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &e);
    if (!r) return 0;
    *out = NULL;
    json_t *v = json_is_object(r) ? json_object_get(r, "text") : NULL;
    if (v && json_is_string(v)) {
        *len = json_string_length(v);
        *out = malloc(*len + 1);
        memcpy(*out, json_string_value(v), *len);
    }
    json_decref(r);
    return 1;
}

/* Python's json.loads accepts these, jansson does not; the scanner sides with Python. */
static bool python_only(const char *line, size_t n)
{
    static const char *const words[] = {"NaN", "Infinity", "e999", "E999", "e+999", NULL};
    for (int w = 0; words[w]; w++) {
        size_t k = strlen(words[w]);
        for (size_t i = 0; i + k <= n; i++)
            if (memcmp(line + i, words[w], k) == 0) return true;
    }
    return false;
}

/* Every line the scanner accepts is accepted by jansson (bar Python-only forms) with the same
 * string; every line jansson accepts as an object is accepted by the scanner unless it has an
 * escaped key. */
static void check_scan(const char *line, size_t n)
{
    char *buf = malloc(n + 1), *jt = NULL;
    size_t len = 0, jlen = 0;
    int kind = -1;
    int fast = mc_json_line_scan(line, n, "text", &kind, buf, &len);
    int slow = jansson_text(line, n, &jt, &jlen);
    bool escaped_key = memchr(line, '\\', n) != NULL;
    if (fast && !python_only(line, n)) {
        if (!slow) fprintf(stderr, "scanner accepts, jansson refuses: %.*s\n", (int)n, line);
        assert_true(slow);
        assert_int_equal(kind == 's', jt != NULL);
        if (jt) {
            assert_int_equal(len, jlen);
            assert_memory_equal(buf, jt, len);
        }
    }
    if (slow && !fast && !escaped_key) {
        json_error_t e;
        json_t *r = json_loadb(line, n, JSON_ALLOW_NUL, &e);
        bool object = r && json_is_object(r);
        json_decref(r);
        if (object) fprintf(stderr, "jansson accepts, scanner refuses: %.*s\n", (int)n, line);
        assert_false(object);
    }
    free(buf);
    free(jt);
}

static void test_scan_cases(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "{\"text\": \"hello\"}", " {\"text\":\"a\"} \r", "{}", "{\"text\": 1}",
        "{\"text\": [\"a\", \"b\"]}", "{\"text\": []}", "{\"text\": \"\"}",
        "{\"a\": {\"text\": \"inner\"}, \"text\": \"outer\"}",
        "{\"text\": \"first\", \"text\": \"last\"}",
        "{\"text\": \"esc \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\u0000 \\ud83d\\ude00\"}",
        "{\"text\": \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}",
        "{\"text\": \"\\ud800\"}", "{\"text\": \"\\udc00\"}", "{\"text\": \"\\ud800\\u0041\"}",
        "{\"text\": \"\\x\"}", "{\"text\": \"\\u12\"}", "{\"text\": \"a\tb\"}",
        "{\"text\": \"\xc0\xaf\"}", "{\"text\": \"\xed\xa0\x80\"}", "{\"text\": \"\xf4\x90\x80\x80\"}",
        "{\"text\": \"\xe0\x80\xaf\"}", "{\"text\": \"\xff\"}", "{\"text\": \"\xc3\"}",
        "{\"text\": \"a\"", "{\"text\" \"a\"}", "{\"text\": \"a\",}", "{,}", "[1, 2]", "\"text\"",
        "{\"n\": -0.5e+10, \"m\": 0, \"k\": -0, \"text\": \"x\"}", "{\"n\": 01, \"text\": \"x\"}",
        "{\"n\": 1., \"text\": \"x\"}", "{\"n\": .5, \"text\": \"x\"}", "{\"n\": 1e, \"text\": \"x\"}",
        "{\"n\": -, \"text\": \"x\"}", "{\"n\": +1, \"text\": \"x\"}", "{\"n\": [1, [2, {}]], \"text\": \"x\"}",
        "{\"n\": [1,], \"text\": \"x\"}", "{\"n\": tru, \"text\": \"x\"}", "{\"n\": true, \"o\": null, \"f\": false, \"text\": \"x\"}",
        "{\"n\": NaN, \"text\": \"x\"}", "{\"n\": -Infinity, \"text\": \"x\"}", "{\"n\": 1e999, \"text\": \"x\"}",
        "{\"te\\u0078t\": \"escaped key\"}", "{\"text\": \"x\"} {}", "{\"text\": \"x\"}x", "", "   ", "{", "}",
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) check_scan(cases[i], strlen(cases[i]));

    /* Specific answers. */
    char buf[64];
    size_t len;
    int kind;
    const char *l1 = "{\"text\": \"a\\u00e9\\ud83d\\ude00\\n\"}";
    assert_int_equal(mc_json_line_scan(l1, strlen(l1), "text", &kind, buf, &len), 1);
    assert_int_equal(kind, 's');
    assert_int_equal(len, 1 + 2 + 4 + 1);
    assert_memory_equal(buf, "a\xc3\xa9\xf0\x9f\x98\x80\n", len);
    const char *l2 = "{\"x\": 1, \"text\": [\"a\"]}";
    assert_int_equal(mc_json_line_scan(l2, strlen(l2), "text", &kind, buf, &len), 1);
    assert_int_equal(kind, '[');
    const char *l3 = "{\"x\": 1}";
    assert_int_equal(mc_json_line_scan(l3, strlen(l3), "text", &kind, buf, &len), 1);
    assert_int_equal(kind, 0);
    const char *l4 = "{\"text\": NaN}"; /* json.loads accepts it */
    assert_int_equal(mc_json_line_scan(l4, strlen(l4), "text", &kind, buf, &len), 1);
    assert_int_equal(kind, 'o');
    const char *l5 = "{\"text\": \"\\ud800\"}";
    assert_int_equal(mc_json_line_scan(l5, strlen(l5), "text", &kind, buf, &len), 0);
}

/* Random single-byte edits of valid lines: the scanner never disagrees with jansson. */
static void test_scan_fuzz(void **state)
{
    (void)state;
    static const char *const seeds[] = {
        "{\"text\": \"Hello, world! caf\xc3\xa9 \\u00e9\\n\", \"id\": 12, \"m\": [1.5e3, true, null]}",
        "{\"meta\": {\"a\": [1, {\"b\": \"c\"}]}, \"text\": [\"one\", \"two\\t\"]}",
        "{\"text\": \"\xf0\x9f\x98\x80\\ud83d\\ude00 \\\"q\\\" \\/\"}",
    };
    static const char alphabet[] = "{}[]\",:\\ \t\r0123456789-+.eEtrufalsnNIu\x80\xc3\xa9\xed\xf0\x01\x7f";
    uint64_t x = 0x9E3779B97F4A7C15ull;
    char line[256];
    for (int it = 0; it < 200000; it++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const char *seed = seeds[x % 3];
        size_t n = strlen(seed);
        memcpy(line, seed, n);
        int edits = 1 + (int)(x >> 8) % 3;
        for (int e = 0; e < edits; e++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t pos = (size_t)(x >> 16) % n;
            char ch = alphabet[(x >> 40) % (sizeof(alphabet) - 1)];
            switch ((x >> 56) % 3) {
            case 0: line[pos] = ch; break;                                /* replace */
            case 1: memmove(line + pos, line + pos + 1, n - pos - 1); n--; break; /* delete */
            default:                                                      /* insert */
                if (n + 1 < sizeof(line)) {
                    memmove(line + pos + 1, line + pos, n - pos);
                    line[pos] = ch;
                    n++;
                }
            }
        }
        check_scan(line, n);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_repr),
        cmocka_unit_test(test_abbreviations),
        cmocka_unit_test(test_suggest),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_scan_cases),
        cmocka_unit_test(test_scan_fuzz),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
