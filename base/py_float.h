/* Python's repr() of a float, for text that must read as Megatron's Python prints it (progress
 * lines, arguments read back from a checkpoint). */
#ifndef MC_BASE_PY_FLOAT_H
#define MC_BASE_PY_FLOAT_H

#include <stddef.h>

/* Python's repr() of v ("0.1", "12345.0", "1e+16", "nan", "-inf") into buf[n]. */
void mc_py_float_repr(double v, char *buf, size_t n);

#endif
