/* Checks a training command line at a world size without running it, for
 * test/integration/test_recipes.sh: the same parse and validation megatron-c's training runs
 * before anything starts (mc_args_parse with the world size of the recipe's job, as
 * test/unit/cli/test_cli_recipes.c checks the SC21 scripts), on one process.
 *   recipe_check WORLD ARGS...
 * Exit 0 and "starts" on stdout when the line passes; otherwise megatron-c's own exit (2) with
 * its "megatron-c: error: ..." lines on stderr (every problem of the line, or validation's
 * first). */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "config/args.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: recipe_check WORLD ARGS...\n");
        return 1;
    }
    char *end;
    long world = strtol(argv[1], &end, 10);
    if (*end || world < 1 || world > 1 << 20) {
        fprintf(stderr, "recipe_check: bad world size '%s'\n", argv[1]);
        return 1;
    }
    static mc_args_t args;
    mc_args_parse(&args, argc - 2, argv + 2, (int)world);
    mc_args_free(&args);
    printf("starts\n");
    return 0;
}
