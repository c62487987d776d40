// SPDX-License-Identifier: GPL-2.0
/* User space test of the patched ixgbe_tune.h: the helpers ixgbe_poll(),
 * ixgbe_write_eitr() and the hybrid rx mode call.  Every helper in the
 * header is exercised here and every one is called by the driver.
 *
 * Property tests run over all (rings, budget, first ring) up to 64 and
 * over random inputs from a fixed-seed generator, so a failure repeats.
 * Prints one line per group and a summary; exit status 1 on any failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ixgbe_tune.h"

static unsigned long checks, failures;

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		checks++;                                                  \
		if (!(cond)) {                                             \
			if (failures++ < 20) {                             \
				printf("FAIL %s:%d: ", __func__, __LINE__); \
				printf(__VA_ARGS__);                       \
				printf("\n");                              \
			}                                                  \
		}                                                          \
	} while (0)

/* xorshift64*, fixed seed: reproducible "random" inputs */
static unsigned long long rng_state = 0x9e3779b97f4a7c15ULL;

static unsigned long long rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

static void group(const char *name, unsigned long before_checks,
		  unsigned long before_failures)
{
	printf("%-12s %6lu checks, %lu failed\n", name, checks - before_checks,
	       failures - before_failures);
}

/* ring split: no poll over budget; with budget >= rings the stock split;
 * with fewer packets than rings every ring is served within
 * ceil(rings / budget) consecutive polls, from any starting ring
 */
static void test_ring_split(void)
{
	unsigned long c0 = checks, f0 = failures;
	unsigned int n, b, first;

	for (n = 1; n <= 64; n++) {
		for (b = 1; b <= 64; b++) {
			unsigned int bound = (n + b - 1) / b;

			for (first = 0; first < n; first++) {
				unsigned int last_served[64];
				unsigned int poll, r, f = first;
				int ok_sum = 1, ok_gap = 1, ok_stock = 1;

				for (r = 0; r < n; r++)
					last_served[r] = 0;
				/* all rings always busy: the worst case */
				for (poll = 1; poll <= 3 * bound + 2; poll++) {
					unsigned int sum = 0, served = 0;

					for (r = 0; r < n; r++) {
						unsigned int rb;

						rb = ixgbe_tune_ring_budget(b, n, f, r);
						sum += rb;
						if (b >= n && rb != b / n)
							ok_stock = 0;
						if (!rb)
							continue;
						served++;
						if (poll - last_served[r] > bound)
							ok_gap = 0;
						last_served[r] = poll;
					}
					if (sum > b || served != (b < n ? b : n))
						ok_sum = 0;
					f = ixgbe_tune_ring_first_next(b, n, f);
				}
				/* and nobody waits longer at the end either */
				for (r = 0; r < n; r++)
					if (poll - last_served[r] > bound + 1)
						ok_gap = 0;
				CHECK(ok_sum, "rings %u budget %u first %u: sum over budget or wrong ring count", n, b, first);
				CHECK(ok_gap, "rings %u budget %u first %u: a ring waited more than %u polls", n, b, first, bound);
				CHECK(ok_stock, "rings %u budget %u: not budget / rings", n, b);
			}
		}
	}
	/* degenerate inputs the driver never passes must stay harmless */
	CHECK(ixgbe_tune_ring_budget(64, 0, 0, 0) == 0, "no rings");
	CHECK(ixgbe_tune_ring_first_next(64, 0, 5) == 0, "no rings next");
	CHECK(ixgbe_tune_ring_budget(2, 4, 9, 1) == 1, "first out of range is taken modulo");
	group("ring-split", c0, f0);
}

static void test_poll_weight(void)
{
	unsigned long c0 = checks, f0 = failures;
	unsigned int limit;

	for (limit = 0; limit <= 80; limit++) {
		unsigned int w = ixgbe_tune_poll_weight(IXGBE_TUNE_RXM_NAPI, limit, 64);

		CHECK(ixgbe_tune_poll_weight(IXGBE_TUNE_RXM_DE, limit, 64) == 64,
		      "DE drains with the full weight (limit %u)", limit);
		CHECK(w == ((limit && limit < 64) ? limit : 64),
		      "NAPI weight %u for limit %u", w, limit);
		CHECK(w >= 1 && w <= 64, "weight %u out of 1..64", w);
	}
	group("poll-weight", c0, f0);
}

