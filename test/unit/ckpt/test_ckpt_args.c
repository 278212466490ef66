/* A checkpoint's args (ckpt/args.c) hold --attention-backend as Megatron's files do: the member
 * of megatron.core.transformer.enums.AttnBackend (flash 1, fused 2, unfused 3, local 4, auto 5),
 * pickled as Python pickles an Enum member (AttnBackend(3)); every choice round-trips through
 * megatron-c's own pickle, and the bytes Python writes for a member load as that member. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/args.h"
#include "config/args.h"
#include "torchfmt/pickle.h"

static const char *const NAMES[] = {"flash", "fused", "unfused", "local", "auto"};

/* ns pickled by megatron-c and read back. */
static mc_pyobj_t *through_pickle(const mc_pyobj_t *ns)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    char err[256];
    mc_pickle_storages_t st = {0};
    assert_int_equal(mc_pickle_dump(ns, &buf, &len, &st, err, sizeof(err)), 0);
    mc_pickle_storages_free(&st);
    mc_pyobj_t *back = NULL;
    assert_int_equal(mc_unpickle(buf, len, NULL, &back, err, sizeof(err)), 0);
    free(buf);
    return back;
}

static void test_roundtrip(void **state)
{
    (void)state;
    for (int k = 0; k < 5; k++) {
        mc_args_t a, b;
        mc_args_defaults(&a);
        strcpy(a.attention_backend, NAMES[k]);
        mc_pyobj_t *ns = mc_ckpt_args_namespace(&a, 0, 0);
        assert_non_null(ns);
        /* Megatron's member: AttnBackend(value) */
        const mc_pyobj_t *v = mc_py_attr(ns, "attention_backend");
        assert_non_null(v);
        assert_int_equal(v->kind, MC_PY_OBJECT);
        assert_true(
            mc_py_is_a(v->object.callable, "megatron.core.transformer.enums", "AttnBackend"));
        int64_t value = 0;
        assert_int_equal(mc_py_get_int(mc_py_item(v->object.args, 0), &value), 0);
        assert_int_equal(value, k + 1);
        mc_pyobj_t *back = through_pickle(ns);
        char err[256];
        mc_args_defaults(&b);
        strcpy(b.attention_backend, "local");
        assert_int_equal(mc_ckpt_args_from_namespace(back, &b, err, sizeof(err)), 0);
        assert_string_equal(b.attention_backend, NAMES[k]);
        mc_py_decref(back);
        mc_py_decref(ns);
        mc_args_free(&a);
        mc_args_free(&b);
    }
}

/* args.attention_backend from bytes Python wrote, in a Namespace megatron-c made. */
static void load_member(const void *bytes, size_t len, const char *want)
{
    char err[256];
    mc_pyobj_t *member = NULL;
    assert_int_equal(mc_unpickle(bytes, len, NULL, &member, err, sizeof(err)), 0);
    mc_args_t a, b;
    mc_args_defaults(&a);
    mc_pyobj_t *ns = mc_ckpt_args_namespace(&a, 0, 0);
    assert_int_equal(mc_py_attr_set(ns, "attention_backend", member), 0);
    mc_args_defaults(&b);
    int rc = mc_ckpt_args_from_namespace(ns, &b, err, sizeof(err));
    if (want) {
        assert_int_equal(rc, 0);
        assert_string_equal(b.attention_backend, want);
    } else {
        assert_int_equal(rc, -1);
        assert_non_null(strstr(err, "attention_backend"));
    }
    mc_py_decref(ns);
    mc_args_free(&a);
    mc_args_free(&b);
}

static void test_python_pickles(void **state)
{
    (void)state;
    /* Python 3.11's pickle.dumps(AttnBackend.unfused, protocol=2) (torch.save's protocol) */
    static const char unfused[] = "\x80\x02"
                                  "cmegatron.core.transformer.enums\nAttnBackend\n"
                                  "q\x00K\x03\x85q\x01Rq\x02.";
    load_member(unfused, sizeof(unfused) - 1, "unfused");
    /* the same at protocol 4 */
    static const char unfused4[] = "\x80\x04\x95\x39\x00\x00\x00\x00\x00\x00\x00\x8c\x1f"
                                   "megatron.core.transformer.enums\x94\x8c\x0b"
                                   "AttnBackend\x94\x93\x94K\x03\x85\x94R\x94.";
    load_member(unfused4, sizeof(unfused4) - 1, "unfused");
    /* a member reduced by name, getattr(AttnBackend, "local") (Enum's other __reduce_ex__) */
    static const char local[] = "\x80\x02"
                                "c__builtin__\ngetattr\nq\x00"
                                "cmegatron.core.transformer.enums\nAttnBackend\nq\x01"
                                "X\x05\x00\x00\x00localq\x02\x86q\x03Rq\x04.";
    load_member(local, sizeof(local) - 1, "local");
    /* AttnBackend(5) is auto; AttnBackend(9) is no member: an error naming the argument */
    static const char autob[] = "\x80\x02"
                                "cmegatron.core.transformer.enums\nAttnBackend\n"
                                "q\x00K\x05\x85q\x01Rq\x02.";
    load_member(autob, sizeof(autob) - 1, "auto");
    static const char bad[] = "\x80\x02"
                              "cmegatron.core.transformer.enums\nAttnBackend\n"
                              "q\x00K\x09\x85q\x01Rq\x02.";
    load_member(bad, sizeof(bad) - 1, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_python_pickles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
