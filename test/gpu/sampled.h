/* gpu_case_sampled: which cases of a GPU op test's larger tables run (test/gpu/). Its own header
 * so the op tests that do not use gpu_test.h (the attention tests) share it. */
#ifndef MC_TEST_GPU_SAMPLED_H
#define MC_TEST_GPU_SAMPLED_H

/* Whether to run the next case of a large table. Under AddressSanitizer (the sanitizer pass of
 * .ci/run, whose op tests run about four times slower on the emulated device) half of them: the
 * release pass runs them all under two schedules, and the sanitizers see each kernel, type and
 * edge shape in some of its cases. The half is the golden-ratio sequence (case n runs when
 * frac(n phi) < 1/2), not every other case, which would drop one arm of every two-way loop. */
static inline int gpu_case_sampled(void)
{
#if defined(__SANITIZE_ADDRESS__)
    static unsigned n;
    return ((n++ * 0x9E3779B9u) >> 31) == 0;
#else
    return 1;
#endif
}

#endif
