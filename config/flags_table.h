/* Shorthands for writing the flag tables (config/flags_model.c, config/flags_train.c, and the
 * subcommands' tables in cli/..._args.c). Internal to the table files.
 * The table is split in files only to keep each readable (the model's flags, the run's, those
 * Megatron removed, and the rest of Megatron's surface by feature); config/flags.c joins them. */
#ifndef MC_CONFIG_FLAGS_TABLE_H
#define MC_CONFIG_FLAGS_TABLE_H

#include <stddef.h>

#include "config/flags.h"

#define INT .type = MC_FLAG_INT
#define INT64 .type = MC_FLAG_INT64
#define FLOAT .type = MC_FLAG_FLOAT
#define STRING .type = MC_FLAG_STRING
#define TRUE_IF_GIVEN .type = MC_FLAG_STORE_TRUE
#define FALSE_IF_GIVEN .type = MC_FLAG_STORE_FALSE
#define CHOICE(...)                                                                                \
    .type = MC_FLAG_CHOICE, .choices = (const char *const[]) { __VA_ARGS__, NULL }
/* nargs: LIST(0) is '*', LIST(-1) is '+', LIST(n) takes exactly n values. */
#define LIST(n) .type = MC_FLAG_LIST, .nargs = (n), .elem = MC_FLAG_STRING
#define INT_LIST(n) .type = MC_FLAG_LIST, .nargs = (n), .elem = MC_FLAG_INT

#define FIELD(x) FIELD_OF(mc_args_t, x)
/* Megatron's attribute spelled otherwise than the field ("barrier_with_L1_time"). */
#define FIELD_NAMED(x, name)                                                                       \
    .field = offsetof(mc_args_t, x), .field_size = sizeof(((mc_args_t *)0)->x), .dest = (name)
/* A field of another subcommand's options struct T. */
#define FIELD_OF(T, x) .field = offsetof(T, x), .field_size = sizeof(((T *)0)->x), .dest = #x
/* A const char * field of T pointing into argv. */
#define REF_OF(T, x) FIELD_OF(T, x), .ref = true
/* A bool companion set when the flag is given (for defaults of None where 0 is a real value). */
#define SET_FLAG(x) .set_field = offsetof(mc_args_t, x), .set_size = sizeof(((mc_args_t *)0)->x)
#define LIST_FIELD(x, n) FIELD(x), .count_field = offsetof(mc_args_t, n)

/* The field of a flag whose feature is on its way (TODO_CHECKED): no dest, so checkpoints do not
 * store it in their args (ckpt/args.c stores the fields by dest) until the feature exists; then
 * it becomes FIELD. */
#define PENDING_FIELD(x) .field = offsetof(mc_args_t, x), .field_size = sizeof(((mc_args_t *)0)->x)
#define PENDING_LIST_FIELD(x, n) PENDING_FIELD(x), .count_field = offsetof(mc_args_t, n)

#define GE(x) .bounds = MC_MIN, .min = (x)
#define GT(x) .bounds = MC_MIN_EXCL, .min = (x)
#define BETWEEN(a, b) .bounds = MC_MIN | MC_MAX, .min = (a), .max = (b)
#define PROBABILITY .bounds = MC_MIN | MC_MAX_EXCL, .min = 0, .max = 1

#define IMPLEMENTED .status = MC_FLAG_IMPLEMENTED
#define IMPLEMENTED_NOTE(why) .status = MC_FLAG_IMPLEMENTED, .note = (why)
#define NOOP(why) .status = MC_FLAG_NOOP, .note = (why)
#define TODO(why) .status = MC_FLAG_NOT_IMPLEMENTED, .note = (why)
#define TODO_CHECKED(why) .status = MC_FLAG_NOT_IMPLEMENTED, .checked_first = true, .note = (why)
#define DEPRECATED(msg) .status = MC_FLAG_DEPRECATED, .note = (msg)

/* argparse's own -h/--help, as the subcommands' tables list it in group grp. */
#define MC_FLAG_HELP_ROW(grp)                                                                      \
    {                                                                                              \
        .name = "--help", .alias = "-h", .group = (grp), .type = MC_FLAG_ACTION,                   \
        .action = MC_ACTION_HELP, IMPLEMENTED, .help = "show this help message and exit"           \
    }
#define ONLY(why, ...)                                                                             \
    .status = MC_FLAG_PARTIAL, .note = (why), .supported = (const char *const[])                   \
    {                                                                                              \
        __VA_ARGS__, NULL                                                                          \
    }

extern const mc_flag_t mc_flags_model[];
extern const size_t mc_flags_model_count;
extern const mc_flag_t mc_flags_train[];
extern const size_t mc_flags_train_count;
extern const mc_flag_t mc_flags_legacy[];
extern const size_t mc_flags_legacy_count;
/* The rest of Megatron's surface, recognised and mostly refused by name (scripts/
 * megatron-flags-table.py wrote them first): */
extern const mc_flag_t mc_flags_moe[]; /* mixture of experts, multi-token prediction */
extern const size_t mc_flags_moe_count;
extern const mc_flag_t mc_flags_mla_fp8[]; /* MLA, FP8/FP4, other attention variants */
extern const size_t mc_flags_mla_fp8_count;
extern const mc_flag_t mc_flags_serving[]; /* inference, RL, distillation, modelopt */
extern const size_t mc_flags_serving_count;
extern const mc_flag_t mc_flags_services[]; /* fault tolerance, restarts, telemetry, ... */
extern const size_t mc_flags_services_count;
extern const mc_flag_t mc_flags_misc[]; /* everything else megatron-c lacks */
extern const size_t mc_flags_misc_count;

#endif
