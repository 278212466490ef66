# megatron-c build. `make` builds ./megatron-c (CPU backend always; CUDA objects too when nvcc is
# found, unless CUDA=0). `make test` runs the whole suite; `make test SANITIZE=1` runs it under
# AddressSanitizer and UBSan (TEST_SET=sanitize: the part sanitizers find things in, as .ci/run
# does); `make demo` installs dependencies and trains the demo model.

CC      ?= gcc
PYTHON  ?= /usr/bin/python3
WERROR  ?= 0
SANITIZE ?= 0
CUDA_HOME ?= /usr/local/cuda
NCCL_HOME ?= $(CUDA_HOME)
# cuDNN (kernels/cuda/cudnn_*.cu, the fused attention): headers under CUDNN_HOME/include, the
# library in lib/ or lib64/ (the CUDA toolkit's by default; scripts/device-env.sh points it at a
# PyPI wheel's copy). Without them a CUDA build uses the project's attention kernels and says so.
CUDNN_HOME ?= $(CUDA_HOME)
CUDNN_HDR := $(wildcard $(CUDNN_HOME)/include/cudnn_graph.h)
CUDNN_LIB := $(firstword $(wildcard $(CUDNN_HOME)/lib/libcudnn.so* $(CUDNN_HOME)/lib64/libcudnn.so*))
NVCC    ?= $(CUDA_HOME)/bin/nvcc

VERSION := 0.1.0
GIT_REV := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)

# -ffp-contract=off: the CPU reference rounds every a*b+c twice, as the CUDA kernels that promise
# its results bit for bit do (their __f*_rn intrinsics); GCC would fuse them into FMAs on aarch64.
# DEBUG_FLAGS: -g by default; .ci/run's -g1 (line tables and function names, enough for the
# sanitizers' reports) builds in two thirds of the time
DEBUG_FLAGS ?= -g
CFLAGS  := -std=gnu11 -O2 $(DEBUG_FLAGS) -Wall -Wextra -Wno-unused-parameter -Wpointer-arith -I. -ffp-contract=off \
           -DMC_VERSION='"$(VERSION)"' -DMC_GIT_REV='"$(GIT_REV)"'
LDLIBS  := -lopenblas -ljansson -lyaml -lpcre2-8 -lz -lm -lpthread
# SentencePiece (Debian's libsentencepiece-dev): a C++ library, reached through data/spm.cc, the
# one C++ file of the product (hence libstdc++).
LDLIBS  += -lsentencepiece -lstdc++
HOST_CXXFLAGS := -std=c++17 -O2 $(DEBUG_FLAGS) -Wall -Wextra -Wno-unused-parameter -I.
ifeq ($(WERROR),1)
CFLAGS  += -Werror
HOST_CXXFLAGS += -Werror
endif

# PMIx (comm/runtime.c) and MPI (comm/comm_mpi.c), flags from their own tools. PMIx's
# headers live under a private prefix and need gnu11 (DESIGN, Build facts).
PMIX_CFLAGS := $(shell pkg-config --cflags pmix 2>/dev/null)
PMIX_LIBS   := $(shell pkg-config --libs pmix 2>/dev/null)
MPI_CFLAGS  := $(shell mpicc --showme:compile 2>/dev/null)
MPI_LIBS    := $(shell mpicc --showme:link 2>/dev/null)
# MC_KIT: the Debian packages unpacked under a prefix instead of installed (scripts/device-kit.sh
# packs them, scripts/device-env.sh unpacks them on a GPU machine that has none): their headers
# and libraries from there, since pkg-config and mpicc would name /usr.
ifneq ($(MC_KIT),)
KIT_LIB     := $(MC_KIT)/usr/lib/x86_64-linux-gnu
PMIX_CFLAGS := -I$(KIT_LIB)/pmix2/include -I$(KIT_LIB)/pmix2/include/pmix
PMIX_LIBS   := -L$(KIT_LIB)/pmix2/lib -Wl,-rpath,$(KIT_LIB)/pmix2/lib -lpmix
MPI_CFLAGS  := -I$(KIT_LIB)/openmpi/include -I$(KIT_LIB)/openmpi/include/openmpi
MPI_LIBS    := -L$(KIT_LIB)/openmpi/lib -Wl,-rpath,$(KIT_LIB)/openmpi/lib -lmpi
CFLAGS      += -I$(MC_KIT)/usr/include -I$(MC_KIT)/usr/include/x86_64-linux-gnu/openblas-pthread
HOST_CXXFLAGS += -I$(MC_KIT)/usr/include
LDLIBS      += -L$(KIT_LIB) -Wl,-rpath,$(KIT_LIB) -L$(KIT_LIB)/openblas-pthread -Wl,-rpath,$(KIT_LIB)/openblas-pthread \
               -L$(MC_KIT)/lib/x86_64-linux-gnu -Wl,-rpath,$(MC_KIT)/lib/x86_64-linux-gnu
