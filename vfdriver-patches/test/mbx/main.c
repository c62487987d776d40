// SPDX-License-Identifier: GPL-2.0
/* mbx-loopback scenarios: a PF (stock or patched ixgbe) and a VF (stock
 * or patched ixgbevf, chosen at build time) talk over the fake mailbox.
 * Every PF x VF pair runs the bring-up; the patched pair runs the rest.
 * Prints one line per scenario and a summary; exit status 1 on failure.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fakehw.h"
#include "harness.h"

/* enum ixgbe_pfvf_api_rev values (both drivers) */
#define API_14 5
#define API_17 8
#define SUP_IPSEC 0x1u
#define SUP_HOST_ITR 0x80000000u

/* starts where the kernel's does, 300 s before the wrap */
unsigned long jiffies = (unsigned long)-300000L;

static unsigned int checks, failures, err_logs;
static const char *scenario;
static int pf_new;

#define CHECK(cond, ...)                                                  \
	do {                                                              \
		checks++;                                                 \
		if (!(cond)) {                                            \
			failures++;                                       \
			printf("  FAIL [%s PF, %s] line %d: ",            \
			       pf_new ? "new" : "old", scenario, __LINE__); \
			printf(__VA_ARGS__);                              \
			printf("\n");                                     \
		}                                                         \
	} while (0)

/* busy-wait time of both sides, in us; while pf_unserviced the PF does
 * not run its mailbox interrupt (a PF reset: ixgbe_reinit_locked()'s
 * msleep(2000) with SR-IOV on)
 */
unsigned long long sim_us;
static int pf_unserviced;

void shim_delay(unsigned long usecs)
{
	sim_us += usecs;
	/* the VF waits: the PF's mailbox interrupt gets to run, and the
	 * interrupt of the PF's reply reaches the VF meanwhile
	 */
	if (fake_pf_irq_pending() && !pf_unserviced)
		pf_interrupt();
	vf_irq_during_wait();
}

