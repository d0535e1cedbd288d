// SPDX-License-Identifier: GPL-2.0
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "identity/workload.h"

/* Container ids and pod uids as runtimes and the kubelet write them. */
#define CID	 "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"
#define CID2	 "3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d"
#define CID_UP	 "CA978112CA1BBDCAFAC231B39A23DC4DA786EFF8147C4E72B9807785AFEE48BB"
#define CID_63	 "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48b"
#define UID_SD	 "0b6b7a3c_1f2e_4d5c_9a8b_7c6d5e4f3a21" /* systemd driver: '_' */
#define UID	 "0b6b7a3c-1f2e-4d5c-9a8b-7c6d5e4f3a21"
#define UID_HASH "6b8f3e2a1c0d4e5f9a8b7c6d5e4f3a21" /* static pod: config hash */

struct workload_case {
	const char *path;
	const char *workload;
	const char *container_id;
};

static const struct workload_case cases[] = {
	/* SLURM, cgroup v2 (slurmstepd.scope) and v1 (slurm/, slurm_<host>/) layouts */
	{ "/system.slice/slurmstepd.scope/job_211/step_0/user/task_0", "slurm/211", "" },
	{ "/slurm/uid_1000/job_211/step_batch/task_0", "slurm/211", "" },
	{ "/slurm_node01/uid_1000/job_42/step_extern", "slurm/42", "" },
	{ "/system.slice/slurmstepd.scope/job_7/step_extern/slurm_processes", "slurm/7", "" },
	{ "/system.slice/slurmstepd.scope/job_7", "slurm/7", "" },
	{ "/system.slice/slurmstepd.scope/system", "systemd/slurmstepd.scope", "" },
	{ "/batch/job_12/step_0", "/batch/job_12/step_0", "" },
	{ "/job_12/slurm", "/job_12/slurm", "" },
	{ "/slurm/uid_1000/job_abc", "/slurm/uid_1000/job_abc", "" },
	/* Kubernetes, systemd driver */
	{ "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_SD
	  ".slice/cri-containerd-" CID ".scope",
	  "k8s/" UID, CID },
	{ "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_SD
	  ".slice/crio-" CID ".scope",
	  "k8s/" UID, CID },
	{ "/kubepods.slice/kubepods-pod" UID_SD ".slice/docker-" CID ".scope", "k8s/" UID, CID },
	{ "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_SD ".slice",
	  "k8s/" UID, "" },
	{ "/kubepods.slice/kubepods-burstable.slice", "/kubepods.slice/kubepods-burstable.slice",
	  "" },
	/* Kubernetes, cgroupfs driver */
	{ "/kubepods/burstable/pod" UID "/" CID, "k8s/" UID, CID },
	{ "/kubepods/pod" UID "/" CID, "k8s/" UID, CID },
	{ "/kubepods/besteffort/pod" UID_HASH "/" CID, "k8s/" UID_HASH, CID },
	{ "/kubepods/besteffort", "/kubepods/besteffort", "" },
	/* Kubernetes nested: kind/k3s kubelet.slice, a kind node seen from the host, v1 name=systemd */
	{ "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
	  "kubelet-kubepods-besteffort-pod" UID_SD ".slice/cri-containerd-" CID ".scope",
	  "k8s/" UID, CID },
	{ "/system.slice/docker-" CID2 ".scope/kubelet.slice/kubelet-kubepods.slice/"
	  "kubelet-kubepods-pod" UID_SD ".slice/cri-containerd-" CID ".scope",
	  "k8s/" UID, CID },
	{ "/system.slice/k3s.service/kubepods/burstable/pod" UID "/" CID, "k8s/" UID, CID },
	{ "/system.slice/containerd.service/kubepods-burstable-pod" UID_SD
	  ".slice:cri-containerd:" CID,
	  "k8s/" UID, CID },
	{ "/pod" UID "/" CID, "container/" CID, CID },
	/* Containers outside Kubernetes */
	{ "/system.slice/docker-" CID ".scope", "container/" CID, CID },
	{ "/system.slice/docker-" CID ".scope/", "container/" CID, CID },
	{ "/docker/" CID, "container/" CID, CID },
	{ "/docker/" CID "/docker/" CID2, "container/" CID2, CID2 },
	{ "/system.slice/containerd.service", "systemd/containerd.service", "" },
	{ "/system.slice/docker.service", "systemd/docker.service", "" },
	{ "/machine.slice/libpod-" CID ".scope/container", "container/" CID, CID },
	{ "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" CID ".scope/container",
	  "container/" CID, CID },
	{ "/machine.slice/libpod-conmon-" CID ".scope", "systemd/libpod-conmon-" CID ".scope", "" },
	{ "/system.slice/crio-" CID ".scope", "container/" CID, CID },
	{ "/lxc.payload.web01", "container/web01", "" },
	{ "/lxc.payload.web01/system.slice/nginx.service", "container/web01", "" },
	{ "/lxc.monitor.web01", "/lxc.monitor.web01", "" },
	{ "/system.slice/docker-" CID_UP ".scope", "systemd/docker-" CID_UP ".scope", "" },
	{ "/docker/" CID_UP, "/docker/" CID_UP, "" },
	{ "/docker/" CID_63, "/docker/" CID_63, "" },
	/* libvirt/QEMU */
	{ "/machine.slice/machine-qemu\\x2d1\\x2dvm01.scope/libvirt/vcpu0", "vm/vm01", "" },
	{ "/machine.slice/machine-qemu\\x2d12\\x2dweb\\x2dfrontend.scope/libvirt/emulator",
	  "vm/web-frontend", "" },
	{ "/machine.slice/machine-qemu\\x2dvm04.scope", "vm/vm04", "" },
	{ "/machine/qemu-2-vm02.libvirt-qemu/vcpu1", "vm/vm02", "" },
	{ "/machine/vm03.libvirt-qemu/emulator", "vm/vm03", "" },
	{ "/machine.slice/machine-debian.scope/payload", "systemd/machine-debian.scope", "" },
	/* systemd units */
	{ "/system.slice/nginx.service", "systemd/nginx.service", "" },
	{ "/system.slice/nginx.service/", "systemd/nginx.service", "" },
	{ "/user.slice/user-1000.slice/user@1000.service/app.slice/foo.service",
	  "systemd/foo.service", "" },
	{ "/system.slice/system-getty.slice/getty@tty1.service", "systemd/getty@tty1.service", "" },
	{ "/system.slice/systemd-fsck@dev-disk-by\\x2duuid-1a2b.service",
	  "systemd/systemd-fsck@dev-disk-by\\x2duuid-1a2b.service", "" },
	{ "/user.slice/user-1000.slice/session-3.scope", "systemd/session-3.scope", "" },
	{ "/user.slice/user-1000.slice/user@1000.service/init.scope", "systemd/user@1000.service",
	  "" },
	{ "/init.scope", "systemd/init.scope", "" },
	{ "/system.slice/.service", "/system.slice/.service", "" },
	/* Everything else: the path itself */
	{ "/", "/", "" },
	{ "", "/", "" },
	{ "/mytest/a", "/mytest/a", "" },
	{ "/mytest/a/", "/mytest/a", "" },
	{ "//mytest//a", "/mytest/a", "" },
	{ "/system.slice", "/system.slice", "" },
	{ "/user.slice/user-1000.slice", "/user.slice/user-1000.slice", "" },
};

