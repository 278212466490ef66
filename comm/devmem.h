/* The comm layer's view of a backend's memory (mc_devmem_t in comm/comm.h). */
#ifndef MC_DIST_DEVMEM_H
#define MC_DIST_DEVMEM_H

#include "kernels/backend.h"
#include "comm/comm.h"

/* NULL for the cpu backend (its tensors are host memory); the strict test backend's by address
 * (kernels/strict.c); for the cuda backend: device pointers
 * told apart by cudaPointerGetAttributes, the backend's own copies (ordered on its compute
 * stream), pinned host memory from cudaMallocHost. */
const mc_devmem_t *mc_devmem_for(const mc_backend_t *be);

#endif