void shim_log(const char *level, const char *fmt, ...)
{
	va_list ap;

	if (strcmp(level, "err"))
		return;
	err_logs++;
	if (getenv("MBX_VERBOSE")) {
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
}

static void start(const char *name, int new_pf)
{
	scenario = name;
	pf_new = new_pf;
	err_logs = 0;
	fake_reset();
	pf_init(new_pf);
	CHECK(vf_probe() == 0, "VF reset/probe failed");
}

/* run the service task for @ms of time, every 100 ms */
static void run(unsigned int ms)
{
	unsigned int t;

	for (t = 0; t < ms; t += 100)
		vf_service(100);
}

static void scenario_bringup(int new_pf)
{
	struct vf_view v;
	struct pf_view p;

	start("bring-up", new_pf);
	run(5000);
	v = vf_view();
	p = pf_view();

	if (!new_pf) {
		/* stock PF: 1.4 for everybody, no feature, nothing unknown */
		CHECK(v.api == API_14, "api %u, want 1.4", v.api);
		CHECK(!v.host_itr, "feature without a PF that has it");
	} else {
		/* patched PF: 1.7 and the intersection of the features */
		CHECK(v.api == API_17, "api %u, want 1.7", v.api);
		CHECK(p.api == API_17, "PF thinks api %u", p.api);
		CHECK(p.features == (v.new_vf ? SUP_IPSEC | SUP_HOST_ITR : SUP_IPSEC),
		      "PF features 0x%x", p.features);
		CHECK(v.pf_features & SUP_IPSEC, "IPsec lost at 1.7");
		CHECK(v.host_itr == v.new_vf, "host itr %d", v.host_itr);
		CHECK(p.capable == (unsigned int)v.new_vf, "capable %u", p.capable);
		if (v.new_vf)
			CHECK(p.applied == 1 && v.reported == 1,
			      "adaptive not reported (%u, %u)", p.applied, v.reported);
		/* a host write reaches only a VF that negotiated the feature */
		CHECK(pf_host_write(PF_REQ, 50) == 0, "host write refused");
		run(2500);
		v = vf_view();
		CHECK(v.rx_usecs == (v.new_vf ? 50u : 1u), "rx-usecs %u", v.rx_usecs);
	}
	CHECK(v.rx_usecs == 1 || new_pf, "VF left adaptive: %u", v.rx_usecs);
	CHECK(pf_stats().unhandled == 0 && err_logs == 0,
	      "%u unhandled messages, %u error lines on the PF",
	      pf_stats().unhandled, err_logs);
}

static void scenario_apply_and_bounds(void)
{
	struct vf_view v;
	struct pf_view p;

	start("apply+bounds", 1);
	run(300);
	CHECK(pf_host_write(PF_REQ, 51) == 0, "write 51");
	CHECK(pf_view().req == 50, "51 rounds to 50, got %u", pf_view().req);
	run(2100);		/* within one watchdog period */
	v = vf_view();
	p = pf_view();
	CHECK(v.rx_usecs == 50 && v.eitr0 == 200, "VF runs %u us, EITR %u",
	      v.rx_usecs, v.eitr0);
	CHECK(p.applied == 50, "PF applied %u", p.applied);

	/* invalid values never reach the VF */
	CHECK(pf_host_write(PF_REQ, 1023) == -EINVAL, "1023 accepted");
	CHECK(pf_host_write(PF_MIN, 1) == -EINVAL, "bound 1 accepted");
	CHECK(pf_host_write(PF_MAX, 2000) == -EINVAL, "bound 2000 accepted");

	/* adaptive within bounds */
	CHECK(pf_host_write(PF_MAX, 100) == 0, "max 100");
	CHECK(pf_host_write(PF_MIN, 20) == 0, "min 20");
	CHECK(pf_host_write(PF_MIN, 200) == -ERANGE, "min above max accepted");
	CHECK(pf_host_write(PF_MAX, 10) == -ERANGE, "max below min accepted");
	CHECK(pf_host_write(PF_REQ, 1) == 0, "adaptive");
	run(2100);
	v = vf_view();
	CHECK(v.rx_usecs == 1 && pf_view().applied == 1, "not adaptive: %u",
	      v.rx_usecs);
	CHECK(vf_adaptive_clamp(40) == 80, "100K class not raised to min: %u",
	      vf_adaptive_clamp(40));
	CHECK(vf_adaptive_clamp(336) == 336, "12K class inside bounds moved");
	CHECK(vf_adaptive_clamp(1000) == 400, "above max: %u",
	      vf_adaptive_clamp(1000));
	/* narrowing the bounds restarts adaptive inside them */
	CHECK(pf_host_write(PF_MIN, 60) == 0, "min 60");
	run(2100);
	CHECK(vf_view().eitr0 == 240, "adaptive restart at %u, want 240",
	      vf_view().eitr0);
	CHECK(pf_host_write(PF_MIN, 0) == 0 && pf_host_write(PF_MAX, 0) == 0,
	      "clearing bounds");
	run(2100);
	CHECK(vf_adaptive_clamp(40) == 40 && vf_adaptive_clamp(4000) == 4000,
	      "bounds cleared but still clamping");
	CHECK(pf_stats().nacks == 0 && err_logs == 0, "%u NACKs, %u errors",
	      pf_stats().nacks, err_logs);
}

static void scenario_not_cts(void)
{
	unsigned int nacks;

	start("not-CTS NACK", 1);
	run(300);
	CHECK(pf_host_write(PF_REQ, 80) == 0, "write");
	pf_set_clear_to_send(0);	/* e.g. the PF is resetting VFs */
	run(4100);
	nacks = pf_stats().nacks;
	CHECK(nacks > 0, "the PF never NACKed");
	CHECK(vf_view().host_itr, "a NACK switched the feature off");
	CHECK(vf_view().rx_usecs == 1, "applied while not clear to send");
	pf_set_clear_to_send(1);
	run(2100);
	CHECK(vf_view().rx_usecs == 80 && pf_view().applied == 80,
	      "not applied after CTS came back: %u/%u", vf_view().rx_usecs,
	      pf_view().applied);
}

static unsigned int inflight_value;

static void host_write_in_flight(void)
{
	fake_on_vf_request = NULL;
	pf_host_write(PF_REQ, inflight_value);
}

static void stock_ping_in_flight(void)
{
	fake_on_vf_request = NULL;
	pf_stock_ping();
}

static void scenario_in_flight(void)
{
	start("host write in flight", 1);
	run(300);
	/* the host writes while the VF's next request is on the wire */
	inflight_value = 120;
	fake_on_vf_request = host_write_in_flight;
	run(2100);
	CHECK(fake_on_vf_request == NULL, "no VF request happened");
	run(2100);
	CHECK(vf_view().rx_usecs == 120 && pf_view().applied == 120,
	      "value lost: VF %u, PF %u", vf_view().rx_usecs,
	      pf_view().applied);
	CHECK(pf_stats().nacks == 0 && err_logs == 0,
	      "the write disturbed the mailbox: %u NACKs", pf_stats().nacks);

	/* a stock PF write (link change ping) overwrites a VF request in
	 * flight: the VF must retry, not give up on the feature
	 */
	start("stock ping in flight", 1);
	run(300);
	CHECK(pf_host_write(PF_REQ, 30) == 0, "write");
	fake_on_vf_request = stock_ping_in_flight;
	run(2100);
	CHECK(fake_on_vf_request == NULL, "no VF request happened");
	CHECK(vf_view().host_itr, "feature switched off by a lost request");
	/* the ping that destroyed the request makes the VF fetch again at
	 * its next service run instead of waiting for the next period
	 */
	run(200);
	CHECK(vf_view().rx_usecs == 30 && pf_view().applied == 30,
	      "no recovery: VF %u, PF %u", vf_view().rx_usecs,
	      pf_view().applied);
}

static void scenario_reset_and_ping(void)
{
	start("VF reset, re-apply", 1);
	run(300);
	CHECK(pf_host_write(PF_REQ, 50) == 0, "write");
	run(2100);
	CHECK(pf_view().applied == 50, "not applied before reset");
	/* the guest's interface goes down and up: the VF resets */
	CHECK(vf_probe() == 0, "reset failed");
	CHECK(!pf_view().capable && pf_view().applied == 0,
	      "PF keeps state across a VF reset");
	CHECK(vf_view().rx_usecs == 1, "VF did not start from stock");
	run(100);
	CHECK(pf_view().capable && vf_view().rx_usecs == 50 &&
	      pf_view().applied == 50, "not re-applied at once after up");

	/* the guest overrides with ethtool: reported, and it holds */
	vf_ethtool(100);
	run(2100);
	CHECK(pf_view().applied == 100, "override not reported: %u",
	      pf_view().applied);
	CHECK(vf_view().rx_usecs == 100, "host value re-imposed");
	/* a new host value wins again, right after a ping */
	CHECK(pf_host_write(PF_REQ, 60) == 0, "write");
	CHECK(pf_stock_ping() == 0, "ping");
	vf_service(1);
	CHECK(vf_view().rx_usecs == 60 && pf_view().applied == 60,
	      "ping did not trigger a fetch: %u", vf_view().rx_usecs);
	/* 0 = leave the VF alone */
	CHECK(pf_host_write(PF_REQ, 0) == 0, "write 0");
	run(2100);
	CHECK(vf_view().rx_usecs == 60, "0 changed the VF");
	CHECK(err_logs == 0, "%u error lines", err_logs);
}

static unsigned int vf_requests;

static void count_vf_request(void)
{
	vf_requests++;
}

/* F2: the PF resets with SR-IOV on and leaves the mailbox unserviced for
 * 2 s, having told the VF without CTS; the VF's fetches in that time
 * must not hold mbx_lock (BH off) for long; then the reset handshake
 * (VF_RESET through the PF's dispatcher) and the host's value again
 */
static void scenario_pf_reset(void)
{
	unsigned long long hold;
	unsigned int reqs;

	start("PF reset, mailbox unserviced 2 s", 1);
	run(300);
	CHECK(pf_host_write(PF_REQ, 50) == 0, "write");
	run(2100);
	CHECK(pf_view().applied == 50, "not applied before the PF reset");

	/* ixgbe_down(): CTS off, a ping without CTS, then 2 s of nothing */
	pf_set_clear_to_send(0);
	CHECK(pf_stock_ping() == 0, "going-down ping");
	pf_unserviced = 1;
	vf_requests = 0;
	vf_reset_mbx_hold();
	fake_on_vf_request = count_vf_request;
	CHECK(pf_host_write(PF_REQ, 60) == 0, "write during the reset");
	run(2000);
	fake_on_vf_request = NULL;
	hold = vf_max_mbx_hold_us();
	reqs = vf_requests;
	pf_unserviced = 0;
	CHECK(reqs >= 1, "the VF made no request in 2 s: nothing measured");
	/* 10 ms per step of a host-ITR request (ack, reply), not 1 s */
	CHECK(hold <= 30000, "the VF held mbx_lock %llu us while the PF was away",
	      hold);

	/* the PF is back: the VF resets, the PF answers through its own
	 * dispatcher, the value follows at once
	 */
	CHECK(vf_probe() == 0, "reset handshake failed");
	run(100);
	CHECK(pf_view().capable && vf_view().rx_usecs == 60 && pf_view().applied == 60,
	      "not applied after the reset handshake: VF %u, PF applied %u",
	      vf_view().rx_usecs, pf_view().applied);
	printf("PF reset: %u VF requests while the PF was away, longest mbx_lock hold %llu us\n",
	       reqs, hold);
}

/* fetch cadence as the PF sees it, over vf_loop() steps of 1 ms */
static struct {
	unsigned int fetches;
	unsigned long min_gap, max_gap;
} cad;

static void cadence_reset(void)
{
	memset(&cad, 0, sizeof(cad));
}

static void step(unsigned int ms)
{
	while (ms--) {
		struct pf_stats before = pf_stats();
		unsigned long gap;

		vf_loop(1);
		if (pf_stats().fetches == before.fetches)
			continue;
		gap = pf_stats().last_fetch - before.last_fetch;
		if (cad.fetches++) {
			if (cad.fetches == 2 || gap < cad.min_gap)
				cad.min_gap = gap;
			if (gap > cad.max_gap)
				cad.max_gap = gap;
		}
	}
}

/* a host write of @usecs, then time until the VF runs it and the PF's
 * itr_applied_usecs shows it (limit + 1: never)
 */
static unsigned long land_ms(unsigned int usecs, unsigned long limit)
{
	unsigned long t;

	CHECK(pf_host_write(PF_REQ, usecs) == 0, "write %u", usecs);
	for (t = 0; t <= limit; t++) {
		if (vf_view().rx_usecs == usecs && pf_view().applied == usecs)
			return t;
		step(1);
	}
	return t;
}

/* The host's writes while it tunes a VF: the first after a quiet spell
 * waits for the VF's next 2 s fetch, whose reply says "busy"; from then
 * on the patched VF fetches every 250 ms until 10 s after the last
 * write.  Every other pair keeps its 2 s period and parses the values
 * as before.  The service timer, and with it the link check and the tx
 * hang check, stays at 2 s throughout, in every pair.
 */
static void scenario_fast_fetch(void)
{
	struct vf_view v = vf_view();
	int fast = v.fast_vf && pf_has_busy_flag();
	unsigned long limit = fast ? 250 : 2000;
	unsigned long t, worst = 0, fast_fetches;
	struct vf_loop_stats ls;
	unsigned int i;

	/* the last write's busy window below spans the jiffies wrap */
	jiffies = (unsigned long)(fast ? -25000L : -35000L);
	start(fast ? "fast fetch while busy" : "2 s fetch without the busy flag", 1);
	if (!v.new_vf) {
		/* stock VF: nothing lands, but the service loop runs */
		step(20000);
		CHECK(land_ms(50, 4000) > 4000, "stock VF took a host value");
		goto cadence;
	}
	step(4500);
	cadence_reset();
	step(6000);
	CHECK(cad.fetches == 3 && cad.min_gap == 2000 && cad.max_gap == 2000,
	      "quiet VF: %u fetches, gaps %lu..%lu ms, want 2000",
	      cad.fetches, cad.min_gap, cad.max_gap);

	/* nothing can make the first write faster: no PF mailbox write */
	step(700);
	t = land_ms(50, 2000);
	CHECK(t <= 2000 && t > 250, "first write landed after %lu ms", t);

	/* a search's probes, one a second */
	cadence_reset();
	for (i = 0; i < 8; i++) {
		step(1000);
		t = land_ms(60 + 10 * i, 2000);
		CHECK(t <= limit, "write %u landed after %lu ms, want <= %lu",
		      i, t, limit);
		if (t > worst)
			worst = t;
	}
	if (fast)
		CHECK(cad.min_gap >= 250 && cad.max_gap <= 250 + 20,
		      "busy: fetch gaps %lu..%lu ms, want 250 (+20 retry)",
		      cad.min_gap, cad.max_gap);
	else
		CHECK(worst > 250 && cad.min_gap >= 2000,
		      "fetched fast without the flag: worst %lu ms, gap %lu",
		      worst, cad.min_gap);
	/* values and bounds parse as before, busy flag or not */
	CHECK(pf_host_write(PF_MAX, 100) == 0 && pf_host_write(PF_MIN, 20) == 0 &&
	      pf_host_write(PF_REQ, 1) == 0, "bounds");
	CHECK((long)jiffies < 0 && (long)(jiffies + 10000) > 0,
	      "the busy window does not span the jiffies wrap");
	step(limit + 1);
	CHECK(vf_view().rx_usecs == 1 && vf_adaptive_clamp(40) == 80 &&
	      vf_adaptive_clamp(1000) == 400 && pf_view().applied == 1,
	      "bounds not in force %lu ms after the write", limit + 1);

	/* the window closes 10 s after the last write */
	cadence_reset();
	step(9750);
	fast_fetches = cad.fetches;
	CHECK(fast ? fast_fetches >= 38 : fast_fetches <= 5,
	      "%lu fetches in the 10 s after the last write", fast_fetches);
	step(4250);		/* last fast fetch, then one 2 s period */
	cadence_reset();
	step(8000);
	CHECK(cad.fetches == 4 && cad.min_gap == 2000 && cad.max_gap == 2000,
	      "after the window: %u fetches, gaps %lu..%lu ms, want 2000",
	      cad.fetches, cad.min_gap, cad.max_gap);

cadence:
	ls = vf_loop_stats();
	CHECK(ls.timer_ticks > 10 && ls.watchdog_runs == ls.timer_ticks,
	      "%u service timer ticks but %u full runs", ls.timer_ticks,
	      ls.watchdog_runs);
	CHECK(ls.hang_checks == ls.timer_ticks && ls.min_hang_gap == 2000 &&
	      ls.max_hang_gap == 2000,
	      "tx hang check: %u in %u ticks, gaps %lu..%lu ms, want 2000",
	      ls.hang_checks, ls.timer_ticks, ls.min_hang_gap,
	      ls.max_hang_gap);
	CHECK(fast ? ls.runs > ls.watchdog_runs : ls.runs == ls.watchdog_runs,
	      "%u fetch-only runs", ls.runs - ls.watchdog_runs);
	CHECK(pf_stats().nacks == 0 && pf_stats().unhandled == 0 && err_logs == 0,
	      "%u NACKs, %u unhandled, %u error lines", pf_stats().nacks,
	      pf_stats().unhandled, err_logs);
	printf("%s: %u service runs (%u fetch-only), hang check every %lu ms, "
	       "probes landed within %lu ms\n", scenario, ls.runs,
	       ls.runs - ls.watchdog_runs, ls.max_hang_gap, worst);
}

/* host_itr_timer fires while another service run is under way: queued
 * before the run's fetch, the run fetches and nothing more; after it,
 * the timer looks again 20 ms later and fetches then, once
 */
static void scenario_timer_during_run(void)
{
	unsigned long due, f0;

	start("fast timer during a full run", 1);
	step(3000);
	CHECK(pf_host_write(PF_REQ, 40) == 0, "write");
	step(2100);		/* the next 2 s fetch said busy */
	due = vf_host_itr_due();
	CHECK(due && due - jiffies <= 250, "no fast fetch armed");

	/* a full run due at the timer's jiffy: it fetches, once */
	step(due - jiffies - 1);
	f0 = pf_stats().fetches;
	jiffies++;
	vf_service_now(0);
	step(249);
	CHECK(pf_stats().fetches == f0 + 1 && pf_stats().last_fetch == due,
	      "full run at the fast fetch's jiffy: %lu fetches, last at %+ld",
	      pf_stats().fetches - f0, (long)(pf_stats().last_fetch - due));
	step(1);
	CHECK(pf_stats().fetches == f0 + 2 && pf_stats().last_fetch == due + 250,
	      "fast cadence lost after a full run");

	/* a full run one jiffy early, the timer firing after its fetch */
	due = vf_host_itr_due();
	step(due - jiffies - 1);
	f0 = pf_stats().fetches;
	vf_service_now(1);
	CHECK(jiffies == due && pf_stats().fetches == f0,
	      "the early run fetched or the timer did not fire");
	step(19);
	CHECK(pf_stats().fetches == f0, "fetched before the timer looked again");
	step(1);
	CHECK(pf_stats().fetches == f0 + 1 && pf_stats().last_fetch == due + 20,
	      "timer's second look: %lu fetches, last at %+ld",
	      pf_stats().fetches - f0, (long)(pf_stats().last_fetch - due));
	step(250);
	CHECK(pf_stats().fetches == f0 + 2 &&
	      pf_stats().last_fetch == due + 270, "cadence after the retry");
	CHECK(vf_view().rx_usecs == 40 && pf_stats().nacks == 0 && err_logs == 0,
	      "VF %u, %u NACKs, %u error lines", vf_view().rx_usecs,
	      pf_stats().nacks, err_logs);
}

int main(void)
{
	struct vf_view v;
	int pf;

	for (pf = pf_real_only(); pf <= 1; pf++) {
		unsigned int f0 = failures;

		scenario_bringup(pf);
		v = vf_view();
		printf("%s PF x %s VF: api %s, features 0x%08x, %s\n",
		       !pf ? "old" : pf_has_busy_flag() ? "new" : "cur",
		       v.fast_vf ? "new" : v.new_vf ? "cur" : "old",
		       v.api == API_17 ? "1.7" : v.api == API_14 ? "1.4" : "?",
		       v.pf_features, failures == f0 ? "ok" : "FAILED");
	}
	if (vf_view().new_vf) {
		scenario_apply_and_bounds();
		scenario_not_cts();
		scenario_in_flight();
		scenario_reset_and_ping();
		scenario_pf_reset();
	}
	scenario_fast_fetch();
	if (vf_view().fast_vf && pf_has_busy_flag())
		scenario_timer_during_run();
	CHECK(pf_stubbed() == 0, "%u requests reached a stubbed PF handler", pf_stubbed());
	printf("%u checks, %u failed\n", checks, failures);
	return failures ? 1 : 0;
}
