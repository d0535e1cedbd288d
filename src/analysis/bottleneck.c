// SPDX-License-Identifier: GPL-2.0
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/bottleneck.h"

const struct bn_config bn_default_config = {
	.warmup = 10,
	.alpha = 0.02,
	.min_samples = 20,
	.min_few = 4,
	.min_few_effect = 0.99,
	.min_effect = 0.71,
	.min_z = 3.29,
	.max_base_samples = 10000,
	.min_sigmas = 4,
	.min_spread = 0.25,
	.min_mean_spread = 0.75,
	.settle = 1,
};

double bn_hist_total(const struct bn_hist *h)
{
	double t = 0;

	for (int b = 0; b < NETSTACK_BUCKETS; b++)
		t += h->count[b];
	return t;
}

double bn_hist_mean(const struct bn_hist *h)
{
	double t = bn_hist_total(h);

	return t > 0 ? h->sum_ns / t : 0;
}

double bn_bucket_upper(int b)
{
	if (b >= NETSTACK_BUCKETS - 1)
		return INFINITY;
	if (b <= 0)
		return ldexp(1, NETSTACK_MIN_SHIFT);
	return ldexp(1, NETSTACK_MIN_SHIFT + (b - 1) / 4) * (1 + ((b - 1) % 4 + 1) / 4.0);
}

double bn_hist_quantile(const struct bn_hist *h, double q)
{
	double t = bn_hist_total(h), want = q * t, cum = 0;

	if (t <= 0)
		return 0;
	for (int b = 0; b < NETSTACK_BUCKETS; b++) {
		double lo = b ? bn_bucket_upper(b - 1) : 0, hi = bn_bucket_upper(b);

		if (h->count[b] <= 0 || cum + h->count[b] < want) {
			cum += h->count[b];
			continue;
		}
		if (isinf(hi))
			return lo; /* beyond the last bound: its lower edge is all that is known */
		return lo + (hi - lo) * (want - cum) / h->count[b];
	}
	return bn_bucket_upper(NETSTACK_BUCKETS - 2);
}

void bn_mann_whitney(const struct bn_hist *base, double n_base, const struct bn_hist *cur,
		     double *a, double *z)
{
	double tb = bn_hist_total(base), n2 = bn_hist_total(cur), n1 = n_base, below = 0;
	double u = 0, ties = 0, n, var;

	*a = 0.5;
	*z = 0;
	if (tb <= 0 || n2 <= 0 || n1 <= 0)
		return;
	for (int b = 0; b < NETSTACK_BUCKETS; b++) {
		double p = base->count[b] / tb, t = n1 * p + cur->count[b];

		u += cur->count[b] * (below + p / 2);
		below += p;
		ties += t * t * t - t;
	}
	*a = u / n2;
	u *= n1; /* U = A * n1 * n2 */
	n = n1 + n2;
	var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)));
	*z = var > 0 ? (u - n1 * n2 / 2) / sqrt(var) : 0;
}

void bn_component_load(struct bn_component *c, const struct bn_hist *base, double samples,
		       struct bn_spread p50, struct bn_spread mean)
{
	double t = bn_hist_total(base);

	memset(c, 0, sizeof(*c));
	if (t <= 0)
		return;
	for (int b = 0; b < NETSTACK_BUCKETS; b++)
		c->base.count[b] = base->count[b] / t;
	c->base.sum_ns = base->sum_ns / t;
	c->base_samples = samples;
	c->spread_mu = p50.mu;
	c->spread_var = p50.sd * p50.sd;
	c->spread_n = 1 / bn_default_config.alpha;
	c->mspread_mu = mean.mu;
	c->mspread_var = mean.sd * mean.sd;
	c->mspread_n = 1 / bn_default_config.alpha;
	c->ready = true;
}

/*
 * The spread's deviation at its upper 95% confidence bound: from n intervals, sd times
 * sqrt((n - 1) / the chi-square's 5% quantile with n - 1 degrees of freedom) (Wilson and
 * Hilferty's approximation). Ten warm-up intervals give 1.6 times the estimate, 50 give 1.2:
 * an early, low estimate must not flag a series' ordinary wandering, which would then never
 * be learned.
 */
static double spread_bound(double var, double n, double floor)
{
	double v = fmax(n - 1, 1), t = 2 / (9 * v), q = 1 - t - 1.645 * sqrt(t);

	q = q > 0.05 ? v * q * q * q : 0.05 * v;
	return fmax(sqrt(var * v / q), floor);
}

/* ln of an interval's mean over the (scaled) baseline's: 0 when either is unknown */
static double log_ratio(double mean, double base_mean)
{
	return mean > 0 && base_mean > 0 ? log(mean / base_mean) : 0;
}

