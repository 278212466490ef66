// Fibers for the emulated device: one per CUDA thread, switched only at the points where a
// CUDA thread can wait for others (barriers, warp operations) and at its end. x86-64 has a
// switch of its own (swapcontext makes a system call per switch, 4x slower); other machines
// use ucontext.
#ifndef MC_TEST_EMU_FIBER_H
#define MC_TEST_EMU_FIBER_H

#include <stddef.h>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace mc_emu {

struct FiberCtx {
#if defined(__x86_64__)
    void *sp; // saved stack pointer; the callee-saved registers are on that stack
#else
    ucontext_t uc;
#endif
    void *stack;       // the fiber's stack (NULL for the scheduler's own)
    size_t stack_size;
    void *asan_fake;   // AddressSanitizer's fake stack while switched out
};

// Prepares f to run entry() on [stack, stack + size) at its first switch_to.
void fiber_init(FiberCtx *f, void *stack, size_t size, void (*entry)());
// Saves the running context into from and resumes to. `to_dying`: from will never be resumed
// (a fiber that ended), so AddressSanitizer can forget its stack.
void fiber_switch(FiberCtx *from, FiberCtx *to, bool from_dying = false);
// The first thing entry() calls (AddressSanitizer learns where it came from).
void fiber_started(FiberCtx *self, FiberCtx *from);

} // namespace mc_emu

#endif