endif
CFLAGS  += $(PMIX_CFLAGS) $(MPI_CFLAGS)
LDLIBS  += $(PMIX_LIBS) $(MPI_LIBS)

ifeq ($(SANITIZE),1)
BUILD   := build/san
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
HOST_CXXFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
CUDA    := 0
else
BUILD   := build/rel
endif

# EMU=1: the emulated CUDA device of the tests (test/emu/README.md). kernels/cuda is compiled by
# the host C++ compiler against test/emu instead of nvcc, and linked with the emulated runtime,
# cuBLASLt, CUB and NCCL instead of NVIDIA's libraries: the whole program runs --device cuda on
# the CPU. Into build/emu (build/emu-san with SANITIZE=1); `make test` builds and runs it.
EMU ?= 0
EMU_DIR := $(if $(filter 1,$(SANITIZE)),build/emu-san,build/emu)
ifeq ($(EMU),1)
BUILD   := $(EMU_DIR)
CUDA    := 0
endif

# CUDA objects when nvcc is present (DESIGN: CPU build always, CUDA when found; CUDA=0 forces off).
ifeq ($(CUDA),)
CUDA := $(if $(wildcard $(NVCC)),1,$(if $(shell command -v nvcc 2>/dev/null),1,0))
ifeq ($(wildcard $(NVCC)),)
NVCC := nvcc
endif
endif
# SASS for H100/H200 (sm_90a) and A100-class GPUs (sm_80, which also runs on sm_86/89), and
# compute_90 PTX that newer GPUs (Blackwell) compile at load time. NVCC_WERROR (default WERROR)
# makes nvcc's warnings errors: CI's nvcc is known; a GPU machine's newer one may warn anew.
# NVCC_GENCODE: those three by default; .ci/run, which has no GPU, compiles sm_90a only (nvcc
# takes about as long again for each target).
NVCC_WERROR ?= $(WERROR)
NVCC_GENCODE ?= -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_80,code=sm_80 \
                -gencode arch=compute_90,code=compute_90
NVCCFLAGS := -O3 -std=c++17 -I. -Xcompiler -Wall $(NVCC_GENCODE)
ifeq ($(NVCC_WERROR),1)
NVCCFLAGS += -Werror all-warnings
endif
# NCCL (comm/comm_nccl.c): headers and library under NCCL_HOME (CUDA_HOME by default, where
# the CUDA 13 wheels put it: include/ and lib/).
ifeq ($(CUDA),1)
CFLAGS  += -DMC_WITH_CUDA=1 -I$(CUDA_HOME)/include -I$(NCCL_HOME)/include
LDLIBS  += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lcublasLt -lcublas \
           -L$(NCCL_HOME)/lib -Wl,-rpath,$(NCCL_HOME)/lib -lnccl -lstdc++
