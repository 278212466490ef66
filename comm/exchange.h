/* Small values shared among ranks through the runtime's key-value store (PMIx put, commit,
 * fence, get), without MPI: the NCCL communicator's unique ids, GPU identities and pid
 * namespaces. Each call is collective over the world (a fence inside): every rank calls the same
 * functions in the same order with the same keys; a key is used once. */
#ifndef MC_DIST_EXCHANGE_H
#define MC_DIST_EXCHANGE_H

#include <stdbool.h>
#include <stddef.h>

#include "comm/runtime.h"

/* Ranks publishing (publish true) put `mine` under key; after the fence a rank with from >= 0
 * reads world rank `from`'s value into out (exactly len bytes). One group's root publishes its
 * unique id and the members read it; ranks in no group pass from = -1. Returns 0, or -1 with one
 * line in err. */
int mc_exchange_from(mc_runtime_t *rt, const char *key, bool publish, const void *mine, int from,
                     void *out, size_t len, double timeout_s, char *err, size_t n);

/* Every rank puts `mine` (len bytes); afterwards all[r * len ...] holds rank r's. */
int mc_exchange_all(mc_runtime_t *rt, const char *key, const void *mine, void *all, size_t len,
                    double timeout_s, char *err, size_t n);

/* The first pair of equal entries among n entries of len bytes (a < b), or -1 in *a. Ranks that
 * share a GPU give equal "host/PCI bus id" entries. */
void mc_exchange_first_duplicate(const void *all, int n, size_t len, int *a, int *b);

#endif
