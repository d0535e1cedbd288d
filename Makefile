# plumb — see README.md. Targets: all (default), run, test, test-kernels, bench, bench-place,
# soak, install, deb, clean, format.
VERSION    ?= 0.1.0
ARCH       := $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')
BUILD      := build
CC         ?= gcc
CLANG      ?= clang
BPFTOOL    ?= bpftool
PREFIX     ?= /usr/local
DESTDIR    ?=
# make run and make test build with one job per CPU (a fresh build: 30 s serial, 16 s on 2)
NPROC      := $(shell nproc 2>/dev/null || echo 1)

CFLAGS     ?= -O2 -g
CFLAGS     += -Wall -Wextra -Werror -std=gnu11 -D_GNU_SOURCE -DPLUMB_VERSION=\"$(VERSION)\" \
	      -Iinclude -Isrc -I$(BUILD)
LDLIBS     += -lbpf -lelf -lz -lmicrohttpd -ljson-c -lcurl -lmetis -lyaml -lcrypt -lgnutls -lcap -lseccomp -lncursesw -ltinfo -lpthread -lm
BPF_CFLAGS := -target bpf -g -O2 -Wall -Werror -D__TARGET_ARCH_$(ARCH) \
	      -Ibpf/vmlinux/$(ARCH) -Iinclude -Ibpf

BPF_MODULES := io flow sched blk netstack
BPF_OBJS    := $(BPF_MODULES:%=$(BUILD)/%.bpf.o)
SKELS       := $(BPF_MODULES:%=$(BUILD)/%.skel.h)

LIB_SRCS := $(filter-out src/main.c,$(wildcard src/*.c src/*/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)
UNIT_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))

.PHONY: all deps run test test-unit test-integration test-kernels bench bench-place soak install clean fuzz \
	format check-root

all: $(BUILD)/plumb

$(BUILD)/%.bpf.o: bpf/%.bpf.c $(wildcard include/*.h bpf/*.bpf.h) | $(BUILD)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/%.skel.h: $(BUILD)/%.bpf.o
	$(BPFTOOL) gen skeleton $< name $*_bpf > $@

$(BUILD)/src/%.o: src/%.c $(SKELS) $(wildcard src/*.h src/*/*.h include/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libplumb.a: $(LIB_OBJS)
	$(AR) rcs $@ $^

$(BUILD)/plumb: $(BUILD)/src/main.o $(BUILD)/libplumb.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libplumb.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libplumb.a -o $@ $(LDLIBS) -lcmocka

# the integration tests' workload: static, so no dynamic loader reads the tested mounts
$(BUILD)/iowork $(BUILD)/schedwork $(BUILD)/waitwork $(BUILD)/diagwork $(BUILD)/network $(BUILD)/delayline: $(BUILD)/%: tests/integration/%.c | $(BUILD)
	$(CC) -O2 -static -pthread -Wall -Wextra -Werror $< -o $@

$(BUILD):
	mkdir -p $@

check-root:
	@if [ "$$(id -u)" -ne 0 ]; then \
		echo "make $(MAKECMDGOALS): needs root (CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN); run: sudo make $(MAKECMDGOALS)" >&2; \
		exit 1; fi

deps: check-root
	./scripts/install-deps.sh

run: deps
	$(MAKE) -j$(NPROC) all
	./$(BUILD)/plumb agent

test: deps
	$(MAKE) -j$(NPROC) all $(UNIT_TESTS) $(FUZZERS) $(BUILD)/iowork $(BUILD)/schedwork $(BUILD)/waitwork $(BUILD)/diagwork $(BUILD)/network $(BUILD)/delayline
	./tests/run-all.sh

test-unit: $(UNIT_TESTS)
	./tests/run-all.sh unit

test-integration: check-root all $(BUILD)/iowork $(BUILD)/schedwork $(BUILD)/waitwork $(BUILD)/diagwork $(BUILD)/network $(BUILD)/delayline
	./tests/run-all.sh integration

# libFuzzer targets (fuzz/*.c) on the parsers they name, with ASan and UBSan; `make fuzz` runs
# each for FUZZ_SECONDS from its corpus (fuzz/corpus/NAME: seeds and every crash found, kept
# as regressions); `make test` runs each for 6 s (tests/fuzz.sh)
FUZZERS := $(BUILD)/fuzz/webconfig $(BUILD)/fuzz/http
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-std=gnu11 -D_GNU_SOURCE -DPLUMB_VERSION=\"$(VERSION)\" -Iinclude -Isrc
FUZZ_SECONDS ?= 60

$(BUILD)/fuzz/webconfig: fuzz/webconfig.c src/export/webconfig.c src/export/webconfig.h
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_CFLAGS) $(filter %.c,$^) -o $@ -lyaml -lcrypt

