// SPDX-License-Identifier: GPL-2.0
/* User space test of ixgbe_tune.h, the dependency-free logic shared by the
 * patched ixgbe: ITR encodings, rx-mode hysteresis, poll budgets and the
 * shift-only packet-rate estimator.  Exits non-zero on any failure.
 */
#include <stdio.h>
#include <stdlib.h>

#include "ixgbe_tune.h"

static int passed, failed;

#define CHECK_EQ(got, want) check_eq(__FILE__, __LINE__, #got, \
				     (unsigned long long)(got), \
				     (unsigned long long)(want))

static void check_eq(const char *file, int line, const char *expr,
		     unsigned long long got, unsigned long long want)
{
	if (got == want) {
		passed++;
		return;
	}
	failed++;
	fprintf(stderr, "%s:%d: %s = %llu, want %llu\n",
		file, line, expr, got, want);
}

static void test_itr_encoding(void)
{
	/* same range as ethtool -C rx-usecs on ixgbe/ixgbevf */
	CHECK_EQ(ixgbe_tune_itr_usecs_valid(0), 1);
	CHECK_EQ(ixgbe_tune_itr_usecs_valid(1022), 1);
	CHECK_EQ(ixgbe_tune_itr_usecs_valid(1023), 0);
	CHECK_EQ(ixgbe_tune_itr_usecs_valid(4000000000U), 0);

	/* odd intervals round down to the 2 us EITR granularity */
	CHECK_EQ(ixgbe_tune_itr_usecs_round(51), 50);
	CHECK_EQ(ixgbe_tune_itr_usecs_round(3), 2);
	CHECK_EQ(ixgbe_tune_itr_usecs_round(1), 1);
	CHECK_EQ(ixgbe_tune_itr_usecs_round(0), 0);

	/* itr_setting as the drivers store it: usecs << 2, flags 0/1 kept */
	CHECK_EQ(ixgbe_tune_usecs_to_setting(0), 0);
	CHECK_EQ(ixgbe_tune_usecs_to_setting(1), 1);
	CHECK_EQ(ixgbe_tune_usecs_to_setting(50), 200);
	CHECK_EQ(ixgbe_tune_usecs_to_setting(1022) & ~0xff8U, 0);
	CHECK_EQ(ixgbe_tune_setting_to_usecs(200), 50);
	CHECK_EQ(ixgbe_tune_setting_to_usecs(1), 1);
	for (unsigned int u = 2; u <= IXGBE_TUNE_ITR_MAX_USECS; u++)
		CHECK_EQ(ixgbe_tune_setting_to_usecs(
				ixgbe_tune_usecs_to_setting(u)), u);

	/* the 82599 limits: 2 us = 500000/s, 1022 us = 978/s; 20 us = 50K */
	CHECK_EQ(ixgbe_tune_usecs_to_rate(2), 500000);
	CHECK_EQ(ixgbe_tune_usecs_to_rate(20), 50000);
	CHECK_EQ(ixgbe_tune_usecs_to_rate(1022), 978);
	CHECK_EQ(ixgbe_tune_usecs_to_rate(1), 0);
	CHECK_EQ(ixgbe_tune_usecs_to_rate(0), 0);
}

static void test_thresholds(void)
{
	/* paper's example: cliff 100 Kpps, e = 0.15 */
	CHECK_EQ(ixgbe_tune_cliff_low(100000, 15), 85000);
	CHECK_EQ(ixgbe_tune_cliff_high(100000, 15), 115000);
	/* exact at the top of the range, no 32-bit overflow */
	CHECK_EQ(ixgbe_tune_cliff_high(IXGBE_TUNE_CLIFF_MAX, 100), 200000000);
	CHECK_EQ(ixgbe_tune_cliff_low(IXGBE_TUNE_CLIFF_MAX, 100), 0);
	/* truncation matches (100 +/- e) * cliff / 100 for awkward values */
	for (unsigned long long c = 1; c < 100000000ULL; c = c * 7 + 3) {
		for (unsigned int e = 0; e <= 100; e += 7) {
			CHECK_EQ(ixgbe_tune_cliff_low(c, e), (100 - e) * c / 100);
			CHECK_EQ(ixgbe_tune_cliff_high(c, e), (100 + e) * c / 100);
		}
	}
	/* an epsilon above 100 is clamped, never wraps */
	CHECK_EQ(ixgbe_tune_cliff_low(1000, 250), 0);
	CHECK_EQ(ixgbe_tune_cliff_high(1000, 250), 2000);
}

static void test_hysteresis(void)
{
	unsigned int lo = 85000, hi = 115000;
	unsigned int de = IXGBE_TUNE_RXM_DE, napi = IXGBE_TUNE_RXM_NAPI;

	CHECK_EQ(ixgbe_tune_next_mode(de, 115000, lo, hi), de);
	CHECK_EQ(ixgbe_tune_next_mode(de, 115001, lo, hi), napi);
	CHECK_EQ(ixgbe_tune_next_mode(napi, 85000, lo, hi), napi);
	CHECK_EQ(ixgbe_tune_next_mode(napi, 84999, lo, hi), de);
	/* inside the band nothing moves, whichever side we came from */
	CHECK_EQ(ixgbe_tune_next_mode(de, 100000, lo, hi), de);
	CHECK_EQ(ixgbe_tune_next_mode(napi, 100000, lo, hi), napi);

	/* a rate oscillating +/-10% around the cliff causes no switch */
	unsigned int active = de, switches = 0;

	for (int i = 0; i < 1000; i++) {
		unsigned int rate = (i & 1) ? 110000 : 90000;
		unsigned int next = ixgbe_tune_next_mode(active, rate, lo, hi);

		switches += next != active;
		active = next;
	}
	CHECK_EQ(switches, 0);

	CHECK_EQ(ixgbe_tune_active_for(IXGBE_TUNE_RXM_NAPI, de), napi);
	CHECK_EQ(ixgbe_tune_active_for(IXGBE_TUNE_RXM_DE, napi), de);
	CHECK_EQ(ixgbe_tune_active_for(IXGBE_TUNE_RXM_HYBRID, napi), napi);
}