CU_SRC  := $(wildcard kernels/cuda/*.cu)
ifneq ($(and $(CUDNN_HDR),$(CUDNN_LIB)),)
CFLAGS  += -DMC_WITH_CUDNN=1 -I$(CUDNN_HOME)/include
NVCCFLAGS += -DMC_WITH_CUDNN=1 -I$(CUDNN_HOME)/include
LDLIBS  += -L$(CUDNN_HOME)/lib -L$(CUDNN_HOME)/lib64 -Wl,-rpath,$(CUDNN_HOME)/lib \
           -Wl,-rpath,$(CUDNN_HOME)/lib64 -lcudnn
endif
endif

# The emulated device: every CUDA-built C file as with nvcc, the kernels through g++.
# EMU_OPT: the kernels' optimisation (test/emu/mutants.sh rebuilds a planted defect's object at
# -O0: a fifth of -O2's compile time, and its test stops at the first failure).
EMU_OPT ?= -O2
CXX     ?= g++
EMU_CXXFLAGS := -std=c++17 $(EMU_OPT) $(DEBUG_FLAGS) -Wall -Wextra -Wno-unused-parameter -Wno-unknown-pragmas -I. -ffp-contract=off -DMC_CUDA_EMU=1 \
                -I$(CUDA_HOME)/include -I$(NCCL_HOME)/include
ifeq ($(SANITIZE),1)
EMU_CXXFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
ifeq ($(WERROR),1)
EMU_CXXFLAGS += -Werror
endif
# The emulated cuDNN (test/emu/cudnn*.cpp) needs cuDNN's headers, not its library.
EMU_CUDNN := $(wildcard test/emu/cudnn*.cpp test/emu/test_emu_cudnn.cpp)
ifneq ($(CUDNN_HDR),)
EMU_CXXFLAGS += -DMC_WITH_CUDNN=1 -I$(CUDNN_HOME)/include
EMU_SKIP :=
else
EMU_SKIP := $(EMU_CUDNN)
endif
EMU_PROGS := $(filter-out $(EMU_SKIP),$(wildcard test/emu/test_emu_*.cpp test/emu/test_emu_*.cu))
ifeq ($(EMU),1)
CFLAGS  += -DMC_WITH_CUDA=1 -DMC_CUDA_EMU=1 -I$(CUDA_HOME)/include -I$(NCCL_HOME)/include
ifneq ($(CUDNN_HDR),)
CFLAGS  += -DMC_WITH_CUDNN=1 -I$(CUDNN_HOME)/include
endif
LDLIBS  += -lstdc++
CU_SRC  := $(wildcard kernels/cuda/*.cu)
EMU_OBJ := $(patsubst %.cpp,$(BUILD)/%.o,$(filter-out $(EMU_PROGS) $(EMU_SKIP),$(wildcard test/emu/*.cpp)))
endif
# Whether this machine can build the emulated device: g++ and the CUDA and NCCL headers.
EMU_OK := $(and $(shell command -v $(CXX) 2>/dev/null),$(wildcard $(CUDA_HOME)/include/cublasLt.h),$(wildcard $(CUDA_HOME)/include/mma.h),$(wildcard $(NCCL_HOME)/include/nccl.h))

LIB_SRC := $(wildcard base/*.c config/*.c comm/*.c kernels/*.c kernels/cpu/*.c model/*.c data/*.c torchfmt/*.c \
                     parallel/*.c optim/*.c trainer/*.c ckpt/*.c train/*.c plan/*.c cli/*.c)
LIB_CXX := $(wildcard data/*.cc)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(LIB_CXX:%.cc=$(BUILD)/%.o) $(CU_SRC:%.cu=$(BUILD)/%.cu.o) $(EMU_OBJ)
BIN     := $(BUILD)/megatron-c

# Unit tests mirror the tree: test/unit/<folder>/test_*.c tests <folder>/; the support files
# shared by several sit in test/unit/ itself. Binaries are build/*/test/test_* either way.
ifneq ($(wildcard test/unit/test_*.c),)
$(error unit tests live in test/unit/<folder they test>/: move $(wildcard test/unit/test_*.c))
endif
TEST_SRC     := $(wildcard test/unit/*/test_*.c)
TEST_SUPPORT := $(wildcard test/unit/*.c)
TEST_BIN     := $(addprefix $(BUILD)/test/,$(basename $(notdir $(TEST_SRC))))
TEST_SUP_OBJ := $(TEST_SUPPORT:%.c=$(BUILD)/%.o)
# Multi-rank test programs (run under mpirun by test/integration/*.sh), no cmocka.
MPI_TEST_SRC := $(wildcard test/mpi/*.c)
MPI_TEST_BIN := $(MPI_TEST_SRC:test/mpi/%.c=$(BUILD)/test/mpi/%)
# test_comm_nccl: test/mpi/test_comm_mpi.c again, on the NCCL communicator over an emulated GPU
# (test/fake/fake_cuda.c renames comm_nccl.c's CUDA and NCCL calls to an emulation on host memory
# and MPI), so comm_nccl.c's logic is tested without a GPU. Needs only the CUDA and NCCL headers.
FAKE_CUDA := $(and $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),$(wildcard $(NCCL_HOME)/include/nccl.h))
FAKE_CFLAGS := -DMC_WITH_CUDA=1 -DMC_TEST_FAKE_NCCL=1 -I$(CUDA_HOME)/include -I$(NCCL_HOME)/include \
               -include test/fake/fake_cuda.h
ifneq ($(FAKE_CUDA),)
MPI_TEST_BIN += $(BUILD)/test/mpi/test_comm_nccl
endif
# test_comm_nccl_gpu: the same device checks on a real GPU and real NCCL (test/gpu/real_device.c
# stands in for the emulation), one rank; scripts/gpu-test.sh runs it.
ifeq ($(CUDA),1)
MPI_TEST_BIN += $(BUILD)/test/mpi/test_comm_nccl_gpu
endif
# GPU tests (test/gpu/test_gpu_*.c, cmocka): each CUDA op against the CPU op, reported skipped
# where the build has no CUDA or no GPU is usable; test/run.sh runs them with the unit tests.
GPU_TEST_SRC := $(wildcard test/gpu/test_gpu_*.c)
GPU_TEST_BIN := $(GPU_TEST_SRC:test/gpu/%.c=$(BUILD)/test/%)
# Helper programs that integration tests drive (e.g. ckpt_tool for test_ckpt_torch.sh), no cmocka.
TOOL_SRC     := $(wildcard test/tools/*.c)
TOOL_BIN     := $(TOOL_SRC:test/tools/%.c=$(BUILD)/test/tools/%)
# The CUDA benchmark programs of bench/ (bench-kernels.sh; bench_attention): built with the tests,
# which check that they say why when there is no GPU (bench_index_build.c is bench-data.sh's own).
BENCH_BIN    := $(BUILD)/bench/bench_kernels $(BUILD)/bench/bench_attention
# Mutation fuzzers of the .idx reader, torch.load and the flag parser (scripts/fuzz.sh), with
# their shared driver test/fuzz/fuzz.c.
FUZZ_SRC     := $(wildcard test/fuzz/fuzz_*.c)
FUZZ_BIN     := $(FUZZ_SRC:test/fuzz/%.c=$(BUILD)/test/fuzz/%)

.PHONY: all test demo demo-llama clean docs fixtures deps tests emu emu-tests sanitized-tests
.SECONDARY:
all: megatron-c

megatron-c: $(BIN)
ifeq ($(SANITIZE),0)
	cp $(BIN) $@.tmp && mv -f $@.tmp $@
endif

$(BIN): $(BUILD)/main.o $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.cc
	@mkdir -p $(dir $@)
	$(CXX) $(HOST_CXXFLAGS) -MMD -MP -c $< -o $@

ifeq ($(EMU),1)
$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(CXX) -Itest/emu/include $(EMU_CXXFLAGS) -include test/emu/cuda_emu.h -x c++ -MMD -MP -MF $@.d -c $< -o $@
else
$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -MF $@.d -c $< -o $@
endif

$(BUILD)/test/emu/%.o: test/emu/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -MMD -MP -c $< -o $@

# The emulator's own tests, linked with it and the program's library: test/emu/test_emu_*.cpp
# (host code), test/emu/test_emu_*.cu (kernels, compiled as kernels/cuda is).
$(BUILD)/test/emu/test_emu_%: test/emu/test_emu_%.cpp $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -MMD -MP $(LDFLAGS) -o $@ $(filter %.cpp %.o,$^) $(LDLIBS)

$(BUILD)/test/emu/test_emu_%: test/emu/test_emu_%.cu $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CXX) -Itest/emu/include $(EMU_CXXFLAGS) -include test/emu/cuda_emu.h -x c++ -MMD -MP $(LDFLAGS) -o $@ $< \
	    -x none $(LIB_OBJ) $(LDLIBS)

# The unit tests and the test tools link the program's objects from an archive: each takes the
# objects it uses (a third of the link time of all of them, over some 150 programs per tree).
# The emulated device's programs keep the object list (its runtime's static initialisers).
LIB_A := $(BUILD)/libmegatron-c.a
$(LIB_A): $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

define unit_test_rule
$(BUILD)/test/$(basename $(notdir $(1))): $(1) $(TEST_SUP_OBJ) $(LIB_A)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) -MMD -MP $$(LDFLAGS) -o $$@ $$(filter %.c %.o,$$^) $(LIB_A) $$(LDLIBS) -lcmocka
endef
$(foreach t,$(TEST_SRC),$(eval $(call unit_test_rule,$(t))))

$(BUILD)/test/test_gpu_%: test/gpu/test_gpu_%.c $(LIB_OBJ) $(TEST_SUP_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP $(LDFLAGS) -o $@ $(filter %.c %.o,$^) $(LDLIBS) -lcmocka

$(BUILD)/test/mpi/%: test/mpi/%.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP $(LDFLAGS) -o $@ $(filter %.c %.o,$^) $(LDLIBS)

$(BUILD)/test/mpi/test_comm_nccl: test/mpi/test_comm_mpi.c test/fake/fake_cuda.c comm/comm_nccl.c \
                                  comm/nccl_calls.c \
                                  $(filter-out $(BUILD)/comm/comm_nccl.o $(BUILD)/comm/nccl_calls.o,$(LIB_OBJ)) \
                                  $(wildcard test/fake/*.h comm/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(FAKE_CFLAGS) $(LDFLAGS) -o $@ $(filter %.c %.o,$^) $(LDLIBS)

$(BUILD)/test/mpi/test_comm_nccl_gpu: test/mpi/test_comm_mpi.c test/gpu/real_device.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DMC_TEST_FAKE_NCCL=1 $(LDFLAGS) -o $@ $(filter %.c %.o,$^) $(LDLIBS)

$(BUILD)/test/tools/%: test/tools/%.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP $(LDFLAGS) -o $@ $(filter %.c,$^) $(LIB_A) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP $(LDFLAGS) -o $@ $(filter %.c %.o,$^) $(LDLIBS)

$(BUILD)/test/fuzz/fuzz_%: test/fuzz/fuzz_%.c $(BUILD)/test/fuzz/fuzz.o $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP $(LDFLAGS) -o $@ $(filter %.c %.o,$^) $(LDLIBS)

# the GPU op tests in a CUDA build (without one they would only skip; the emulated build runs them)
tests: $(BIN) $(TEST_BIN) $(if $(filter 1,$(CUDA)),$(GPU_TEST_BIN)) $(MPI_TEST_BIN) $(TOOL_BIN) $(BENCH_BIN) $(FUZZ_BIN) emu

# The emulated device's programs: megatron-c, the GPU op tests, the kernel benchmarks (their
# plumbing) and the emulator's own tests. `make emu` builds them into build/emu(-san).
emu-tests: $(BIN) $(GPU_TEST_BIN) $(BENCH_BIN) \
           $(basename $(EMU_PROGS:test/emu/%=$(BUILD)/test/emu/%))
ifeq ($(EMU),1)
emu: emu-tests
else ifneq ($(EMU_OK),)
emu:
	$(MAKE) EMU=1 emu-tests
else
emu:
	@echo "make: no emulated CUDA device (needs $(CXX) and the CUDA and NCCL headers under $(CUDA_HOME))"
endif
EMU_BUILD := $(if $(EMU_OK),$(abspath $(EMU_DIR)))
# the emulated op tests under two thread schedules; under the sanitizers one is enough
EMU_SCHEDS := $(if $(filter 1,$(SANITIZE)),forward,forward warps)
# TEST_SET=sanitize: what the sanitizers find things in (test/run.sh's MC_TEST_SET), .ci/run's
# sanitizer pass; all (the default) runs everything
TEST_SET ?= all

# SANITIZE_TOO=1 (.ci/run): the sanitizer pass too, in the same run: TEST_SET=sanitize in
# build/san and build/emu-san (made first), its results named san/..., one closing line for both
SANITIZE_TOO ?= 0
SAN_RUN := $(if $(filter 1,$(SANITIZE_TOO)),MC_SAN_BUILD=$(abspath build/san) \
	   MC_SAN_EMU_BUILD=$(if $(EMU_OK),$(abspath build/emu-san)))

test: tests $(if $(filter 1,$(SANITIZE_TOO)),sanitized-tests)
	MC_BIN=$(abspath $(BIN)) MC_BUILD=$(abspath $(BUILD)) MC_EMU_BUILD=$(EMU_BUILD) MC_EMU_SCHEDS="$(EMU_SCHEDS)" \
	    MC_TEST_SET=$(TEST_SET) $(SAN_RUN) bash test/run.sh

sanitized-tests:
	$(MAKE) SANITIZE=1 tests

deps:
	bash scripts/install-deps.sh

demo: deps
	$(MAKE) megatron-c
	./megatron-c --device cpu --mock-data --vocab-size 256 --num-layers 2 --hidden-size 64 \
	  --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64 \
	  --micro-batch-size 4 --global-batch-size 16 --train-iters 200 --lr 3e-3 \
	  --lr-decay-style cosine --lr-warmup-iters 10 --min-lr 3e-4 --weight-decay 0.1 \
	  --clip-grad 1.0 --hidden-dropout 0.0 --attention-dropout 0.0 --log-interval 20 \
	  --eval-interval 100 --eval-iters 4 --log-throughput

# A small Llama-architecture model (grouped-query attention, SwiGLU, RoPE, RMSNorm, untied) on
# the shared Shakespeare dataset (Megatron's preprocessing of it, GPT-2 tokens; CPU, ~2 min).
SHARED ?= $(or $(MEGATRON_C_SHARED),../shared)
demo-llama: deps
	$(MAKE) megatron-c
	./megatron-c --device cpu --data-path $(SHARED)/data/megatron-ref/tinyshakespeare_text_document \
	  --split 949,50,1 --tokenizer-type GPT2BPETokenizer --vocab-file $(SHARED)/data/gpt2/gpt2-vocab.json \
	  --merge-file $(SHARED)/data/gpt2/gpt2-merges.txt --num-layers 4 --hidden-size 128 \
	  --num-attention-heads 8 --group-query-attention --num-query-groups 2 --swiglu \
	  --position-embedding-type rope --normalization RMSNorm --untie-embeddings-and-output-weights \
	  --disable-bias-linear --seq-length 128 --max-position-embeddings 128 --micro-batch-size 4 \
	  --global-batch-size 16 --train-iters 100 --lr 2e-3 --lr-decay-style cosine \
	  --lr-warmup-iters 10 --min-lr 2e-4 --weight-decay 0.1 --clip-grad 1.0 --hidden-dropout 0.0 \
	  --attention-dropout 0.0 --log-interval 10 --eval-interval 50 --eval-iters 4 --log-throughput

docs: megatron-c
	./megatron-c --flags-markdown > docs/FLAGS.md

fixtures:
	$(PYTHON) test/ref/gpt_ref.py test/fixtures

clean:
	rm -rf build megatron-c

-include $(shell find build -name '*.d' 2>/dev/null)
