# SPDX-License-Identifier: MIT
# ecworker - a worker for Azure Storage queues that keeps Azure Table Storage
# eventually consistent. See README.md.
#
#   make            build build/ecworker
#   make deps       install what a fresh Debian machine lacks (apt-get, npm)
#   make test       the checks of the sources, then unit tests + integration tests
#                   against a real Azurite
#   make test SANITIZE=1   the same under AddressSanitizer + UBSan (also: make asan)
#   make valgrind   the unit tests under valgrind memcheck (errors and leaks fail)
#   make chaos      the chaos tests at full size (3,000 messages, kills, faults)
#   make demo       start a local Azurite and run ecworker on it
#   make fuzz       every libFuzzer target for FUZZ_SECONDS (clang; see tests/fuzz/README.md)
#   make bench      throughput, CPU, memory and request counts against a local
#                   Azurite, side by side with an official-SDK worker (BENCH_RUNS=N,
#                   BENCH_QUICK=1; see tests/bench/bench.js)
#   make install    PREFIX=/usr/local DESTDIR=
#   make deb        build/deb/ecworker_<version>_<arch>.deb; make deb-check: lintian;
#                   make deb-test: installed in a fresh root filesystem, run
#                   against Azurite (see deploy/README.md, "Debian package")
#   make format     clang-format every C file; make check-format, make check-deps,
#                   make check-circles, make check-names, make check-hardening, make check-docs: the checks make test
#                   runs (see "style" below, CONTRIBUTING.md)

CC      ?= cc
# The one version number: include/ecw_version.h. The image's label, the Debian
# package and `ecworker --version` all read it from there.
VERSION := $(shell sed -n 's/^\#define ECW_VERSION "\(.*\)"$$/\1/p' include/ecw_version.h)
PREFIX  ?= /usr/local
DESTDIR ?=
PKGS    := libcurl libssl libcrypto json-c yaml-0.1 expat libmicrohttpd zlib
CFLAGS  ?= -O2 -g

# `make V=1` shows the full commands.
ifeq ($(V),1)
Q :=
SAY := @true
else
Q := @
SAY := @echo
endif

ifeq ($(SANITIZE),1)
BUILD   := build/asan
CFLAGS  := -O1 -g -fno-omit-frame-pointer
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all
else
BUILD   := build
SANFLAGS :=
endif

# Hardening, as Debian's dpkg-buildflags (hardening=+all) gives its packages,
# and a little more: libc calls checked where the buffer's size is known
# (_FORTIFY_SOURCE=3 also where it is known only at run time: gcc 12, clang
# 16; older compilers get 2), stack canaries and stack-clash probes, a
# position-independent executable (ASLR for the program itself, not just its
# libraries), the relocations made read-only once the program is loaded (full
# RELRO: symbols are bound at start, not at their first call), and on x86-64
# the CET marks (indirect-branch targets, shadow-stack ready). Not under the
# sanitizers, which check more, nor without optimisation, where
# _FORTIFY_SOURCE does nothing but warn. tests/check-hardening.sh reads these
# properties back from the binary (make check-hardening, in make test).
ifeq ($(SANITIZE)$(findstring -O0,$(CFLAGS)),)
# The level is probed once, when first used (not when the Makefile is read:
# on a fresh machine `make deps` runs before there is a compiler): a compiler
# or libc that cannot do 3 warns (glibc: "treated like 2"), which -Werror
# turns into the fallback.
FORTIFY_LEVEL = $(eval FORTIFY_LEVEL := $(shell printf '\043include <string.h>\nint main(void) { return 0; }\n' | \
	$(CC) -O2 -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=3 -Werror -x c -o /dev/null - 2>/dev/null && echo 3 || echo 2))$(FORTIFY_LEVEL)
HARDEN_CFLAGS  = -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=$(FORTIFY_LEVEL) -fstack-protector-strong \
	-fstack-clash-protection -fPIE
HARDEN_LDFLAGS := -pie -Wl,-z,relro,-z,now -Wl,-z,noexecstack
HARDENED := yes
ifneq ($(filter x86_64-%,$(shell $(CC) -dumpmachine 2>/dev/null || uname -m | sed 's/$$/-linux/')),)
HARDEN_CFLAGS  += -fcf-protection
endif
else
HARDEN_CFLAGS  :=
HARDEN_LDFLAGS :=
HARDENED :=
endif

# Recursive (=) so pkg-config runs when used: `make test` installs first, in a
# sub-make, and only then asks pkg-config.
ECW_CFLAGS = -std=c11 -Wall -Wextra -Werror -Wformat=2 -D_DEFAULT_SOURCE $(HARDEN_CFLAGS) \
	-Iinclude -I$(BUILD)/gen $(SANFLAGS) $(shell pkg-config --cflags $(PKGS))
