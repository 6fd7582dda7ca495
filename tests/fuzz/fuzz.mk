# libFuzzer targets: `make fuzz` (the top Makefile) runs this file when
# tests/fuzz/*.c exist. The library is rebuilt with clang under
# -fsanitize=fuzzer-no-link,address,undefined into $(FUZZ_BUILD); each
# tests/fuzz/fuzz_NAME.c becomes $(FUZZ_BUILD)/fuzz_NAME, linked with
# -fsanitize=fuzzer and with the shared helpers (tests/fuzz/helpers/*.c).
# Run them with tests/fuzz/run.sh.

BUILD ?= build
FUZZ_BUILD ?= $(BUILD)/fuzz
FUZZ_CC ?= clang

PKGS := liburing jansson nettle
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
EXTRA_LIBS := $(shell pkg-config --libs ext2fs com_err libnbd libiscsi 2>/dev/null)
EXTRA_CFLAGS := $(shell pkg-config --cflags ext2fs libnbd 2>/dev/null)

SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
# The project's warnings, without -Werror: clang's -Wall is not gcc's, and
# `make` (gcc) is where warnings fail the build.
FUZZ_CFLAGS := -std=gnu17 -g -O1 -fno-omit-frame-pointer -Wall -Wextra \
	-Wno-unused-parameter -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -pthread \
	-Iinclude -Ilib $(PKG_CFLAGS) $(EXTRA_CFLAGS) \
	-fsanitize=fuzzer-no-link $(SAN)
FUZZ_LDLIBS := $(PKG_LIBS) $(EXTRA_LIBS) -lpthread -lm

LIB_SRCS := $(sort $(wildcard lib/*/*.c lib/export/*/*.c))
FUZZ_SRCS := $(sort $(wildcard tests/fuzz/fuzz_*.c))
HELPER_SRCS := $(sort $(wildcard tests/fuzz/helpers/*.c))

fobj = $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(1))
FUZZ_LIB := $(FUZZ_BUILD)/libblkstack.a
FUZZERS := $(patsubst tests/fuzz/%.c,$(FUZZ_BUILD)/%,$(FUZZ_SRCS))
HELPER_OBJS := $(call fobj,$(HELPER_SRCS))

.PHONY: all
.SECONDARY:
all: $(FUZZERS)

$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<

$(FUZZ_LIB): $(call fobj,$(LIB_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/obj/tests/fuzz/fuzz_%.o $(HELPER_OBJS) $(FUZZ_LIB)
	$(FUZZ_CC) -fsanitize=fuzzer $(SAN) -o $@ $< $(HELPER_OBJS) \
		-Wl,--whole-archive $(FUZZ_LIB) -Wl,--no-whole-archive \
		$(FUZZ_LDLIBS)

-include $(shell find $(FUZZ_BUILD)/obj -name '*.d' 2>/dev/null)
