// SPDX-License-Identifier: GPL-2.0
/*
 * cgroup path -> workload name. The name is a metric label, so it must stay bounded: one per
 * job, pod, container, VM or unit, never per process, task or container restart inside a pod.
 *
 * Rules, on path components, the first that matches wins:
 *
 * 1. SLURM: a "job_<digits>" component below a component starting with "slurm" (v2:
 *    /system.slice/slurmstepd.scope/job_211/step_0/user/task_0; v1: /slurm/uid_1000/job_211/...
 *    or /slurm_<host>/uid_1000/job_42/...) -> "slurm/<digits>".
 * 2. Kubernetes: a pod component, which is either a systemd-driver slice containing "kubepods"
 *    whose last dash-separated part is "pod<uid>" ("kubepods-burstable-pod<uid>.slice",
 *    "kubepods-pod<uid>.slice" for guaranteed pods, "kubelet-kubepods-...-pod<uid>.slice" under
 *    kind/k3s's kubelet.slice, and "...-pod<uid>.slice:cri-containerd:<id>" in the v1 name=systemd
 *    hierarchy), or a cgroupfs-driver "pod<uid>" below a component containing "kubepods"
 *    (/kubepods/burstable/pod<uid>/<id>, /kubepods/pod<uid>/<id>), at any depth
 *    -> "k8s/<uid>" with systemd's '_' turned back into '-'. Pod level only: the container id
 *    comes from workload_container_id().
 * 3. Containers: the deepest component naming a 64 lowercase hex id ("docker-<id>.scope",
 *    "libpod-<id>.scope", "crio-<id>.scope", "cri-containerd-<id>.scope", a bare "<id>" as in
 *    /docker/<id>, or "...:<runtime>:<id>") -> "container/<id>"; else an "lxc.payload.<name>"
 *    component -> "container/<name>". A service such as containerd.service is not a container.
 * 4. libvirt/QEMU VMs: "machine-qemu\x2d<N>\x2d<name>.scope" (systemd escapes '-' as \x2d) or
 *    "qemu-<N>-<name>.libvirt-qemu" (cgroupfs) -> "vm/<name>"; the "qemu-<N>-" prefix, which
 *    changes each time the domain starts, is dropped (and is optional, as in older libvirt).
 * 5. systemd: the deepest component ending in ".service", else the deepest ending in ".scope"
 *    -> "systemd/<unit>" (the unit name as systemd spells it, escapes included).
 * 6. Otherwise the path itself, with repeated and trailing slashes removed ("/" for the root).
 */
#include <stdbool.h>
#include <string.h>
#include <limits.h>

#include "identity/workload.h"

#define CONTAINER_ID_LEN 64

/* A path component: not NUL-terminated, it points into the caller's path. */
struct comp {
	const char *s;
	size_t len;
};

/* Stores the next component of *p in c and advances *p past it; false when none is left. */
static bool next_comp(const char **p, struct comp *c)
{
	const char *s = *p;

	while (*s == '/')
		s++;
	if (!*s)
		return false;
	c->s = s;
	while (*s && *s != '/')
		s++;
	c->len = s - c->s;
	*p = s;
	return true;
}

static bool has_prefix(struct comp c, const char *prefix)
{
	size_t n = strlen(prefix);

	return c.len >= n && !memcmp(c.s, prefix, n);
}

/* A name before the suffix is required: ".service" alone names no unit. */
static bool has_suffix(struct comp c, const char *suffix)
{
	size_t n = strlen(suffix);

	return c.len > n && !memcmp(c.s + c.len - n, suffix, n);
}

static struct comp comp_after(struct comp c, size_t n)
{
	return (struct comp){ c.s + n, c.len - n };
}

static bool is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

static bool is_lower_hex(char ch)
{
	return is_digit(ch) || (ch >= 'a' && ch <= 'f');
}

static bool all_digits(struct comp c)
{
	for (size_t i = 0; i < c.len; i++)
		if (!is_digit(c.s[i]))
			return false;
	return c.len > 0;
}

/* Runtimes print ids in lowercase; anything else is some other name that happens to be hex. */
static bool is_container_id(struct comp c)
{
	for (size_t i = 0; i < c.len; i++)
		if (!is_lower_hex(c.s[i]))
			return false;
	return c.len == CONTAINER_ID_LEN;
}