ECW_LIBS   = $(shell pkg-config --libs $(PKGS)) -lpthread -lm
TEST_LIBS  = $(shell pkg-config --libs cmocka)

# The rooms (CONTRIBUTING.md): worker/base (utilities), worker/storage (the
# REST client), worker/yaml (the YAML tree and its typed readers), jobs (the
# job types), worker/config (the schema and its sections), worker/telemetry (metrics, traces, OTLP), worker/schedule (schedules
# and audits), worker/migrate (migrations), worker/runtime (the daemon),
# worker/cmd (the operator commands), and worker/ itself (main.c and what the
# commands and the daemon share); tests/support holds test-only code (job
# types, fakes) linked into the test build only.
SRCS      := $(wildcard worker/*.c worker/*/*.c jobs/*.c)
LIB_SRCS  := $(filter-out worker/main.c,$(SRCS))
SUPPORT_SRCS := $(wildcard tests/support/*.c)
OBJS      := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
TOBJS     := $(LIB_SRCS:%.c=$(BUILD)/tobj/%.o) $(SUPPORT_SRCS:%.c=$(BUILD)/tobj/%.o)
# What the test binaries link: every test-build object but version.o, whose
# one function only main.c's command table calls. It holds the build's
# identity (the commit), which changes with every commit: linked into them
# all, it would relink every test binary after each commit. test_cli, which
# reads the identity, depends on the header itself (below).
TEST_LINK_OBJS := $(filter-out $(BUILD)/tobj/worker/cmd/version.o,$(TOBJS))
HDRS      := $(wildcard include/*.h worker/*.h worker/*/*.h jobs/*.h tests/support/*.h)

# Every folder sees include/ (the seams between parts), its own folder, and
# the rooms below it whose headers it uses, nothing else, so a private header
# cannot be reached from another room: the commands see the daemon, never
# the reverse; main.c sees the table of commands. tests/check-deps.sh holds
# the same rules for what the sources #include.
dir_incs = $(strip \
	$(if $(filter worker/base/%,$1),-Iworker/base, \
	$(if $(filter worker/storage/%,$1),-Iworker/storage, \
	$(if $(filter worker/telemetry/%,$1),-Iworker/telemetry, \
	$(if $(filter worker/migrate/%,$1),-Iworker/migrate, \
	$(if $(filter worker/yaml/%,$1),-Iworker/yaml, \
	$(if $(filter worker/config/%,$1),-Iworker/config, \
	$(if $(filter worker/schedule/%,$1),-Iworker/schedule -Iworker -Iworker/telemetry, \
	$(if $(filter worker/runtime/%,$1),-Iworker/runtime -Iworker -Iworker/telemetry -Iworker/schedule, \
	$(if $(filter worker/cmd/%,$1),$(CMD_INCS), \
	$(if $(filter worker/main.c,$1),-Iworker/cmd, \
	$(if $(filter worker/%,$1),-Iworker, \
	$(if $(filter jobs/%,$1),-Ijobs, \
	$(if $(filter tests/support/%,$1),-Itests/support))))))))))))))
CMD_INCS := -Iworker/cmd -Iworker -Iworker/runtime -Iworker/schedule -Iworker/migrate -Iworker/telemetry
# Tests reach into every room: they test private modules directly.
TEST_INCS := $(CMD_INCS) -Iworker/config -Iworker/yaml -Iworker/storage -Ijobs -Itests/support

UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%)
INTEG_SRCS := $(wildcard tests/integration/test_*.c)
INTEG_BINS := $(INTEG_SRCS:tests/integration/%.c=$(BUILD)/tests/integration/%)
# Every other .c file in a test folder is support code linked into each test.
UNIT_SUPPORT  := $(filter-out $(UNIT_SRCS),$(wildcard tests/unit/*.c))
INTEG_SUPPORT := $(filter-out $(INTEG_SRCS),$(wildcard tests/integration/*.c))
# The tests' own helpers, compiled once and linked into each binary (compiled
# into each of the 56 integration binaries, their 6,000 lines were most of a
# fresh test build's 4 minutes).
UNIT_SUPPORT_OBJS  := $(UNIT_SUPPORT:%.c=$(BUILD)/tsup/%.o)
INTEG_SUPPORT_OBJS := $(INTEG_SUPPORT:%.c=$(BUILD)/tsup/%.o)
# Test tools: one self-contained program per file (tests/tools/NAME.c ->
# BUILD/tests/tools/NAME), run by the tests and the benchmark as processes.
TOOL_SRCS := $(wildcard tests/tools/*.c)
TOOL_BINS := $(TOOL_SRCS:tests/tools/%.c=$(BUILD)/tests/tools/%)

.PHONY: all deps test test-run test-build rules-test unit integration asan valgrind valgrind-run chaos chaos-run demo demo-run bench bench-run install clean
.DELETE_ON_ERROR:
# Keep the test-build objects: they are intermediates of the test binaries.
.SECONDARY:

all: $(BUILD)/ecworker

# ---- the build's identity (ecworker version) ----------------------------------
# The git commit (12 digits, "-dirty" when tracked files differ from it;
# "unknown" outside a clone; ECW_COMMIT=... overrides, as the image build
# does), the compiler and the libraries' versions from pkg-config, in a
# generated header that only worker/cmd/version.c includes. It is rewritten
# only when a value changes, so a build without changes rebuilds nothing.
ECW_COMMIT ?= $(shell c=$$(git rev-parse --short=12 HEAD 2>/dev/null) && \
	{ git diff --quiet HEAD 2>/dev/null || c=$$c-dirty; }; echo $${c:-unknown})
BUILD_INFO := $(BUILD)/gen/ecw_build_info.h
# Only these characters reach the header, whatever a variable holds.
safe_str = $(shell printf '%s' '$(subst ','',$1)' | tr -cd 'A-Za-z0-9 ._+~:()/-' | cut -c1-80)

.PHONY: FORCE
$(BUILD_INFO): FORCE
	@mkdir -p $(dir $@)
	@{ echo '/* Written by the Makefile: the build'"'"'s identity (worker/cmd/version.c). */'; \
	  echo '#define ECW_BUILD_COMMIT "$(call safe_str,$(ECW_COMMIT))"'; \
	  echo '#define ECW_BUILD_COMPILER "$(call safe_str,$(shell $(CC) --version 2>/dev/null | head -n1))"'; \
	  echo '#define ECW_BUILT_WITH_LIBCURL "$(call safe_str,$(shell pkg-config --modversion libcurl))"'; \
	  echo '#define ECW_BUILT_WITH_OPENSSL "$(call safe_str,$(shell pkg-config --modversion openssl))"'; \
	  echo '#define ECW_BUILT_WITH_JSON_C "$(call safe_str,$(shell pkg-config --modversion json-c))"'; \
	  echo '#define ECW_BUILT_WITH_YAML "$(call safe_str,$(shell pkg-config --modversion yaml-0.1))"'; \
	  echo '#define ECW_BUILT_WITH_EXPAT "$(call safe_str,$(shell pkg-config --modversion expat))"'; \
	  echo '#define ECW_BUILT_WITH_LIBMICROHTTPD "$(call safe_str,$(shell pkg-config --modversion libmicrohttpd))"'; \
	  echo '#define ECW_BUILT_WITH_ZLIB "$(call safe_str,$(shell pkg-config --modversion zlib))"'; \
	} >$@.tmp && { cmp -s $@.tmp $@ && rm -f $@.tmp || mv -f $@.tmp $@; }