static void test_poll_budget(void)
{
	/* DE always gets the full NAPI budget, NAPI the limit, never more */
	CHECK_EQ(ixgbe_tune_poll_budget(IXGBE_TUNE_RXM_DE, 2, 64), 64);
	CHECK_EQ(ixgbe_tune_poll_budget(IXGBE_TUNE_RXM_NAPI, 2, 64), 2);
	CHECK_EQ(ixgbe_tune_poll_budget(IXGBE_TUNE_RXM_NAPI, 64, 64), 64);
	CHECK_EQ(ixgbe_tune_poll_budget(IXGBE_TUNE_RXM_NAPI, 64, 8), 8);
	CHECK_EQ(ixgbe_tune_poll_budget(IXGBE_TUNE_RXM_DE, 2, 8), 8);
}

static void test_estimator(void)
{
	struct ixgbe_tune_est est;
	unsigned long long total = 5000;

	/* 1e6 / 8192 = 122.0703125 per packet in the window, shifts only */
	for (unsigned int c = 0; c <= IXGBE_TUNE_WINDOW_COUNT_MAX; c += 997) {
		unsigned long long exact = (unsigned long long)c * 15625 / 128;
		unsigned int got = ixgbe_tune_window_to_pps(c);

		CHECK_EQ(got <= exact && exact - got <= 1, 1);
	}
	CHECK_EQ(ixgbe_tune_window_to_pps(0), 0);
	CHECK_EQ(ixgbe_tune_window_to_pps(128), 15625);
	CHECK_EQ(ixgbe_tune_window_to_pps(0xffffffffU),
		 ixgbe_tune_window_to_pps(IXGBE_TUNE_WINDOW_COUNT_MAX));

	/* first window primes: no rate from a single total */
	ixgbe_tune_est_reset(&est, total);
	CHECK_EQ(est.rate_pps, 0);
	/* 1024 packets per window = 125000 pps, the first sample is taken */
	total += 1024;
	ixgbe_tune_est_update(&est, total, 1);
	CHECK_EQ(est.rate_pps, 125000);
	/* a step down to 0 decays by 1/4 per window */
	ixgbe_tune_est_update(&est, total, 1);
	CHECK_EQ(est.rate_pps, 125000 - 31250);
	for (int i = 0; i < 60; i++)
		ixgbe_tune_est_update(&est, total, 1);
	CHECK_EQ(est.rate_pps < 4, 1);
	/* a steady rate is reached within 3 pps (EWMA floor) */
	for (int i = 0; i < 80; i++) {
		total += 800;	/* 97656.25 pps */
		ixgbe_tune_est_update(&est, total, 1);
	}
	CHECK_EQ(est.rate_pps >= 97656 - 3 && est.rate_pps <= 97656, 1);
	/* a late timer: 3 windows' worth spread over 3 windows, same rate */
	total += 2400;
	ixgbe_tune_est_update(&est, total, 3);
	CHECK_EQ(est.rate_pps >= 97656 - 3 && est.rate_pps <= 97656, 1);
	/* counters going backwards (rings reallocated) leave the rate alone */
	ixgbe_tune_est_update(&est, 10, 1);
	CHECK_EQ(est.rate_pps >= 97656 - 3 && est.rate_pps <= 97656, 1);
	CHECK_EQ(est.last_total, 10);
	/* u64 totals wrap-free: a huge jump is clamped, not overflowed */
	ixgbe_tune_est_update(&est, 10 + (1ULL << 40), 1);
	CHECK_EQ(est.rate_pps <= ixgbe_tune_window_to_pps(
				IXGBE_TUNE_WINDOW_COUNT_MAX), 1);
}

static void test_hybrid_run(void)
{
	/* estimator + hysteresis as the driver's timer runs them: a load
	 * ramp 0 -> 200 Kpps -> 0 switches DE->NAPI once and NAPI->DE once.
	 */
	unsigned int lo = ixgbe_tune_cliff_low(100000, 15);
	unsigned int hi = ixgbe_tune_cliff_high(100000, 15);
	unsigned int active = IXGBE_TUNE_RXM_DE, switches = 0;
	unsigned long long total = 0;
	struct ixgbe_tune_est est;
	int i;

	ixgbe_tune_est_reset(&est, total);
	for (i = 0; i < 600; i++) {
		unsigned int pps = i < 300 ? i * 700 : (600 - i) * 700;
		unsigned int next;

		total += (unsigned long long)pps * IXGBE_TUNE_WINDOW_US /
			 1000000;
		ixgbe_tune_est_update(&est, total, 1);
		next = ixgbe_tune_next_mode(active, est.rate_pps, lo, hi);
		switches += next != active;
		active = next;
		if (i == 299)
			CHECK_EQ(active, IXGBE_TUNE_RXM_NAPI);
	}
	CHECK_EQ(active, IXGBE_TUNE_RXM_DE);
	CHECK_EQ(switches, 2);
}

int main(void)
{
	test_itr_encoding();
	test_thresholds();
	test_hysteresis();
	test_poll_budget();
	test_estimator();
	test_hybrid_run();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
