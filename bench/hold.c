// SPDX-License-Identifier: GPL-2.0
/*
 * Loads a BPF object file, attaches every program in it and keeps them attached until SIGTERM
 * or SIGINT, printing "attached" once they are: the benchmarks run a workload beside it to
 * measure the floor under a module (empty programs on the module's tracepoints). With PROGRAM
 * names, only those (bench/netstack.py: which of the tracepoints the floor comes from).
 * Ring buffers in the object are drained every 100 ms, as an agent would (bench/flow_sk.bpf.c).
 *
 *   hold OBJECT.bpf.o [PROGRAM...]
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <bpf/libbpf.h>

static int discard(void *ctx, void *data, size_t size)
{
	(void)ctx;
	(void)data;
	(void)size;
	return 0;
}

static bool chosen(const char *name, int argc, char **argv)
{
	if (argc == 2)
		return true;
	for (int i = 2; i < argc; i++)
		if (!strcmp(argv[i], name))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	const struct timespec tick = { 0, 100 * 1000 * 1000 };
	struct ring_buffer *rings = NULL;
	struct bpf_object *obj;
	struct bpf_program *p;
	struct bpf_map *m;
	sigset_t set;
	int n = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: hold OBJECT.bpf.o [PROGRAM...]\n");
		return 2;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "hold: cannot load %s\n", argv[1]);
		return 1;
	}
	bpf_object__for_each_program (p, obj) {
		if (!chosen(bpf_program__name(p), argc, argv))
			continue;
		if (!bpf_program__attach(p)) {
			fprintf(stderr, "hold: cannot attach %s\n", bpf_program__name(p));
			return 1;
		}
		n++;
	}
	if (argc > 2 && n != argc - 2) {
		fprintf(stderr, "hold: %d of the %d programs named are in %s\n", n, argc - 2,
			argv[1]);
		return 1;
	}
	bpf_object__for_each_map (m, obj) {
		if (bpf_map__type(m) != BPF_MAP_TYPE_RINGBUF)
			continue;
		if (!rings)
			rings = ring_buffer__new(bpf_map__fd(m), discard, NULL, NULL);
		else if (ring_buffer__add(rings, bpf_map__fd(m), discard, NULL)) {
			ring_buffer__free(rings);
			rings = NULL;
		}
		if (!rings) {
			fprintf(stderr, "hold: cannot read ring buffer %s\n", bpf_map__name(m));
			return 1;
		}
	}
	printf("attached\n");
	fflush(stdout);
	while (sigtimedwait(&set, NULL, &tick) < 0)
		if (rings)
			ring_buffer__consume(rings);
	ring_buffer__free(rings);
	bpf_object__close(obj);
	return n ? 0 : 1;
}
