// SPDX-License-Identifier: GPL-2.0
/*
 * Loads a BPF object file, attaches every program in it and keeps them attached until SIGTERM
 * or SIGINT, printing "attached" once they are: the benchmarks run a workload beside it to
 * measure the floor under a module (empty programs on the module's tracepoints). With PROGRAM
 * names, only those (bench/netstack.py: which of the tracepoints the floor comes from).
 *
 *   hold OBJECT.bpf.o [PROGRAM...]
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <bpf/libbpf.h>

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
	struct bpf_object *obj;
	struct bpf_program *p;
	sigset_t set;
	int sig, n = 0;

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
	printf("attached\n");
	fflush(stdout);
	sigwait(&set, &sig);
	bpf_object__close(obj);
	return n ? 0 : 1;
}