static void test_modes(void)
{
	unsigned long c0 = checks, f0 = failures;
	unsigned int itr, a;

	/* DE never goes below what the rings allow, never above 10 us */
	for (itr = 0; itr <= 4092; itr++) {
		unsigned int de = ixgbe_tune_de_itr(itr, 40);

		CHECK(de == (itr < 40 ? itr : 40), "de_itr(%u) = %u", itr, de);
	}
	for (a = IXGBE_TUNE_RXM_NAPI; a <= IXGBE_TUNE_RXM_DE; a++) {
		CHECK(ixgbe_tune_active_for(IXGBE_TUNE_RXM_NAPI, a) == IXGBE_TUNE_RXM_NAPI, "napi");
		CHECK(ixgbe_tune_active_for(IXGBE_TUNE_RXM_DE, a) == IXGBE_TUNE_RXM_DE, "de");
		CHECK(ixgbe_tune_active_for(IXGBE_TUNE_RXM_HYBRID, a) == a, "hybrid keeps its choice");
	}
	group("modes", c0, f0);
}

static void test_cliff(void)
{
	unsigned long c0 = checks, f0 = failures;
	unsigned int i;

	for (i = 0; i < 20000; i++) {
		unsigned int cliff = 1 + rnd() % IXGBE_TUNE_CLIFF_MAX;
		unsigned int eps = rnd() % (IXGBE_TUNE_EPSILON_MAX + 1);
		unsigned long long lo = (unsigned long long)cliff * (100 - eps) / 100 ?: 1;
		unsigned long long hi = (unsigned long long)cliff * (100 + eps) / 100;
		unsigned int l = ixgbe_tune_cliff_low(cliff, eps);
		unsigned int h = ixgbe_tune_cliff_high(cliff, eps);

		CHECK(l == lo && h == hi, "cliff %u eps %u: %u/%u, want %llu/%llu",
		      cliff, eps, l, h, lo, hi);
	}
	CHECK(ixgbe_tune_cliff_low(100000, 15) == 85000, "default low");
	CHECK(ixgbe_tune_cliff_high(100000, 15) == 115000, "default high");
	CHECK(ixgbe_tune_cliff_high(IXGBE_TUNE_CLIFF_MAX, 100) == 2 * IXGBE_TUNE_CLIFF_MAX,
	      "no 32-bit overflow at the limits");
	CHECK(ixgbe_tune_cliff_low(1000, 250) == 1, "epsilon is capped at 100, low at 1");
	CHECK(ixgbe_tune_cliff_low(100000, 100) == 1 &&
	      ixgbe_tune_next_mode(IXGBE_TUNE_RXM_NAPI, 0, 1, 200000) == IXGBE_TUNE_RXM_DE,
	      "epsilon 100: an idle port still goes back to DE");

	/* hysteresis: inside the band the mode holds, outside it flips */
	for (i = 0; i < 20000; i++) {
		unsigned int lo = rnd() % 1000000, hi = lo + rnd() % 1000000;
		unsigned int rate = rnd() % 3000000;
		unsigned int from_de = ixgbe_tune_next_mode(IXGBE_TUNE_RXM_DE, rate, lo, hi);
		unsigned int from_napi = ixgbe_tune_next_mode(IXGBE_TUNE_RXM_NAPI, rate, lo, hi);

		CHECK(from_de == (rate > hi ? IXGBE_TUNE_RXM_NAPI : IXGBE_TUNE_RXM_DE),
		      "DE at %u in [%u, %u]", rate, lo, hi);
		CHECK(from_napi == (rate < lo ? IXGBE_TUNE_RXM_DE : IXGBE_TUNE_RXM_NAPI),
		      "NAPI at %u in [%u, %u]", rate, lo, hi);
	}
	group("cliff", c0, f0);
}

