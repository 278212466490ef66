/* SHA-256 (data/sha256.c) against FIPS 180-4's examples (NIST CSVP "SHA256ShortMsg" /
 * "SHA256LongMsg" and the FIPS 180-2 appendix vectors), padding boundaries (message lengths
 * around 55/56/64 bytes mod 64, digests from Python's hashlib), and streaming in pieces. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "data/sha256.h"

static void hex_of(const char *msg, size_t len, char out[65]) { mc_sha256_hex(msg, len, out); }

static void test_fips_vectors(void **state)
{
    (void)state;
    static const struct { const char *msg, *want; } cases[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnop"
         "qrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
        {"The quick brown fox jumps over the lazy dog",
         "d7a8fbb307d7809469ca9abcb0082e4f8d5651e46d3cdb762d02d0bf37c9e592"},
    };
    char hex[65];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hex_of(cases[i].msg, strlen(cases[i].msg), hex);
        assert_string_equal(hex, cases[i].want);
    }
}

/* One million 'a' (FIPS 180-2 appendix B.3), fed in uneven pieces. */
static void test_million_a(void **state)
{
    (void)state;
    char *a = malloc(1000000);
    assert_non_null(a);
    memset(a, 'a', 1000000);
    char hex[65];
    mc_sha256_hex(a, 1000000, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");

    mc_sha256_t c;
    uint8_t d[32], one[32];
    mc_sha256_init(&c);
    size_t off = 0, step = 1;
    while (off < 1000000) {
        size_t take = step < 1000000 - off ? step : 1000000 - off;
        mc_sha256_update(&c, a + off, take);
        off += take;
        step = step * 3 % 257 + 1; /* 1..257: crosses block edges at every phase */
    }
    mc_sha256_final(&c, d);
    mc_sha256_init(&c);
    mc_sha256_update(&c, a, 1000000);
    mc_sha256_final(&c, one);
    assert_memory_equal(d, one, 32);
    free(a);
}

/* Lengths where the padding needs one or two extra blocks; bytes (7i + 3) mod 256, digests from
 * hashlib.sha256. Each also streamed one byte at a time. */
static void test_padding_boundaries(void **state)
{
    (void)state;
    static const struct { size_t n; const char *want; } cases[] = {
        {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
        {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
        {57, "35df609437dcfea3279283ab79fd554e2bf78f8f7ae2de532d8ee300b09e8f73"},
        {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
        {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
        {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
        {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
        {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
        {127, "a8d23e75d936f303d248888d9b165ee543f4cbafcad3c9dd2a79bd84faa11d07"},
        {128, "d2742f1f4ac6bb7ca2b239ee18402ba8b3f9f8e652d2a72973c2b9ba11c08cf6"},
        {129, "307f8fc2c1622b92762e818d39a185d4d667ad49a4b07ceae1f4afa008a93ec4"},
    };
    uint8_t buf[129];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(i * 7 + 3);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char hex[65];
        mc_sha256_hex(buf, cases[k].n, hex);
        assert_string_equal(hex, cases[k].want);

        mc_sha256_t c;
        uint8_t d[32];
        mc_sha256_init(&c);
        for (size_t i = 0; i < cases[k].n; i++) mc_sha256_update(&c, buf + i, 1);
        mc_sha256_update(&c, buf, 0);
        mc_sha256_final(&c, d);
        static const char digits[] = "0123456789abcdef";
        for (int i = 0; i < 32; i++) hex[2 * i] = digits[d[i] >> 4], hex[2 * i + 1] = digits[d[i] & 15];
        hex[64] = '\0';
        assert_string_equal(hex, cases[k].want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fips_vectors),
        cmocka_unit_test(test_million_a),
        cmocka_unit_test(test_padding_boundaries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
