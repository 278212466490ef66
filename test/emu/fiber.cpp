// Fibers (fiber.h). The x86-64 switch saves the callee-saved registers and the SSE/x87 control
// words on the old stack and restores them from the new one (System V ABI: everything else is
// caller-saved across the call).
#include "test/emu/fiber.h"

#include <stdint.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define MC_ASAN 1
#endif

#if defined(__x86_64__)
extern "C" void mc_emu_fiber_swap(void **save_sp, void *to_sp);
asm(R"(
    .text
    .globl mc_emu_fiber_swap
    .type mc_emu_fiber_swap, @function
mc_emu_fiber_swap:
    .cfi_startproc
    endbr64
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .cfi_endproc
    .size mc_emu_fiber_swap, .-mc_emu_fiber_swap
)");
#endif

namespace mc_emu {

void fiber_init(FiberCtx *f, void *stack, size_t size, void (*entry)())
{
    f->stack = stack;
    f->stack_size = size;
    f->asan_fake = nullptr;
#if defined(__x86_64__)
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)top;
    *--sp = 0;                 // entry's return address: it never returns
    *--sp = (uint64_t)entry;   // where the first switch "returns" to
    for (int i = 0; i < 6; i++) *--sp = 0; // rbp rbx r12 r13 r14 r15
    *--sp = 0x037F00001F80ull; // mxcsr 0x1f80 and the x87 control word 0x37f: the ABI's defaults
    f->sp = sp;
#else
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = stack;
    f->uc.uc_stack.ss_size = size;
    f->uc.uc_link = nullptr;
    makecontext(&f->uc, entry, 0);
#endif
}

void fiber_switch(FiberCtx *from, FiberCtx *to, bool from_dying)
{
#ifdef MC_ASAN
    __sanitizer_start_switch_fiber(from_dying ? nullptr : &from->asan_fake, to->stack, to->stack_size);
#else
    (void)from_dying;
#endif
#if defined(__x86_64__)
    mc_emu_fiber_swap(&from->sp, to->sp);
#else
    swapcontext(&from->uc, &to->uc);
#endif
#ifdef MC_ASAN
    // back in `from`: tell AddressSanitizer which stack we are on again
    __sanitizer_finish_switch_fiber(from->asan_fake, nullptr, nullptr);
#endif
}

void fiber_started(FiberCtx *self, FiberCtx *from)
{
#ifdef MC_ASAN
    const void *bottom = nullptr;
    size_t size = 0;
    __sanitizer_finish_switch_fiber(self->asan_fake, &bottom, &size);
    if (!from->stack) { // the scheduler's stack: learnt from the first switch away from it
        from->stack = (void *)bottom;
        from->stack_size = size;
    }
#else
    (void)self, (void)from;
#endif
}

} // namespace mc_emu