$(BUILD)/fuzz/http: fuzz/http.c src/export/http.c src/export/prom.c src/export/webconfig.c src/log.c \
		src/export/http.h src/export/prom.h src/export/webconfig.h
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_CFLAGS) $(filter %.c,$^) -o $@ -lmicrohttpd -lgnutls -lyaml -lcrypt -lbpf -lpthread -lm

fuzz: deps
	$(MAKE) $(FUZZERS)
	./tests/fuzz.sh $(FUZZ_SECONDS)

# the integration tests on Debian's 6.1 and 6.12 kernels (qemu guests) and on this host's
test-kernels: check-root all $(BUILD)/iowork $(BUILD)/schedwork $(BUILD)/waitwork $(BUILD)/diagwork $(BUILD)/network $(BUILD)/delayline
	./tests/vm/test-kernels.sh $(TEST_KERNELS_OPTS)

$(BUILD)/floor.bpf.o $(BUILD)/flow_floor.bpf.o $(BUILD)/sched_floor.bpf.o $(BUILD)/netstack_floor.bpf.o $(BUILD)/flow_sk.bpf.o $(BUILD)/access.bpf.o: $(BUILD)/%.bpf.o: bench/%.bpf.c $(wildcard include/*.h bpf/*.bpf.h) | $(BUILD)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

# bench/flow.py --probe: the socket-storage probe with a cookie index beside it
$(BUILD)/flow_sk_index.bpf.o: bench/flow_sk.bpf.c | $(BUILD)
	$(CLANG) $(BPF_CFLAGS) -DPROBE_INDEX -c $< -o $@

$(BUILD)/hold: bench/hold.c
	$(CC) $(CFLAGS) $< -o $@ -lbpf -lelf -lz

$(BUILD)/hotpath: bench/hotpath.c $(BUILD)/io.skel.h $(BUILD)/floor.skel.h $(BUILD)/libplumb.a
	$(CC) $(CFLAGS) $< $(BUILD)/libplumb.a -o $@ $(LDLIBS)

# bench/place.py's baseline (a genetic algorithm) and exhaustive search, on place.c's parser
$(BUILD)/place_ga $(BUILD)/place_exact: $(BUILD)/%: bench/%.c $(BUILD)/libplumb.a
	$(CC) $(CFLAGS) $< $(BUILD)/libplumb.a -o $@ $(LDLIBS)

bench: deps
	$(MAKE) all $(BUILD)/hotpath $(BUILD)/hold $(BUILD)/access.bpf.o $(BUILD)/flow_floor.bpf.o $(BUILD)/sched_floor.bpf.o $(BUILD)/netstack_floor.bpf.o $(BUILD)/flow_sk.bpf.o $(BUILD)/flow_sk_index.bpf.o $(BUILD)/place_ga \
		$(BUILD)/place_exact
	./bench/run-all.sh

# the agent under churn for SOAK_SECONDS (600): processes, TCP connections, cgroups; RSS,
# map fill, lost events and scrape time over time, in bench/results/soak.md
soak: deps all $(BUILD)/soak
	python3 bench/soak.py

$(BUILD)/soak: bench/soak.c | $(BUILD)
	$(CC) -O2 -pthread -Wall -Wextra -Werror $< -o $@

# plumb place against the GA: CPU only, no root, no BPF
bench-place: all $(BUILD)/place_ga $(BUILD)/place_exact
	python3 bench/place.py

# sbin, as the .deb has it: a daemon that needs root; the unit's ExecStart follows PREFIX
install: all
	install -D -m 0755 $(BUILD)/plumb $(DESTDIR)$(PREFIX)/sbin/plumb
	install -D -m 0644 docs/plumb.8 $(DESTDIR)$(PREFIX)/share/man/man8/plumb.8
	install -d $(DESTDIR)/etc/systemd/system
	sed 's|/usr/sbin/plumb|$(PREFIX)/sbin/plumb|' deploy/plumb.service \
		> $(DESTDIR)/etc/systemd/system/plumb.service
	chmod 0644 $(DESTDIR)/etc/systemd/system/plumb.service

# Debian package build/plumb_$(VERSION)-$(DEB_REVISION)_ARCH.deb, reproducible: file dates from
# the last commit (docs/deploy.md); checked with lintian by tests/integration/test_deploy.py
DEB_REVISION ?= 1
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
.PHONY: deb
deb: all
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) ./scripts/make-deb.sh $(BUILD)/plumb \
		$(VERSION)-$(DEB_REVISION) $(BUILD)

format:
	clang-format -i bpf/*.bpf.c include/*.h src/*.c src/*.h src/*/*.c src/*/*.h tests/unit/*.c

clean:
	rm -rf $(BUILD)

.SECONDARY: $(BPF_OBJS) $(SKELS) $(BUILD)/floor.bpf.o $(BUILD)/flow_floor.bpf.o $(BUILD)/sched_floor.bpf.o $(BUILD)/netstack_floor.bpf.o $(BUILD)/flow_sk.bpf.o $(BUILD)/flow_sk_index.bpf.o $(BUILD)/floor.skel.h
