/* SPDX-License-Identifier: GPL-2.0 */
/* Types shared by bpf/netstack.bpf.c, src/modules/netstack.c and the analysis: fixed-width. */
#ifndef PLUMB_NETSTACK_H
#define PLUMB_NETSTACK_H

/*
 * Latency histograms with four buckets per octave (a quarter-octave: values within 19%).
 * Bucket 0 holds v <= 2^NETSTACK_MIN_SHIFT ns; bucket b >= 1 holds, with o = (b - 1) / 4 and
 * s = (b - 1) % 4, the v with 2^(MIN + o) * (1 + s/4) < v <= 2^(MIN + o) * (1 + (s+1)/4); the
 * last bucket everything above. Upper bounds are inclusive: Prometheus's le, no off-by-one.
 */
#define NETSTACK_MIN_SHIFT 7 /* 128 ns */
#define NETSTACK_OCTAVES   28 /* to 2^35 ns, 34 s */
#define NETSTACK_BUCKETS   (NETSTACK_OCTAVES * 4 + 1)

/* v's bucket (BPF and user space alike: shifts and compares only). */
static inline __u32 netstack_bucket(__u64 v)
{
	__u32 msb = 0;
	__u64 w;

	if (v <= (1ULL << NETSTACK_MIN_SHIFT))
		return 0;
	w = v - 1; /* upper bounds inclusive: place v - 1 in [2^msb * (1 + s/4), ...) */
	if (w >> 32) {
		w >>= 32;
		msb += 32;
	}
	if (w >> 16) {
		w >>= 16;
		msb += 16;
	}
	if (w >> 8) {
		w >>= 8;
		msb += 8;
	}
	if (w >> 4) {
		w >>= 4;
		msb += 4;
	}
	if (w >> 2) {
		w >>= 2;
		msb += 2;
	}
	if (w >> 1)
		msb += 1;
	if (msb >= NETSTACK_MIN_SHIFT + NETSTACK_OCTAVES)
		return NETSTACK_BUCKETS - 1;
	return (msb - NETSTACK_MIN_SHIFT) * 4 + (((v - 1) >> (msb - 2)) & 3) + 1;
}

#endif