/* the estimate of a steady rate settles on the exact rate and on 0
 * after traffic stops; a late timer divides by the time it really took
 */
static void test_estimator(void)
{
	unsigned long c0 = checks, f0 = failures;
	const unsigned long long W = IXGBE_TUNE_WINDOW_NS;
	unsigned int i;

	for (i = 0; i < 2000; i++) {
		unsigned int per_window = rnd() % 130000;	/* up to line rate */
		unsigned int want = ixgbe_tune_rate_pps(per_window, W);
		unsigned long long exact = per_window * 1000000000ULL / W;
		unsigned long long total = rnd() % 1000000000ULL;
		struct ixgbe_tune_est est;
		unsigned int w, settled = 0;

		CHECK(want == exact, "scale %u -> %u, exact %llu", per_window, want, exact);

		ixgbe_tune_est_reset(&est, total);
		est.rate_pps = rnd() % 20000000;	/* anything before */
		est.primed = 1;
		for (w = 1; w <= 200; w++) {
			total += per_window;
			ixgbe_tune_est_update(&est, total, W);
			if (est.rate_pps == want && !settled)
				settled = w;
		}
		CHECK(est.rate_pps == want, "steady %u: estimate %u, want %u",
		      per_window, est.rate_pps, want);
		CHECK(settled && settled <= 70, "steady %u settled after %u windows",
		      per_window, settled);
		for (w = 1; w <= 200; w++)
			ixgbe_tune_est_update(&est, total, W);
		CHECK(est.rate_pps == 0, "idle: estimate %u, want 0", est.rate_pps);
		CHECK(ixgbe_tune_est_next_windows(&est) == IXGBE_TUNE_IDLE_WINDOWS,
		      "idle slows the timer down");
	}
	/* a timer that runs late by any amount (here 0..2 windows, the
	 * range where rounding to whole windows was off by +49%/-25%):
	 * the sample is the packets over the time, within 1 pps
	 */
	for (i = 0; i < 20000; i++) {
		unsigned int rate = 1000 + rnd() % 15000000;
		unsigned long long elapsed = W / 2 + rnd() % (2 * W);
		unsigned long long count = (unsigned long long)rate * elapsed / 1000000000ULL;
		unsigned int got = ixgbe_tune_rate_pps(count, elapsed);

		CHECK(got <= rate && got + 1 + 1000000000ULL / elapsed >= rate,
		      "late timer: %u pps over %llu ns -> %u", rate, elapsed, got);
	}
	{
		struct ixgbe_tune_est est;

		/* first sample primes; 3 windows at once give the same rate */
		ixgbe_tune_est_reset(&est, 1000);
		ixgbe_tune_est_update(&est, 1000 + 3 * 800, 3 * W);
		CHECK(est.rate_pps == ixgbe_tune_rate_pps(800, W),
		      "late timer: %u", est.rate_pps);
		CHECK(ixgbe_tune_est_next_windows(&est) == 1, "busy: every window");
		/* counters going backwards restart without a sample */
		ixgbe_tune_est_update(&est, 10, W);
		CHECK(est.rate_pps == ixgbe_tune_rate_pps(800, W) && est.last_total == 10,
		      "backwards total");
		/* no time at all takes no sample */
		ixgbe_tune_est_update(&est, 5000, 0);
		CHECK(est.rate_pps == ixgbe_tune_rate_pps(800, W), "zero time");
		/* a huge jump is capped, not wrapped */
		ixgbe_tune_est_reset(&est, 0);
		ixgbe_tune_est_update(&est, 1ULL << 40, W);
		CHECK(est.rate_pps == IXGBE_TUNE_RATE_MAX, "capped: %u", est.rate_pps);
	}
	group("estimator", c0, f0);
}

int main(void)
{
	test_ring_split();
	test_poll_weight();
	test_modes();
	test_cliff();
	test_estimator();

	printf("%lu checks in 5 groups, %lu failed\n", checks, failures);
	return failures ? 1 : 0;
}
