/* A training rank's start-up: backend, memory check, communicator (train/setup.h). */
#include "train/setup.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "comm/devmem.h"
#include "comm/runtime.h"
#include "kernels/attention_choice.h"
#include "kernels/device.h"

const mc_backend_t *mc_setup_backend(const mc_args_t *args, char *why, size_t n)
{
    const mc_runtime_t *rt = mc_runtime();
    const mc_backend_t *be =
        mc_backend_select(args->device, args->cpu_threads, rt ? rt->local_rank : 0, why, n);
    mc_attention_spec_t attention; /* before the memory plan: the choice sizes its scratch */
    mc_attention_spec_from_args(args, &attention);
    mc_backend_attention_setup(be, &attention, NULL, 0);
    return be;
}

/* Where the plan's memory comes from: the ranks sharing it and its name. */
static int memory_sharing(const mc_backend_t *be, char *where, size_t n)
{
    const mc_runtime_t *rt = mc_runtime();
    const int local_rank = rt ? rt->local_rank : 0, local_size = rt ? rt->local_size : 1;
    if (be->gpu >= 0) {
        snprintf(where, n, "GPU %d", be->gpu);
        return mc_ranks_per_gpu(local_rank, local_size, mc_cuda_device_count());
    }
    snprintf(where, n, "this node");
    return local_size;
}

static void fmt_bytes(char *buf, size_t n, double bytes)
{
    if (bytes >= 1024.0 * 1024 * 1024) snprintf(buf, n, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
    else snprintf(buf, n, "%.2f MiB", bytes / (1024.0 * 1024));
}

void mc_setup_check_memory(const mc_args_t *args, const mc_memory_plan_t *plan,
                           const mc_backend_t *be)
{
    const mc_memory_plan_t p = *plan;
    const bool host = !be->device_memory;
    char where[64];
    const int sharing = memory_sharing(be, where, sizeof(where));
    /* the asynchronous checkpoint snapshot is host memory: a host backend's, not a GPU's */
    double need =
        (p.params + p.grads + p.optimizer + p.activations + p.workspace + (host ? p.snapshot : 0)) *
        sharing;
    double free_bytes = 0, total = 0;
    if (mc_backend_memory(be, &free_bytes, &total) != 0) return;
    double have = host ? total : free_bytes;
    if (have > 0 && need > have) {
        mc_memory_plan_print(stdout, args, plan, be->name);
        char nb[32], hb[32];
        fmt_bytes(nb, sizeof(nb), need);
        fmt_bytes(hb, sizeof(hb), have);
        /* GPUs differ per rank: whichever rank meets this reports it and ends the job */
        if (!host) mc_error_set_rank_local(true);
        mc_user_error("the memory plan needs %s for the %d rank(s) on %s but it has %s%s "
                      "(reduce --micro-batch-size, --seq-length, --num-layers or --hidden-size, "
                      "use --use-distributed-optimizer%s)",
                      nb, sharing, where, hb, host ? "" : " free",
                      host && p.snapshot > 0 ? ", or save without --async-save" : "");
    }
}

mc_comm_t *mc_setup_comm(const mc_args_t *args, const mc_backend_t *be)
{
    mc_runtime_t *rt = mc_runtime();
    mc_comm_t *comm = mc_comm_single();
    const double timeout_s = 60.0 * args->distributed_timeout_minutes;
    if (rt && rt->size > 1) {
        char err[512];
        if (be->has_nccl && strcmp(args->distributed_backend, "nccl") == 0) {
            comm =
                mc_comm_nccl(rt, be, timeout_s, err, sizeof(err)); /* its exchanges are bounded */
        } else {
            /* every rank arrives within the timeout before MPI_Init, whose exchange has no bound */
            if (mc_runtime_fence(rt, timeout_s) != 0)
                mc_fatal("timed out after %g s waiting for every rank to reach the "
                         "communicator's set-up (a rank is stopped, hung or slow while it opens "
                         "its data or builds its model; raise --distributed-timeout-minutes if "
                         "this is expected)",
                         timeout_s);
            comm = mc_comm_mpi(rt, err, sizeof(err));
        }
        if (!comm) mc_fatal("%s", err);
    }
    comm->timeout_s = timeout_s;
    comm->heartbeat_s = args->heartbeat_timeout_seconds;
    comm->devmem = mc_devmem_for(be); /* NULL for a backend in host memory; NCCL does without */
    mc_comm_abort_through(comm);
    return comm;
}

const char *mc_setup_comm_note(const mc_args_t *args, const mc_backend_t *be)
{
    const bool nccl = strcmp(args->distributed_backend, "nccl") == 0;
    if (nccl && !be->has_nccl)
        return "--distributed-backend nccl needs the cuda backend; the cpu backend's tensors are "
               "in host memory";
    if (nccl) return "--distributed-backend nccl";
    if (be->has_nccl)
        return "--distributed-backend mpi; device buffers staged through pinned host memory";
    return "--distributed-backend mpi";
}