$(BUILD)/obj/worker/cmd/version.o $(BUILD)/tobj/worker/cmd/version.o: $(BUILD_INFO)
# test_cli compares `ecworker version` with the header's values.
$(BUILD)/tests/integration/test_cli: $(BUILD_INFO)

# The same program with the test-only seams and job types (tests/support/test_jobs.c),
# for the runtime's process-level tests. Never installed.
$(BUILD)/ecworker-test: $(BUILD)/tobj/worker/main.o $(TOBJS)
	$(SAY) "  LINK    $@"
	$(Q)$(CC) $(CFLAGS) $(SANFLAGS) $(HARDEN_LDFLAGS) -o $@ $^ $(ECW_LIBS)

$(BUILD)/ecworker: $(BUILD)/obj/worker/main.o $(OBJS)
	$(SAY) "  LINK    $@"
	$(Q)$(CC) $(CFLAGS) $(SANFLAGS) $(HARDEN_LDFLAGS) -o $@ $^ $(ECW_LIBS)

$(BUILD)/obj/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(SAY) "  CC      $<"
	$(Q)$(CC) $(CFLAGS) $(ECW_CFLAGS) $(call dir_incs,$<) -c -o $@ $<

# The test build: the same sources with the test-only seams compiled in.
$(BUILD)/tobj/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(SAY) "  CC      $< (test build)"
	$(Q)$(CC) $(CFLAGS) $(ECW_CFLAGS) $(call dir_incs,$<) -DECW_TESTING -c -o $@ $<

