# blkstack: one build entry.
#
#   make            build the library, `blkstack`, `blkstackd` and the tests
#   make check      install missing packages, build normal + ASan/UBSan,
#                   run unit, integration and fuzz tests, then `make tsan`
#   make tsan       ThreadSanitizer build (build/tsan), run the tests that
#                   run threads (scripts/run-tsan.sh)
#   make run        build, then serve the embedded default (see README)
#   make bench      benchmarks side by side with the peers (bench/)
#
# Every source file under lib/ goes into libblkstack.a; every tests/unit/
# test_*.c is one test program. Adding a driver, mapper or export needs no
# change here.

BUILD ?= build
SAN ?= 0
CC ?= cc

PKGS := liburing jansson nettle
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# optional libraries, used by the rooms that need them
EXTRA_LIBS := $(shell pkg-config --libs ext2fs com_err 2>/dev/null) -ldl
EXTRA_CFLAGS := $(shell pkg-config --cflags ext2fs libnbd 2>/dev/null)
# libnbd, libiscsi, librbd/librados are not linked: their drivers load
# them at the first open (lib/core/dynlib.h says why); the rbd driver
# builds when its header is there, and to nothing without it. Tests and
# tools that drive these libraries themselves link them.
PEER_LIBS := $(shell pkg-config --libs libnbd libiscsi 2>/dev/null)

CFLAGS_BASE := -std=gnu17 -g -O2 -Wall -Wextra -Werror -Wno-unused-parameter \
	-Wshadow -Wpointer-arith -Wstrict-prototypes -Wmissing-prototypes \
	-D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -pthread -Iinclude -Ilib \
	$(PKG_CFLAGS) $(EXTRA_CFLAGS)
ifeq ($(SAN),1)
CFLAGS_BASE += -O1 -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=undefined
LDFLAGS_SAN := -fsanitize=address,undefined
endif
ifeq ($(SAN),thread)
CFLAGS_BASE += -O1 -fsanitize=thread -fno-omit-frame-pointer
LDFLAGS_SAN := -fsanitize=thread
endif
CFLAGS := $(CFLAGS_BASE) $(CFLAGS_EXTRA)
LDLIBS := $(PKG_LIBS) $(EXTRA_LIBS) -lpthread -lm

LIB_SRCS := $(sort $(wildcard lib/*/*.c lib/export/*/*.c))
CLI_SRCS := $(sort $(wildcard cli/*.c))
DAEMON_SRCS := $(sort $(wildcard daemon/*.c))
TEST_HELPER_SRCS := $(sort $(wildcard tests/unit/helpers/*.c))
TEST_SRCS := $(sort $(wildcard tests/unit/test_*.c))
TOOL_SRCS := $(sort $(wildcard tests/tools/*.c))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
LIB_OBJS := $(call obj,$(LIB_SRCS))
LIB := $(BUILD)/libblkstack.a
LINK_LIB := -Wl,--whole-archive $(LIB) -Wl,--no-whole-archive

BINS := $(BUILD)/blkstack
ifneq ($(DAEMON_SRCS),)
BINS += $(BUILD)/blkstackd
endif
TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
TOOLS := $(patsubst tests/tools/%.c,$(BUILD)/tools/%,$(TOOL_SRCS))

.PHONY: all lib bins tests check asan tsan run bench clean deps fuzz
# Objects made through the pattern rules (tests, tools) are kept: as
# intermediates make would delete them and relink everything next time.
.SECONDARY:
all: bins tests

lib: $(LIB)
bins: $(BINS) $(TOOLS)
tests: $(TESTS) $(TOOLS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(LIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/blkstack: $(call obj,$(CLI_SRCS)) $(LIB)
	$(CC) $(LDFLAGS_SAN) -o $@ $(call obj,$(CLI_SRCS)) $(LINK_LIB) $(LDLIBS)

$(BUILD)/blkstackd: $(call obj,$(DAEMON_SRCS)) $(LIB)
	$(CC) $(LDFLAGS_SAN) -o $@ $(call obj,$(DAEMON_SRCS)) $(LINK_LIB) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(call obj,$(TEST_HELPER_SRCS)) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_SAN) -o $@ $< $(call obj,$(TEST_HELPER_SRCS)) $(LINK_LIB) $(LDLIBS) $(PEER_LIBS) -lcmocka

$(BUILD)/tools/%: $(BUILD)/obj/tests/tools/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_SAN) -o $@ $< $(LINK_LIB) $(LDLIBS) $(PEER_LIBS)

# The builds run in parallel (one job per CPU) unless make was given -j.
JOBS := $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 2))

asan:
	$(MAKE) BUILD=build/asan SAN=1 all

# ThreadSanitizer build in build/tsan, then the tests that run threads
tsan:
	$(MAKE) $(JOBS) BUILD=build/tsan SAN=thread all
	scripts/run-tsan.sh

deps:
	scripts/deps.sh

# The TSan stage runs even when a test of run-tests.sh failed; that status
# waits in a file meanwhile (a recipe line naming $(MAKE) would be run
# even by make -n, so the test run stays on a line of its own).
check: deps
	$(MAKE) $(JOBS) all
	$(MAKE) $(JOBS) asan
	$(MAKE) $(JOBS) fuzz
	rm -f build/check.counts
	CHECK_COUNTS=$(CURDIR)/build/check.counts scripts/run-tests.sh; echo $$? >build/check.rc
	CHECK_COUNTS=$(CURDIR)/build/check.counts $(MAKE) tsan || echo 1 >build/check.rc
	@awk '{p+=$$1; f+=$$2; s+=$$3} END {printf "make check (all stages): %d passed, %d failed, %d skipped\n", p, f, s}' build/check.counts
	@exit $$(cat build/check.rc)

fuzz:
	@if [ -n "$(wildcard tests/fuzz/*.c)" ]; then $(MAKE) -f tests/fuzz/fuzz.mk; fi

run: deps
	$(MAKE) bins
	scripts/run.sh

bench: deps
	$(MAKE) bins
	bench/run.sh

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
