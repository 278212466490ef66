/* Sharing small values through the runtime (comm/exchange.h). */
#include "comm/exchange.h"

#include <string.h>

#include "base/error.h"

static int fence(mc_runtime_t *rt, const char *key, double timeout_s, char *err, size_t n)
{
    if (mc_runtime_commit(rt) != 0) return mc_errf(err, n, "PMIx_Commit of '%s' failed", key);
    if (mc_runtime_fence(rt, timeout_s) != 0)
        return mc_errf(
            err, n,
            "PMIx_Fence exchanging '%s' failed (a rank did not arrive within %g s, or the "
            "launcher's PMIx server failed)",
            key, timeout_s);
    return 0;
}

static int get_exact(mc_runtime_t *rt, int from, const char *key, void *out, size_t len, char *err,
                     size_t n)
{
    long got = mc_runtime_get(rt, from, key, out, len);
    if (got != (long)len)
        return mc_errf(err, n, "PMIx_Get of rank %d's '%s' %s", from, key,
                       got < 0 ? "failed" : "has the wrong length");
    return 0;
}

int mc_exchange_from(mc_runtime_t *rt, const char *key, bool publish, const void *mine, int from,
                     void *out, size_t len, double timeout_s, char *err, size_t n)
{
    if (publish && mc_runtime_put(rt, key, mine, len) != 0)
        return mc_errf(err, n, "PMIx_Put of '%s' failed", key);
    if (fence(rt, key, timeout_s, err, n) != 0) return -1;
    return from >= 0 ? get_exact(rt, from, key, out, len, err, n) : 0;
}

int mc_exchange_all(mc_runtime_t *rt, const char *key, const void *mine, void *all, size_t len,
                    double timeout_s, char *err, size_t n)
{
    if (mc_runtime_put(rt, key, mine, len) != 0)
        return mc_errf(err, n, "PMIx_Put of '%s' failed", key);
    if (fence(rt, key, timeout_s, err, n) != 0) return -1;
    for (int r = 0; r < rt->size; r++)
        if (get_exact(rt, r, key, (char *)all + (size_t)r * len, len, err, n) != 0) return -1;
    return 0;
}

void mc_exchange_first_duplicate(const void *all, int n, size_t len, int *a, int *b)
{
    const char *p = all;
    for (int j = 1; j < n; j++)
        for (int i = 0; i < j; i++)
            if (memcmp(p + (size_t)i * len, p + (size_t)j * len, len) == 0) {
                *a = i, *b = j;
                return;
            }
    *a = *b = -1;
}
