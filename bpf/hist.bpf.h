/* SPDX-License-Identifier: GPL-2.0 */
/* Log2 histogram buckets shared by the modules' BPF programs. */
#ifndef PLUMB_HIST_BPF_H
#define PLUMB_HIST_BPF_H

/*
 * The bucket k such that v <= 2^(min_shift + k), the last one (nbuckets - 1) for everything
 * above: bucket k exports as le = 2^(min_shift + k) without an off-by-one.
 */
static __always_inline __u32 log2_bucket(__u64 v, __u32 min_shift, __u32 nbuckets)
{
	__u32 log = 0;

	if (v <= (1ULL << min_shift))
		return 0;
	v -= 1; /* ceil(log2(v)) = floor(log2(v - 1)) + 1 for v >= 2 */
	if (v >> 32) {
		v >>= 32;
		log += 32;
	}
	if (v >> 16) {
		v >>= 16;
		log += 16;
	}
	if (v >> 8) {
		v >>= 8;
		log += 8;
	}
	if (v >> 4) {
		v >>= 4;
		log += 4;
	}
	if (v >> 2) {
		v >>= 2;
		log += 2;
	}
	if (v >> 1)
		log += 1;
	log = log + 1 - min_shift;
	return log < nbuckets - 1 ? log : nbuckets - 1;
}

#endif
