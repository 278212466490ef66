/* Internals shared by pyobj.c and pyobj_tensor.c (torchfmt/pyobj.h). */
#ifndef MC_TORCHFMT_PYOBJ_INT_H
#define MC_TORCHFMT_PYOBJ_INT_H

#include "torchfmt/pyobj.h"

/* A new object of that kind with one reference, zeroed, or NULL out of memory. */
mc_pyobj_t *py_new_obj(mc_py_kind_t kind);

#endif
