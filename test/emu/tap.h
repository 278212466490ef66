// For the emulator's own tests (test/emu/test_emu_*.cpp): one TAP line per check, the count and
// the failures for main's plan line and exit status. Each program includes it once.
#ifndef MC_TEST_EMU_TAP_H
#define MC_TEST_EMU_TAP_H

#include <stdarg.h>
#include <stdio.h>

static int g_tests, g_failed;

static void tap(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tap(bool ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%sok %d - ", ok ? "" : "not ", ++g_tests);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    if (!ok) g_failed++;
}

#endif