static int double_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), double_cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * Marks the warm-up intervals whose ln(p50) (or ln(mean)) l[0..k) lies further than 3
 * deviations (1.4826 times the median absolute deviation, at least min_spread) from their
 * median: keep[i] false. A few slow intervals while the host settles (seen: 4 of 10 at 100
 * times the rest, at the start of a CI run under hypervisor steal) would otherwise make the
 * deviation so large that a later hundredfold slowdown stands 1-3 deviations out, is learned
 * as normal, and widens it further; a few packets held for seconds in 2 of 10 (seen: the
 * first baseline's mean 120 times its median) would raise the baseline's mean above a later
 * slowdown's, which then cannot depart.
 */
static void warm_cut(const double *l, size_t k, const struct bn_config *cfg, bool *keep)
{
	double v[BN_WARMUP_MAX], dev[BN_WARMUP_MAX], m, cut;

	memcpy(v, l, k * sizeof(*v));
	m = median(v, k);
	for (size_t i = 0; i < k; i++)
		dev[i] = fabs(l[i] - m);
	cut = 3 * fmax(1.4826 * median(dev, k), cfg->min_spread);
	for (size_t i = 0; i < k; i++)
		keep[i] = keep[i] && fabs(l[i] - m) <= cut;
}

/* The first norm of a spread: the kept warm-up intervals' l, average and variance. */
static void warm_spread(const double *l, size_t k, const bool *keep, double *mu, double *var,
			double *n)
{
	double sum = 0, sq = 0;
	size_t kept = 0;

	for (size_t i = 0; i < k; i++) {
		if (!keep[i])
			continue;
		sum += l[i];
		sq += l[i] * l[i];
		kept++;
	}
	*mu = sum / kept; /* kept >= 1: warm_end() keeps every interval rather than none */
	*var = fmax(0, sq / kept - *mu * *mu);
	*n = (double)kept;
}

/*
 * The warm-up's end: the intervals whose median and mean are both within the cut are the
 * first baseline (their samples, summed) and the first norms of its spreads.
 */
static void warm_end(struct bn_component *c, const struct bn_config *cfg)
{
	size_t k = c->warm_intervals, kept = 0;
	double mu, var, n, mmu, mvar, mn, base_p50;
	struct bn_hist sum = { 0 };
	bool keep[BN_WARMUP_MAX];

	for (size_t i = 0; i < k; i++)
		keep[i] = true;
	warm_cut(c->warm_l, k, cfg, keep);
	warm_cut(c->warm_m, k, cfg, keep);
	for (size_t i = 0; i < k; i++)
		kept += keep[i];
	for (size_t i = 0; i < k; i++) {
		/* a guard: each cut keeps more than half of them, so the two share one */
		keep[i] = keep[i] || !kept;
		if (!keep[i])
			continue;
		for (int b = 0; b < NETSTACK_BUCKETS; b++)
			sum.count[b] += c->warm[i].count[b];
		sum.sum_ns += c->warm[i].sum_ns;
	}
	/* before the load below clears the warm-up */
	warm_spread(c->warm_l, k, keep, &mu, &var, &n);
	warm_spread(c->warm_m, k, keep, &mmu, &mvar, &mn);
	bn_component_free(c);
	bn_component_load(c, &sum, fmin(bn_hist_total(&sum), cfg->max_base_samples),
			  (struct bn_spread){ 0 }, (struct bn_spread){ 0 });
	/* the kept intervals' medians (means) around the baseline's: the spreads' first norms */
	base_p50 = bn_hist_quantile(&c->base, 0.5);
	c->spread_mu = mu - log(base_p50 > 1 ? base_p50 : 1);
	c->spread_var = var;
	c->spread_n = n;
	c->mspread_mu = mmu - log(c->base.sum_ns > 1 ? c->base.sum_ns : 1);
	c->mspread_var = mvar;
	c->mspread_n = mn;
}

void bn_component_free(struct bn_component *c)
{
	free(c->warm);
	c->warm = NULL;
	c->warm_cap = c->warm_intervals = 0;
}

/* One interval's log ratio into a spread's running mean and variance (exponential weights). */
static void spread_learn(double lr, double alpha, double *mu, double *var, double *n)
{
	double d = lr - *mu;

	*mu += alpha * d;
	*var = (1 - alpha) * (*var + alpha * d * d);
	*n = fmin(*n + 1, 1 / alpha);
}

static void learn(struct bn_component *c, const struct bn_pending *e, const struct bn_config *cfg)
{
	const struct bn_hist *cur = &e->cur;
	double n = e->n;

	if (!c->ready) {
		size_t w = cfg->warmup < BN_WARMUP_MAX ? cfg->warmup : BN_WARMUP_MAX;

		w = w ? w : 1;
		if (!c->warm) {
			if (!(c->warm = calloc(w, sizeof(*c->warm))))
				return; /* out of memory: the interval does not teach */
			c->warm_cap = w;
		}
		/* the capacity, not cfg: a warm-up is as long as it began */
		c->warm[c->warm_intervals] = *cur;
		c->warm_l[c->warm_intervals] = log(e->p50 > 1 ? e->p50 : 1);
		c->warm_m[c->warm_intervals] = log(e->mean > 1 ? e->mean : 1);
		if (++c->warm_intervals == c->warm_cap)
			warm_end(c, cfg);
		return;
	}
	/* the spreads first, against the baseline this interval was judged by */
	spread_learn(e->lr_p50, cfg->alpha, &c->spread_mu, &c->spread_var, &c->spread_n);
	spread_learn(e->lr_mean, cfg->alpha, &c->mspread_mu, &c->mspread_var, &c->mspread_n);
	for (int b = 0; b < NETSTACK_BUCKETS; b++)
		c->base.count[b] =
			(1 - cfg->alpha) * c->base.count[b] + cfg->alpha * cur->count[b] / n;
	c->base.sum_ns = (1 - cfg->alpha) * c->base.sum_ns + cfg->alpha * cur->sum_ns / n;
	c->base_samples = fmin(c->base_samples + n, cfg->max_base_samples);
}

/*
 * A series' interval that stands out of its norm without departing is not learned: its median
 * (a slowdown just short of significant), or its mean, by the same yardstick (a queue
 * draining after a rate limit is lifted: a few packets hundreds of times slower, most not).
 * Either, learned, would raise the baseline or its spread until the next trial passes unseen.
 */
static bool stands_out(const struct bn_component *c, const struct bn_config *cfg)
{
	return c->ready && (c->sigmas >= cfg->min_sigmas || c->mean_sigmas >= cfg->min_sigmas ||
			    log_ratio(c->cur_mean, c->host_factor * c->base_mean) >=
				    cfg->min_sigmas * spread_bound(c->spread_var, c->spread_n,
								   cfg->min_spread));
}

/*
 * An interval teaches (learn()) only when neither it nor the settle intervals on either side of
 * it had a departure: so it waits settle intervals in c->pending. A slowdown's first and last
 * intervals hold it in part and its intervals that fall just short of departing hold it whole:
 * each such interval learned raised the series' spread and baseline, so that the next stood
 * fewer deviations out and was learned too (docs/netstack.md, "Not learned").
 */
static void settle(struct bn_component *c, const struct bn_hist *cur, bool teach, bool departed,
		   const struct bn_config *cfg)
{
	size_t k = cfg->settle < BN_SETTLE_MAX ? cfg->settle : BN_SETTLE_MAX, quiet;
	struct bn_pending e, oldest;

	if (departed) {
		c->npending = 0;
		c->quiet = k;
		return;
	}
	if (c->quiet) {
		c->quiet--;
		teach = false;
	}
	e = (struct bn_pending){ .cur = *cur,
				 .n = c->n,
				 .lr_p50 = log_ratio(c->p50, c->host_factor * c->base_p50),
				 .lr_mean = log_ratio(c->cur_mean, c->host_factor * c->base_mean),
				 .p50 = c->p50,
				 .mean = c->cur_mean,
				 .teach = teach };
	if (c->npending < k) {
		c->pending[c->npending++] = e;
		return;
	}
	oldest = e;
	if (k) {
		oldest = c->pending[0];
		memmove(&c->pending[0], &c->pending[1], (k - 1) * sizeof(e));
		c->pending[k - 1] = e;
	}
	if (!oldest.teach)
		return;
	quiet = c->quiet;
	learn(c, &oldest, cfg); /* which clears the component when it ends the warm-up */
	c->quiet = quiet;
}

/* The baseline's distribution scaled by f (>= 1): each bucket moved up by 4 log2(f). */
static void hist_scale(const struct bn_hist *in, double f, struct bn_hist *out)
{
	int shift = (int)lround(4 * log2(f));

	memset(out, 0, sizeof(*out));
	for (int b = 0; b < NETSTACK_BUCKETS; b++) {
		int to = b + shift;

		out->count[to < NETSTACK_BUCKETS ? to : NETSTACK_BUCKETS - 1] += in->count[b];
	}
	out->sum_ns = in->sum_ns * f;
}

int bn_interval(struct bn_component *c, const struct bn_hist *cur, size_t n,
		const struct bn_config *cfg)
{
	double increase = 0, best = 0, host = 1, *ratio = calloc(n ? n : 1, sizeof(double));
	size_t judged = 0;
	int bottleneck = -1, largest = -1;
	bool any = false;

	for (size_t i = 0; i < n; i++) {
		struct bn_component *x = &c[i];

		x->n = bn_hist_total(&cur[i]);
		x->departed = x->bottleneck = x->largest = false;
		x->share = 0;
		x->a = 0.5;
		x->z = 0;
		x->sigmas = x->mean_sigmas = 0;
		x->cur_mean = bn_hist_mean(&cur[i]);
		x->p50 = bn_hist_quantile(&cur[i], 0.5);
		x->p99 = bn_hist_quantile(&cur[i], 0.99);
		x->base_mean = x->ready ? x->base.sum_ns : 0;
		x->base_p50 = x->ready ? bn_hist_quantile(&x->base, 0.5) : 0;
		if (x->ready && x->n >= cfg->min_samples && ratio)
			ratio[judged++] = x->base_p50 > 0 ? x->p50 / x->base_p50 : 1;
	}
	/*
	 * The host-wide factor: the median component's slowdown (with three components or
	 * more). A busy host slows every component alike; each is judged against its baseline
	 * scaled by that factor, so only a component slower than the rest can depart.
	 */
	if (judged >= 3)
		host = fmax(1, median(ratio, judged));
	free(ratio);
	for (size_t i = 0; i < n; i++) {
		struct bn_component *x = &c[i];
		struct bn_hist scaled;

		x->host_factor = host;
		if (!x->ready || x->n < cfg->min_few)
			continue;
		hist_scale(&x->base, host, &scaled);
		bn_mann_whitney(&scaled, x->base_samples, &cur[i], &x->a, &x->z);
		x->sigmas = (log_ratio(x->p50, host * x->base_p50) - x->spread_mu) /
			    spread_bound(x->spread_var, x->spread_n, cfg->min_spread);
		x->mean_sigmas = (log_ratio(x->cur_mean, host * x->base_mean) - x->mspread_mu) /
				 spread_bound(x->mspread_var, x->mspread_n, cfg->min_mean_spread);
		/*
		 * Significant and large against the baseline's samples, and beyond what this
		 * series' interval medians, or its means, do by themselves: a reader woken late
		 * for a second doubles its socket's time, which is a large effect but the
		 * series' normal. The median alone would miss a window that stalls now and then
		 * (a tiny receive buffer: every segment a little slower, one in ten held 20 ms,
		 * the median 2x and the mean 300x); the mean alone would miss a tenfold slowdown
		 * of every packet, its spread being three times the median's on this project's
		 * test host (one packet held a millisecond by a preempted CPU doubles a 1 us
		 * component's mean over a few hundred packets). The effect size keeps out a few
		 * slow packets with the rest as before (a queue draining).
		 */
		x->departed = x->a >= cfg->min_effect && x->z >= cfg->min_z &&
			      (x->sigmas >= cfg->min_sigmas || x->mean_sigmas >= cfg->min_sigmas) &&
			      x->cur_mean > host * x->base_mean;
		/*
		 * Fewer than min_samples: a stage so held that few of its samples end in an
		 * interval (sends behind a tiny window, each waiting half a second, 3-8 an
		 * interval), judged only when nearly every one is above the whole baseline
		 * (4 such give z 3.5), and not otherwise part of the increase: a few slow
		 * stragglers of a quiet series must not be the largest share.
		 */
		if (x->n < cfg->min_samples && !(x->departed && x->a >= cfg->min_few_effect)) {
			x->departed = false;
			continue;
		}
		if (x->cur_mean <= host * x->base_mean)
			continue;
		increase += x->cur_mean - host * x->base_mean;
		if (x->cur_mean - host * x->base_mean > best) {
			best = x->cur_mean - host * x->base_mean;
			largest = (int)i;
		}
	}
	/*
	 * The component with the largest share of the increase beyond the host-wide factor, if
	 * it departed: not necessarily most of it. A starved receive CPU delays its packets
	 * before their processing starts (softirq) and, when it is taken mid-batch, inside it
	 * (backlog, protocol): under hypervisor steal the wait to start carried a median 40% of
	 * the increase, most often the largest part, and a majority rule named nothing.
	 */
	if (largest >= 0)
		c[largest].largest = true;
	if (largest >= 0 && c[largest].departed) {
		bottleneck = largest;
		c[bottleneck].bottleneck = true;
		c[bottleneck].share = best / increase;
	}
	/*
	 * Learn only from normal intervals: none departed. While a bottleneck holds, the other
	 * series see its consequences (less traffic behind a rate limit, a quieter receiver), and
	 * their baselines must not drift toward them.
	 */
	for (size_t i = 0; i < n; i++)
		any |= c[i].departed;
	for (size_t i = 0; i < n; i++)
		settle(&c[i], &cur[i],
		       !any && c[i].n >= cfg->min_samples && !stands_out(&c[i], cfg), any, cfg);
	return bottleneck;
}