/* A UUID (or a static pod's 32-hex config hash), with '-' or systemd's '_' between groups. */
static bool is_pod_uid(struct comp c)
{
	for (size_t i = 0; i < c.len; i++)
		if (!is_lower_hex(c.s[i]) && c.s[i] != '-' && c.s[i] != '_')
			return false;
	return c.len > 0;
}

/* Appends to a caller's buffer, dropping what does not fit and keeping it NUL-terminated. */
struct out {
	char *buf;
	size_t size, len;
};

static void put_char(struct out *o, char ch)
{
	if (o->len + 1 >= o->size)
		return;
	o->buf[o->len++] = ch;
	o->buf[o->len] = '\0';
}

static void put_comp(struct out *o, struct comp c)
{
	for (size_t i = 0; i < c.len; i++)
		put_char(o, c.s[i]);
}

static void put_str(struct out *o, const char *s)
{
	put_comp(o, (struct comp){ s, strlen(s) });
}

static bool match_slurm(const char *path, struct out *o)
{
	bool under_slurm = false;
	struct comp c;

	while (next_comp(&path, &c)) {
		if (under_slurm && has_prefix(c, "job_") && all_digits(comp_after(c, 4))) {
			put_str(o, "slurm/");
			put_comp(o, comp_after(c, 4));
			return true;
		}
		if (has_prefix(c, "slurm"))
			under_slurm = true;
	}
	return false;
}

/* The uid of a systemd-driver pod slice, "<anything>-pod<uid>.slice[:<runtime>:<id>]". */
static bool pod_uid_of_slice(struct comp c, struct comp *uid)
{
	const char *colon = memchr(c.s, ':', c.len);
	const char *dash;

	if (colon)
		c.len = colon - c.s;
	if (!has_suffix(c, ".slice"))
		return false;
	c.len -= strlen(".slice");
	dash = memrchr(c.s, '-', c.len);
	if (!dash)
		return false;
	c = comp_after(c, dash + 1 - c.s);
	if (!has_prefix(c, "pod"))
		return false;
	*uid = comp_after(c, 3);
	return is_pod_uid(*uid);
}

static bool match_k8s(const char *path, struct out *o)
{
	bool under_kubepods = false;
	struct comp c, uid;

	while (next_comp(&path, &c)) {
		if (memmem(c.s, c.len, "kubepods", strlen("kubepods"))) {
			if (pod_uid_of_slice(c, &uid))
				goto found;
			under_kubepods = true;
		} else if (under_kubepods && has_prefix(c, "pod")) {
			uid = comp_after(c, 3);
			if (is_pod_uid(uid))
				goto found;
		}
	}
	return false;
found:
	put_str(o, "k8s/");
	/* The systemd driver writes the uid with '_' because '-' separates slice levels. */
	for (size_t i = 0; i < uid.len; i++)
		put_char(o, uid.s[i] == '_' ? '-' : uid.s[i]);
	return true;
}

/* The container id a single component names, if it names one. */
static bool container_id_of(struct comp c, struct comp *id)
{
	static const char *const scope_prefixes[] = { "docker-", "libpod-", "crio-",
						      "cri-containerd-" };
	const char *colon = memrchr(c.s, ':', c.len);

	if (colon) {
		*id = comp_after(c, colon + 1 - c.s);
		return is_container_id(*id);
	}
	if (is_container_id(c)) {
		*id = c;
		return true;
	}
	if (!has_suffix(c, ".scope"))
		return false;
	for (size_t i = 0; i < sizeof(scope_prefixes) / sizeof(scope_prefixes[0]); i++) {
		size_t n = strlen(scope_prefixes[i]);

		if (!has_prefix(c, scope_prefixes[i]) || c.len != n + CONTAINER_ID_LEN + 6)
			continue;
		*id = (struct comp){ c.s + n, CONTAINER_ID_LEN };
		return is_container_id(*id);
	}
	return false;
}

/* The deepest one: nested containers (docker in docker, kind nodes) belong to the inner one. */
static bool find_container_id(const char *path, struct comp *id)
{
	bool found = false;
	struct comp c, cid;

	while (next_comp(&path, &c)) {
		if (container_id_of(c, &cid)) {
			*id = cid;
			found = true;
		}
	}
	return found;
}

