/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Which component of the network stack is the bottleneck now (docs/netstack.md): each
 * component's latency distribution this interval against its baseline, learned online or
 * loaded. No kernel, no I/O: unit-tested.
 */
#ifndef PLUMB_ANALYSIS_BOTTLENECK_H
#define PLUMB_ANALYSIS_BOTTLENECK_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

#include "netstack.h"

/* A latency distribution in the buckets of include/netstack.h (counts, or weights). */
struct bn_hist {
	double count[NETSTACK_BUCKETS];
	double sum_ns;
};

double bn_hist_total(const struct bn_hist *h);
double bn_hist_mean(const struct bn_hist *h);

/* Bucket b's upper bound in ns (inclusive); the last bucket's is infinite. */
double bn_bucket_upper(int b);

/* The q-quantile (0..1), interpolated linearly within its bucket; 0 for an empty histogram. */
double bn_hist_quantile(const struct bn_hist *h, double q);

/*
 * Mann-Whitney U of cur against base on binned data (ties within a bucket): the effect size
 * a = P(cur > base) + P(cur == base) / 2 (0.5: no shift) and the z-score of U (normal
 * approximation, tie-corrected variance). base may be a weighted distribution: n_base is the
 * number of samples it stands for.
 */
void bn_mann_whitney(const struct bn_hist *base, double n_base, const struct bn_hist *cur,
		     double *a, double *z);

/* The most warm-up intervals a component keeps (histograms, medians, means) for its first norm. */
#define BN_WARMUP_MAX 32

/* The method's constants (docs/netstack.md says why each is what it is). */
struct bn_config {
	size_t warmup; /* intervals that make a component's first baseline (at most BN_WARMUP_MAX) */
	double alpha; /* afterwards, the weight of each unflagged interval in the baseline */
	double min_samples; /* fewer in an interval: the component is not learned, and */
	/*
	 * judged only with at least min_few samples nearly all above its whole baseline (A at
	 * least min_few_effect): a stage so held that few of its samples end in an interval
	 */
	double min_few;
	double min_few_effect;
	double min_effect; /* Vargha-Delaney A of a departure: 0.71 is a "large" effect */
	double min_z; /* and its significance: 3.29 is one-sided p < 0.0005 */
	double max_base_samples; /* a learned baseline counts as at most this many samples */
	/*
	 * and its interval median, or its mean, stands out of the series' own
	 * interval-to-interval variation: ln(p50 / baseline p50), or ln(mean / baseline mean),
	 * above its learned average by this many standard deviations, the deviation taken at
	 * its upper 95% confidence bound for the intervals it was learned from, and as at least
	 * min_spread (min_mean_spread for the mean)
	 */
	double min_sigmas;
	double min_spread;
	double min_mean_spread;
	/* an interval teaches only when this many on either side of it had no departure */
	size_t settle;
};

extern const struct bn_config bn_default_config;

/* The most intervals a departure keeps from teaching on either side of it (settle). */
#define BN_SETTLE_MAX 1

/* An interval waiting to teach: what learning takes from it, kept from its judgement. */
struct bn_pending {
	struct bn_hist cur;
	double n;
	double lr_p50, lr_mean; /* ln(p50), ln(mean) over the scaled baseline's then */
	double p50, mean; /* its own, for a warm-up */
	bool teach; /* not departed, not standing out, not settling after a departure */
};

/* One component's learned state and its last judgement. */
struct bn_component {
	struct bn_hist base; /* a distribution: sums to 1 once warm (sum_ns: the mean) */
	/*
	 * the warm-up intervals' samples, each interval's (allocated at the first, freed at the
	 * last: min(warmup, BN_WARMUP_MAX) histograms, ~9 KB for 10)
	 */
	struct bn_hist *warm;
	size_t warm_cap; /* how many warm holds */
	size_t warm_intervals;
	double base_samples; /* how many samples the baseline stands for */
	/* ln(interval p50 / baseline p50) of normal intervals: average and variance */
	double spread_mu, spread_var;
	double spread_n; /* how many intervals they stand for (at most 1 / alpha) */
	/* ln(interval mean / baseline mean) of the same intervals, and how many */
	double mspread_mu, mspread_var, mspread_n;
	double warm_l[BN_WARMUP_MAX]; /* the warm-up intervals' ln(p50) */
	double warm_m[BN_WARMUP_MAX]; /* and ln(mean) */
	bool ready; /* the baseline is learned (or loaded) */
	/*
	 * the last intervals, oldest first, until settle more have passed without a departure
	 * (bn_component_load() drops them: a warm-up's end, a recording loaded)
	 */
	struct bn_pending pending[BN_SETTLE_MAX];
	size_t npending;
	size_t quiet; /* intervals to come that teach nothing: those after a departure */
	/* the last interval */
	double n, base_mean, base_p50, cur_mean, p50, p99, a, z;
	double sigmas; /* ln(p50 / scaled baseline p50) in the series' deviations from its norm */
	double mean_sigmas; /* the same of ln(mean / scaled baseline mean) */
	bool departed; /* significantly slower than its baseline */
	bool bottleneck; /* departed, with the largest part of the increase */
	bool largest; /* the largest rise of the mean beyond the factor (the bottleneck if departed) */
	double share; /* its part of the sum of the components' mean increases */
	double host_factor; /* the interval's host-wide slowdown (the median component's) */
};

/* A series' interval-to-interval spread: average and deviation of a log ratio. */
struct bn_spread {
	double mu, sd;
};

/*
 * Sets a component's baseline from a distribution (a recording): it is ready at once. p50 and
 * mean: its intervals' ln(p50 / baseline p50) and ln(mean / baseline mean), average and
 * deviation (0 and 0 when unknown: min_spread then stands for the deviation). c holds no
 * warm-up (zeroed, or bn_component_free()).
 */
void bn_component_load(struct bn_component *c, const struct bn_hist *base, double samples,
		       struct bn_spread p50, struct bn_spread mean);

/* Frees what a component holds during its warm-up: before it is dropped, or zeroed. */
void bn_component_free(struct bn_component *c);

/*
 * One interval: cur[i] holds component i's samples of the interval. Judges each component
 * against its baseline scaled by the host-wide factor (the median component's slowdown, with
 * three components or more) and against its own interval-to-interval spread, marks the
 * bottleneck (the component with the largest mean increase beyond that factor, when it
 * departed), then learns: each series from the interval settle intervals before, when neither
 * it nor the intervals around it had a departure (and not from one whose median or mean stood
 * out of its spread). Returns the bottleneck's index or -1.
 */
int bn_interval(struct bn_component *c, const struct bn_hist *cur, size_t n,
		const struct bn_config *cfg);

#endif