static void test_workload_table(void **state)
{
	char out[256];
	int failed = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct workload_case *tc = &cases[i];
		const char *got = workload_from_cgroup(tc->path, out, sizeof(out));

		assert_ptr_equal(got, out);
		if (strcmp(got, tc->workload)) {
			print_error("workload(\"%s\"): expected \"%s\", got \"%s\"\n", tc->path,
				    tc->workload, got);
			failed++;
		}
		got = workload_container_id(tc->path, out, sizeof(out));
		assert_ptr_equal(got, out);
		if (strcmp(got, tc->container_id)) {
			print_error("container_id(\"%s\"): expected \"%s\", got \"%s\"\n", tc->path,
				    tc->container_id, got);
			failed++;
		}
	}
	assert_int_equal(failed, 0);
}

static void test_workload_truncated(void **state)
{
	char out[8], big[256];

	(void)state;
	memset(out, 'x', sizeof(out));
	assert_string_equal(workload_from_cgroup("/system.slice/nginx.service", out, sizeof(out)),
			    "systemd");
	assert_string_equal(workload_from_cgroup("/system.slice/nginx.service", out, 1), "");
	/* Nothing is written when there is no room at all. */
	memset(out, 'x', sizeof(out));
	workload_from_cgroup("/system.slice/nginx.service", out, 0);
	assert_int_equal(out[0], 'x');
	assert_string_equal(workload_from_cgroup("/kubepods/pod" UID "/" CID, out, sizeof(out)),
			    "k8s/0b6");
	assert_string_equal(workload_from_cgroup("/mytest/abcdefgh", out, sizeof(out)), "/mytest");
	assert_string_equal(workload_container_id("/docker/" CID, out, sizeof(out)), "ca97811");
	/* A buffer just big enough holds the whole name. */
	assert_string_equal(workload_from_cgroup("/docker/" CID, big, strlen("container/" CID) + 1),
			    "container/" CID);
}

static void test_workload_null_path(void **state)
{
	char out[16];

	(void)state;
	assert_string_equal(workload_from_cgroup(NULL, out, sizeof(out)), "/");
	assert_string_equal(workload_container_id(NULL, out, sizeof(out)), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_workload_table),
		cmocka_unit_test(test_workload_truncated),
		cmocka_unit_test(test_workload_null_path),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