static bool match_container(const char *path, struct out *o)
{
	struct comp c, id;

	if (find_container_id(path, &id)) {
		put_str(o, "container/");
		put_comp(o, id);
		return true;
	}
	while (next_comp(&path, &c)) {
		if (has_prefix(c, "lxc.payload.") && c.len > strlen("lxc.payload.")) {
			put_str(o, "container/");
			put_comp(o, comp_after(c, strlen("lxc.payload.")));
			return true;
		}
	}
	return false;
}

static int hex_value(char ch)
{
	if (is_digit(ch))
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Decodes systemd's "\xNN" unit-name escapes of c into buf; false if it does not fit. */
static bool unescape_unit(struct comp c, char *buf, size_t size, struct comp *res)
{
	size_t n = 0;

	for (size_t i = 0; i < c.len; i++) {
		char ch = c.s[i];

		if (ch == '\\' && i + 3 < c.len && c.s[i + 1] == 'x' &&
		    hex_value(c.s[i + 2]) >= 0 && hex_value(c.s[i + 3]) >= 0) {
			ch = (char)(hex_value(c.s[i + 2]) << 4 | hex_value(c.s[i + 3]));
			i += 3;
		}
		if (n + 1 >= size)
			return false;
		buf[n++] = ch;
	}
	*res = (struct comp){ buf, n };
	return true;
}

/* "qemu-<N>-<name>" or "qemu-<name>" (older libvirt) -> "<name>". */
static struct comp strip_qemu_prefix(struct comp c)
{
	size_t i = strlen("qemu-");

	while (i < c.len && is_digit(c.s[i]))
		i++;
	if (i > strlen("qemu-") && i < c.len && c.s[i] == '-')
		return comp_after(c, i + 1);
	return comp_after(c, strlen("qemu-"));
}

static bool match_vm(const char *path, struct out *o)
{
	char buf[NAME_MAX + 1];
	struct comp c, name;

	while (next_comp(&path, &c)) {
		if (has_prefix(c, "machine-") && has_suffix(c, ".scope")) {
			c = comp_after(c, strlen("machine-"));
			c.len -= strlen(".scope");
			/* Other machines (systemd-nspawn, libvirt-lxc) are not QEMU VMs. */
			if (!unescape_unit(c, buf, sizeof(buf), &name) ||
			    !has_prefix(name, "qemu-"))
				continue;
			name = strip_qemu_prefix(name);
		} else if (has_suffix(c, ".libvirt-qemu")) {
			name = c;
			name.len -= strlen(".libvirt-qemu");
			if (has_prefix(name, "qemu-"))
				name = strip_qemu_prefix(name);
		} else {
			continue;
		}
		if (!name.len)
			continue;
		put_str(o, "vm/");
		put_comp(o, name);
		return true;
	}
	return false;
}

static bool match_systemd(const char *path, struct out *o)
{
	struct comp c, service = { NULL, 0 }, scope = { NULL, 0 };

	while (next_comp(&path, &c)) {
		if (has_suffix(c, ".service"))
			service = c;
		else if (has_suffix(c, ".scope"))
			scope = c;
	}
	if (!service.len)
		service = scope;
	if (!service.len)
		return false;
	put_str(o, "systemd/");
	put_comp(o, service);
	return true;
}

static void put_path(const char *path, struct out *o)
{
	struct comp c;

	put_char(o, '/');
	if (next_comp(&path, &c)) {
		put_comp(o, c);
		while (next_comp(&path, &c)) {
			put_char(o, '/');
			put_comp(o, c);
		}
	}
}

const char *workload_from_cgroup(const char *cgroup_path, char *out, size_t outlen)
{
	struct out o = { out, outlen, 0 };

	if (outlen)
		out[0] = '\0';
	if (!cgroup_path)
		cgroup_path = "";
	if (match_slurm(cgroup_path, &o) || match_k8s(cgroup_path, &o) ||
	    match_container(cgroup_path, &o) || match_vm(cgroup_path, &o) ||
	    match_systemd(cgroup_path, &o))
		return out;
	put_path(cgroup_path, &o);
	return out;
}

const char *workload_container_id(const char *cgroup_path, char *out, size_t outlen)
{
	struct out o = { out, outlen, 0 };
	struct comp id;

	if (outlen)
		out[0] = '\0';
	if (cgroup_path && find_container_id(cgroup_path, &id))
		put_comp(&o, id);
	return out;
}
