/* Context parallelism's comm types and chunks (config/cp_layout.h). */
#include "config/cp_layout.h"

#include <string.h>

static const char *const NAMES[] = {"p2p", "a2a", "all_gather", "a2a+p2p"};

int mc_cp_comm_parse(const char *s)
{
    if (strcmp(s, "allgather") == 0) return MC_CP_ALLGATHER;
    for (int t = 0; t < 4; t++)
        if (strcmp(s, NAMES[t]) == 0) return t;
    return -1;
}

const char *mc_cp_comm_name(mc_cp_comm_t t) { return NAMES[t]; }

/* One [S_full] row's chunks r and 2cp-1-r to its front, elements of `size` bytes: the writes
 * never pass the reads (each element moves towards the front). */
static void select_row(char *row, size_t size, int S_full, int cp, int r)
{
    const size_t C = (size_t)(S_full / (2 * cp)) * size;
    memmove(row, row + (size_t)r * C, C);
    memmove(row + C, row + (size_t)(2 * cp - 1 - r) * C, C);
}

static void select_rows(void *x, size_t size, int b, int S_full, int cp, int r)
{
    if (!x) return;
    char *p = x;
    const size_t S_loc = (size_t)(S_full / cp);
    for (int i = 0; i < b; i++) {
        select_row(p + (size_t)i * S_full * size, size, S_full, cp, r);
        if (i > 0) memmove(p + i * S_loc * size, p + (size_t)i * S_full * size, S_loc * size);
    }
}

void mc_cp_batch_on_this_rank(int32_t *tokens, int32_t *labels, float *loss_mask,
                              int32_t *positions, int b, int S_full, int cp, int r)
{
    if (cp <= 1) return;
    select_rows(tokens, sizeof(int32_t), b, S_full, cp, r);
    select_rows(labels, sizeof(int32_t), b, S_full, cp, r);
    select_rows(loss_mask, sizeof(float), b, S_full, cp, r);
    select_rows(positions, sizeof(int32_t), b, S_full, cp, r);
}
