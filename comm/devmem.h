/* The comm layer's view of a backend's memory (mc_devmem_t in comm/comm.h). */
#ifndef MC_DIST_DEVMEM_H
#define MC_DIST_DEVMEM_H

#include "kernels/backend.h"
#include "comm/comm.h"

/* NULL for a backend without device memory (the cpu backend: its tensors are host memory);
 * otherwise the backend's own copies (ordered on its compute stream), its is_device and its
 * pinned host memory (kernels/backend.h: the cuda backend's cudaPointerGetAttributes and
 * cudaMallocHost, the strict test backend's address check and malloc). */
const mc_devmem_t *mc_devmem_for(const mc_backend_t *be);

#endif