# The tests' helpers (UNIT_SUPPORT, INTEG_SUPPORT), once each.
$(BUILD)/tsup/tests/unit/%.o: tests/unit/%.c $(HDRS) $(wildcard tests/unit/*.h)
	@mkdir -p $(dir $@)
	$(SAY) "  CC      $< (test support)"
	$(Q)$(CC) $(CFLAGS) $(ECW_CFLAGS) -DECW_TESTING $(TEST_INCS) -Itests/unit -c -o $@ $<

$(BUILD)/tsup/tests/integration/%.o: tests/integration/%.c $(HDRS) $(wildcard tests/integration/*.h)
	@mkdir -p $(dir $@)
	$(SAY) "  CC      $< (test support)"
	$(Q)$(CC) $(CFLAGS) $(ECW_CFLAGS) -DECW_TESTING $(TEST_INCS) -Itests/integration -c -o $@ $<

# Unit tests wrap the sleep so backoff is checked without waiting, and the
# clocks so token refresh is checked without the hours passing and {now:...}
# keys and purge ages against a fixed date.
$(BUILD)/tests/unit/%: tests/unit/%.c $(UNIT_SUPPORT_OBJS) $(TEST_LINK_OBJS) $(HDRS) $(wildcard tests/unit/*.h)
	@mkdir -p $(dir $@)
	$(SAY) "  TEST    $@"
	$(Q)$(CC) $(CFLAGS) $(ECW_CFLAGS) -DECW_TESTING $(TEST_INCS) -Itests/unit -o $@ $< $(UNIT_SUPPORT_OBJS) $(TEST_LINK_OBJS) \
		-Wl,--wrap=ecw_clock_sleep_ms -Wl,--wrap=ecw_clock_now_ms -Wl,--wrap=ecw_clock_wall_ms $(TEST_LIBS) $(ECW_LIBS)

$(BUILD)/tests/integration/%: tests/integration/%.c $(INTEG_SUPPORT_OBJS) $(TEST_LINK_OBJS) $(HDRS) \
		$(wildcard tests/integration/*.h)
	@mkdir -p $(dir $@)
	$(SAY) "  TEST    $@"
	$(Q)$(CC) $(CFLAGS) $(ECW_CFLAGS) -DECW_TESTING $(TEST_INCS) -Itests/integration -o $@ $< $(INTEG_SUPPORT_OBJS) $(TEST_LINK_OBJS) \
		$(TEST_LIBS) $(ECW_LIBS)

$(BUILD)/tests/tools/%: tests/tools/%.c
	@mkdir -p $(dir $@)
	$(SAY) "  TOOL    $@"
	$(Q)$(CC) $(CFLAGS) -std=c11 -Wall -Wextra -Werror -D_DEFAULT_SOURCE $(SANFLAGS) -o $@ $< -lpthread -lm

# ---- dependencies --------------------------------------------------------

APT_PKGS := build-essential pkg-config libcurl4-openssl-dev libssl-dev libjson-c-dev \
	libyaml-dev libcmocka-dev libexpat1-dev libmicrohttpd-dev zlib1g-dev openssl clang-format
NODE_STAMP := tests/node_modules/.ecw-installed

PROMTOOL := $(BUILD)/tools/usr/bin/promtool

deps: $(NODE_STAMP)
	@./tests/deps.sh apt $(APT_PKGS) $(FUZZ_APT_PKGS)
	@./tests/deps.sh promtool $(BUILD)/tools

$(NODE_STAMP): tests/package.json tests/package-lock.json
	@./tests/deps.sh node
	cd tests && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# ---- tests ---------------------------------------------------------------

test: deps
	@$(MAKE) --no-print-directory test-run

asan:
	@$(MAKE) --no-print-directory test SANITIZE=1

# The builds inside make test use every core, unless the caller gave -j
# (then its jobserver shares them out).
BUILD_JOBS = $(if $(findstring -j,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 1))

# The checks of the sources come first: they take seconds, the build and the
# tests minutes; those that read the build (check-circles, check-hardening,
# and check-docs, which runs the program) follow it. The short fuzz runs come
# last; the sanitizer build skips them (the fuzz build is ASan + UBSan already).
# Each phase is timed (tests/phase-time.sh), and the times printed at the end.
PHASES = $(BUILD)/test-phases.txt
# The sanitizer build's integration binaries run one at a time unless the
# caller says otherwise: each is twice as slow and as hungry, and two side by
# side on two cores would stretch the 2 s leases some tests hold.
ASAN_INTEG_JOBS = $(if $(filter 1,$(SANITIZE)),ECW_TEST_INTEG_JOBS=$${ECW_TEST_INTEG_JOBS:-1})
phase  = ./tests/phase-time.sh $(PHASES) $1

test-run:
	@rm -f $(PHASES)
	@$(call phase,check-tests) $(MAKE) --no-print-directory check-tests
	@$(call phase,check-deps) $(MAKE) --no-print-directory check-deps
	@$(call phase,check-format) $(MAKE) --no-print-directory check-format
	@$(call phase,test-build) $(MAKE) --no-print-directory $(BUILD_JOBS) test-build
	@$(call phase,check-circles) $(MAKE) --no-print-directory check-circles
	@$(call phase,check-names) $(MAKE) --no-print-directory check-names
ifneq ($(SANITIZE),1)
	@$(call phase,check-hardening) $(MAKE) --no-print-directory check-hardening
endif
	@$(call phase,check-docs) $(MAKE) --no-print-directory check-docs
	@$(call phase,run-tests) env $(ASAN_INTEG_JOBS) ./tests/run-tests.sh $(BUILD)
ifneq ($(SANITIZE),1)
	@$(call phase,fuzz-build) $(MAKE) --no-print-directory $(BUILD_JOBS) fuzz-build
	@$(call phase,fuzz-short) $(MAKE) --no-print-directory fuzz-short
	@$(call phase,rules-test) $(MAKE) --no-print-directory rules-test
endif
	@./tests/phase-time.sh --report $(PHASES)

test-build: $(BUILD)/ecworker $(BUILD)/ecworker-test $(UNIT_BINS) $(INTEG_BINS) $(TOOL_BINS)

# The Prometheus alerting rules shipped in deploy/prometheus: promtool's
# check, and their unit tests (each alert raised where it must be, and only
# there). Then the Grafana dashboard in deploy/grafana: its queries name only
# metrics and labels worker/telemetry/metrics.c exports and parse, its ids are unique
# and its variables defined (tests/check-dashboard.js).
rules-test:
	@test -x $(PROMTOOL) || { echo "rules-test: $(PROMTOOL) is missing: run make deps" >&2; exit 1; }
	@$(PROMTOOL) check rules deploy/prometheus/ecworker-alerts.yaml >/dev/null
	@cd deploy/prometheus && { out="$$($(abspath $(PROMTOOL)) test rules ecworker-alerts.test.yaml 2>&1)" || \
		{ echo "$$out" >&2; exit 1; }; }
	@echo "==== rules: deploy/prometheus/ecworker-alerts.yaml checked, its unit tests passed (promtool)"
	@node tests/check-dashboard.js deploy/grafana/ecworker-dashboard.json worker/telemetry/metrics.c $(PROMTOOL) >/dev/null
	@echo "==== dashboard: deploy/grafana/ecworker-dashboard.json names only the worker's metrics, parses (promtool)"

# Memcheck on the unit tests (the integration tests run under ASan instead:
# valgrind's slowdown would turn their timeouts into failures). Any error, and
# any definite, indirect or possible leak, fails the binary; tests/valgrind.supp
# holds the one false report it suppresses (and why).
VALGRIND := valgrind --quiet --error-exitcode=99 --track-origins=yes --leak-check=full \
	--suppressions=$(abspath tests/valgrind.supp) \
	--show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible

valgrind: deps
	@./tests/deps.sh apt valgrind
	@$(MAKE) --no-print-directory $(BUILD_JOBS) valgrind-run

valgrind-run: $(UNIT_BINS)
	@ECW_TEST_WRAPPER="$(VALGRIND)" ./tests/run-tests.sh --unit-only $(BUILD)

unit: $(UNIT_BINS)
	@./tests/run-tests.sh --unit-only $(BUILD)

integration: $(BUILD)/ecworker $(BUILD)/ecworker-test $(INTEG_BINS) $(TOOL_BINS)
	@./tests/run-tests.sh --integration-only $(BUILD)

# ---- chaos -----------------------------------------------------------------
# test_chaos with its full-size case (ECW_CHAOS=full): 4 workers, 3,000
# messages, a worker SIGKILLed every 300 ms, the workers' traffic through
# tests/tools/faultproxy; `make test` runs only its small cases.

chaos: deps
	@$(MAKE) --no-print-directory chaos-run

chaos-run: $(BUILD)/ecworker-test $(BUILD)/tests/integration/test_chaos $(TOOL_BINS)
	@ECW_TESTS=test_chaos ECW_CHAOS=full ECW_TEST_TIMEOUT=$${ECW_TEST_TIMEOUT:-1800} \
		./tests/run-tests.sh --integration-only $(BUILD)

# ---- fuzzing ---------------------------------------------------------------
#   make fuzz [FUZZ_SECONDS=60] [FUZZ_TARGETS="fuzz_message ..."]
#   make fuzz-short  about FUZZ_SHORT_SECONDS per target (part of make test)
# One libFuzzer target per tests/fuzz/fuzz_*.c, linked against the library
# sources compiled with clang under ASan + UBSan + fuzzer coverage in their
# own directory. Each target runs on a scratch copy of its seed corpus
# (tests/fuzz/corpus/NAME/ is only read); crashes land in $(FUZZ_BUILD)/artifacts/.

FUZZ_APT_PKGS := clang libclang-rt-dev
FUZZ_CC       ?= clang
FUZZ_BUILD    := $(BUILD)/fuzz
FUZZ_SANFLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer -g -O1
FUZZ_SECONDS  ?= 60
FUZZ_SHORT_SECONDS ?= 6
FUZZ_SRCS     := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS     := $(FUZZ_SRCS:tests/fuzz/%.c=$(FUZZ_BUILD)/%)
# Every library object but version.o (as TEST_LINK_OBJS: a commit relinks no target).
FUZZ_OBJS     := $(filter-out $(FUZZ_BUILD)/obj/worker/cmd/version.o,$(LIB_SRCS:%.c=$(FUZZ_BUILD)/obj/%.o))
# The library's flags without the SANITIZE=1 and hardening ones (the fuzz build has its own).
FUZZ_CFLAGS    = $(filter-out $(SANFLAGS) $(HARDEN_CFLAGS),$(ECW_CFLAGS)) $(FUZZ_SANFLAGS)

.PHONY: fuzz fuzz-run fuzz-short fuzz-build

fuzz-build: $(FUZZ_BINS)

fuzz: deps
	@$(MAKE) --no-print-directory fuzz-run

fuzz-run: $(FUZZ_BINS)
	@./tests/fuzz/run-fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-short: $(FUZZ_BINS)
	@./tests/fuzz/run-fuzz.sh $(FUZZ_BUILD) $(FUZZ_SHORT_SECONDS) $(FUZZ_TARGETS)

$(FUZZ_BUILD)/obj/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(SAY) "  CC      $< (fuzz build)"
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(call dir_incs,$<) -c -o $@ $<

$(FUZZ_BUILD)/%: tests/fuzz/%.c tests/fuzz/fuzz.h $(FUZZ_OBJS) $(HDRS)
	@mkdir -p $(dir $@)
	$(SAY) "  FUZZ    $@"
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(TEST_INCS) -Itests/fuzz -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJS) $(ECW_LIBS)

# ---- demo ------------------------------------------------------------------

demo: deps
	@$(MAKE) --no-print-directory demo-run

demo-run: $(BUILD)/ecworker
	@./tests/demo.sh $(BUILD)/ecworker

# ---- benchmark -------------------------------------------------------------

# One table on stdout and $(BUILD)/bench/bench.json. Run it alone on the
# machine: it measures CPU time and throughput (about a quarter of an hour).
bench: deps
	@$(MAKE) --no-print-directory bench-run

bench-run: $(BUILD)/ecworker $(BUILD)/tests/tools/faultproxy $(BUILD)/tests/tools/rtfloor
	@node tests/bench/bench.js --build $(BUILD)

# ---- other Debian releases -------------------------------------------------
#   make distro-check DISTRO=trixie|bookworm   the project built (-Werror, every
#        test binary), its source checks and unit tests run inside a clean
#        debootstrap root filesystem of that release, after the Makefile's own
#        `make deps` there (tests/distro/distro-check.sh; needs root).
#        DISTRO_TESTS=all runs the whole `make test` there. .ci/run runs it for
#        the release that is not the host's.

DISTRO ?= trixie
.PHONY: distro-check

distro-check:
	@DISTRO_TESTS=$(DISTRO_TESTS) ./tests/distro/distro-check.sh $(DISTRO) build/distro

# ---- misc ------------------------------------------------------------------

# The binary, a hardened systemd unit (its paths follow PREFIX) and the
# documented configuration as an example; /etc is left to the administrator
# (deploy/systemd/ecworker.service says how).
install: $(BUILD)/ecworker
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/systemd/system $(DESTDIR)$(PREFIX)/share/ecworker \
		$(DESTDIR)$(PREFIX)/share/doc/ecworker
	install -m 755 $(BUILD)/ecworker $(DESTDIR)$(PREFIX)/bin/ecworker
	sed 's|/usr/local|$(PREFIX)|g' deploy/systemd/ecworker.service >$(DESTDIR)$(PREFIX)/lib/systemd/system/ecworker.service
	chmod 644 $(DESTDIR)$(PREFIX)/lib/systemd/system/ecworker.service
	install -m 644 config/ecworker.yaml $(DESTDIR)$(PREFIX)/share/ecworker/ecworker.yaml
	install -m 644 README.md $(DESTDIR)$(PREFIX)/share/doc/ecworker/README.md
	install -m 644 deploy/README.md $(DESTDIR)$(PREFIX)/share/doc/ecworker/DEPLOYMENT.md
	install -m 644 config/README.md $(DESTDIR)$(PREFIX)/share/doc/ecworker/CONFIGURATION.md
	install -m 644 jobs/README.md $(DESTDIR)$(PREFIX)/share/doc/ecworker/JOBS.md
	install -m 644 worker/README.md $(DESTDIR)$(PREFIX)/share/doc/ecworker/OPERATING.md

# ---- container image and deployment files (deploy/) ----------------------
#   make image        build deploy/Dockerfile with podman as $(IMAGE), then add
#                     the SBOM labels (deploy/image-sbom-label.sh)
#   make image-pin    pin the Dockerfile's base images (BUILD_IMAGE, RUNTIME_IMAGE)
#                     to the digests a registry reports now (deploy/image-pin.sh)
#   make image-bases  debian:trixie and trixie-slim made locally (debootstrap),
#                     for machines that reach Debian's packages but no registry
#                     (IMAGE_RELEASE=bookworm for bookworm and bookworm-slim)
#   make image-test   the image against a real Azurite, and every manifest checked

IMAGE ?= localhost/ecworker:dev
# The build context: the working tree, or e.g. an export of one commit.
IMAGE_CONTEXT ?= .
# docker format: OCI images have no HEALTHCHECK. chroot isolation: builds on
# hosts where the OCI runtime cannot make containers (see deploy/README.md).
IMAGE_BUILD_FLAGS ?= --isolation=chroot --format docker --layers
# The base images; empty keeps the Dockerfile's pinned defaults.
BUILD_IMAGE ?=
RUNTIME_IMAGE ?=
IMAGE_RELEASE ?= trixie

.PHONY: image image-bases image-pin image-test print-version

print-version:
	@echo $(VERSION)

image:
	@command -v podman >/dev/null || { echo "make image: podman is not installed (apt-get install podman buildah)" >&2; exit 1; }
	podman build $(IMAGE_BUILD_FLAGS) -f deploy/Dockerfile -t $(IMAGE) \
		$(if $(BUILD_IMAGE),--build-arg BUILD_IMAGE="$(BUILD_IMAGE)") \
		$(if $(RUNTIME_IMAGE),--build-arg RUNTIME_IMAGE="$(RUNTIME_IMAGE)") \
		--build-arg VERSION="$(VERSION)" \
		--build-arg REVISION="$$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
		--build-arg CREATED="$$(date -u +%Y-%m-%dT%H:%M:%SZ)" $(IMAGE_CONTEXT)
	@IMAGE_BUILD_FLAGS="$(IMAGE_BUILD_FLAGS)" ./deploy/image-sbom-label.sh $(IMAGE)

image-pin:
	@./deploy/image-pin.sh deploy/Dockerfile

image-bases:
	@./tests/image/base-images.sh build/image $(IMAGE_RELEASE)

image-test: deps
	@./tests/image/image-test.sh

# ---- end of container image ----------------------------------------------

# ---- Debian package (deploy/debian/) ---------------------------------------
#   make deb        build/deb/ecworker_$(VERSION)_<arch>.deb from build/ecworker
#                   (deploy/debian/build.sh: dpkg-deb --root-owner-group, the
#                   Depends from dpkg-shlibdeps)
#   make deb-check  lintian on it: any tag not overridden in
#                   deploy/debian/lintian-overrides fails
#   make deb-test   installs it into a fresh debootstrap root filesystem and runs
#                   the unit's command lines against Azurite (tests/package/deb-test.sh)

DEB_DIR := build/deb
DEB     = $(DEB_DIR)/ecworker_$(VERSION)_$(shell dpkg --print-architecture).deb
# lintian too: build.sh keeps only the overrides of tags this release's lintian knows.
DEB_APT_PKGS := dpkg-dev man-db lintian

.PHONY: deb deb-build deb-check deb-test

# The build's libraries and dpkg-dev first (a sub-make, as for test: pkg-config
# runs once they are there); then the normal hardened build, never the
# sanitizer one.
deb:
ifeq ($(SANITIZE),1)
	$(error make deb packages the normal build: run it without SANITIZE=1)
endif
	@./tests/deps.sh apt $(APT_PKGS) $(DEB_APT_PKGS)
	@$(MAKE) --no-print-directory deb-build

deb-build: $(BUILD)/ecworker
	@$(MAKE) --no-print-directory check-hardening
	@./deploy/debian/build.sh $(BUILD)/ecworker $(VERSION) $(DEB_DIR)

# Any lintian tag up to info fails, pedantic ones are shown; the overridden
# ones are listed after. As nobody when run as root and nobody can read the
# package (lintian asks not to run as root).
LINTIAN := lintian --fail-on error,warning,info --display-info --pedantic

deb-check: deb
	@echo "==== $$(lintian --version) on $(DEB)"
	@if [ "$$(id -u)" = 0 ] && runuser -u nobody -- test -r $(DEB); then \
		runuser -u nobody -- $(LINTIAN) $(DEB); else $(LINTIAN) $(DEB); fi
	@echo "==== lintian: no tag; overridden (reasons in deploy/debian/lintian-overrides):"
	@dpkg-deb --fsys-tarfile $(DEB) | tar -xOf - ./usr/share/lintian/overrides/ecworker 2>/dev/null | \
		sed -n 's/^ecworker: /   /p'

deb-test: deps deb-check
	@./tests/deps.sh apt debootstrap util-linux systemd
	@./tests/package/deb-test.sh $(DEB)

# ---- end of Debian package -------------------------------------------------

# ---- style -------------------------------------------------------------------
#   make format        rewrites FORMAT_SRCS with clang-format and the committed
#                      .clang-format (tests/.clang-format adds the tests' own)
#   make check-format  fails when one of them differs, naming it (make test)
#   make check-deps    fails when a source includes a header its folder may not
#                      see: the rules are at the top of tests/check-deps.sh (make test)
#   make check-circles fails when files of the product call each other in a
#                      circle (A uses a symbol B defines, B one A defines, read
#                      from the objects with nm) not listed in
#                      tests/circles-known.txt, naming its files and, per
#                      arrow, the symbols; and when a listed circle is gone
#                      (tests/check-circles.js; make test, after the build)
#   make check-names   fails when a product file exports a name without its
#                      file's prefix (clock.c: ecw_clock_*; a part of a module,
#                      node_error.c, may use its module's, ecw_node_*), naming
#                      it (tests/check-names.js, nm; make test, after the build)
#   make circles-known rewrites tests/circles-known.txt with today's circles:
#                      after breaking one, or moving files (review the diff)
#   make check-tests   shows the checks fail on a deliberate violation and
#                      pass on a clean tree (tests/check-tests.sh; make test)
#   make check-docs    fails when a YAML example of a Markdown page does not pass
#                      check-config (tests/check-doc-examples.sh), or when the man
#                      page and a command's --help name different options
#                      (tests/check-man.sh); it needs the program (make test)
#
# The formatter is Debian's clang-format (make deps installs it): 14 on Debian
# 12, 19 on Debian 13. The configuration uses only options both know, and on
# this tree their output differs in one construct: 14 lays out a macro whose
# body is a brace initializer (#define WOPTS_DEFAULT {30, 4, 16}) as a block
# over four lines, 19 keeps it on one (7 macros today, 30 places). So a tree
# formatted by one fails check-format under the other there, and only there;
# check-format prints the version it ran for that reason. Format with the
# version CI runs (Debian 12: 14), or keep such macros between
# /* clang-format off */ and /* clang-format on */ so that both agree (the
# tree does: make distro-check DISTRO=trixie runs check-format with 19).
# CLANG_FORMAT=clang-format-19 picks another installed one.

# Every C file the project writes, in every folder: what format rewrites and
# check-format checks.
FORMAT_SRCS := $(sort $(shell find worker jobs include tests/unit tests/integration tests/support \
	tests/fuzz tests/tools -name '*.[ch]' 2>/dev/null))
CLANG_FORMAT ?= clang-format

.PHONY: format check-format check-deps check-circles check-names circles-known check-tests check-docs check-hardening hardening-flags

format:
	$(SAY) "  FORMAT  $(words $(FORMAT_SRCS)) files ($$($(CLANG_FORMAT) --version))"
	$(Q)$(CLANG_FORMAT) -i $(FORMAT_SRCS)

check-format:
	@CLANG_FORMAT=$(CLANG_FORMAT) ./tests/check-format.sh $(FORMAT_SRCS)

check-deps:
	@./tests/check-deps.sh

# The product's objects (OBJS: every source but main.c, which nothing calls),
# wherever their sources live: the script maps $(BUILD)/obj/X.o back to X.c.
CIRCLES_KNOWN := tests/circles-known.txt

check-circles: $(BUILD)/ecworker
	@node tests/check-circles.js --known $(CIRCLES_KNOWN) --objdir $(BUILD)/obj $(OBJS)

check-names: $(BUILD)/ecworker
	@node tests/check-names.js --objdir $(BUILD)/obj $(OBJS)

circles-known: $(BUILD)/ecworker
	@node tests/check-circles.js --known $(CIRCLES_KNOWN) --objdir $(BUILD)/obj --update $(OBJS)

check-tests:
	@CLANG_FORMAT=$(CLANG_FORMAT) ./tests/check-tests.sh

# The docs against the program: the examples of every page, the man page.
check-docs: $(BUILD)/ecworker
	@./tests/check-doc-examples.sh $(BUILD)/ecworker
	@./tests/check-man.sh $(BUILD)/ecworker deploy/debian/ecworker.1

# The hardening flags (HARDEN_CFLAGS, at the top) read back from the program.
check-hardening: $(BUILD)/ecworker
ifeq ($(HARDENED),)
	@echo "check-hardening: this build has no hardening flags (SANITIZE=1 or -O0): nothing to check"
else
	@./tests/check-hardening.sh $(BUILD)/ecworker
endif

# For tests/check-tests.sh, which builds small programs with and without each.
hardening-flags:
	@echo '$(HARDEN_CFLAGS)'
	@echo '$(HARDEN_LDFLAGS)'

clean:
	rm -rf build
