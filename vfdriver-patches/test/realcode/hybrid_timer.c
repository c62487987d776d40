// SPDX-License-Identifier: GPL-2.0
/* hybrid-timer: the hybrid rx mode's estimator timer against rxmode/mode
 * stores and down/up, with the real ixgbe_rxm_timer(), ixgbe_rxmode_start(),
 * ixgbe_rxmode_stop(), mode_store(), ixgbe_rxm_set_active(),
 * ixgbe_rxm_rx_packets() and struct ixgbe_rxmode cut out of the patched
 * sources, the real ixgbe_tune.h, rxm->lock as a pthread mutex, and an
 * hrtimer stand-in with the kernel's rules: hrtimer_active() is true while
 * the callback runs, a timer started during its callback stays queued
 * when the callback returns HRTIMER_NORESTART, hrtimer_cancel() waits for
 * a running callback.
 *
 * 1. Injected: a mode store (or down/up) runs at each point where the
 *    callback has just dropped rxm->lock, as if on another CPU, 3000
 *    seeded sequences.
 * 2. Threaded: a timer thread fires the callback back to back while
 *    another thread stores random modes, 2000 stores, then "hybrid".
 * After every step: the estimator timer is queued exactly when the mode
 * is hybrid and the interface is up, and in hybrid with traffic the rate
 * estimate is not 0.
 */
#include "common.h"

void (*lock_hook)(spinlock_t *l, bool taken);
spinlock_t *volatile contended;

typedef s64 ktime_t;
enum hrtimer_restart { HRTIMER_NORESTART, HRTIMER_RESTART };
#define CLOCK_MONOTONIC		1
#define HRTIMER_MODE_REL_SOFT	2

struct hrtimer {
	enum hrtimer_restart (*function)(struct hrtimer *t);
	int enqueued;
	int running;
};

static pthread_mutex_t tm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tc = PTHREAD_COND_INITIALIZER;
static s64 clock_ns = 1000000000;

static ktime_t ktime_get(void)
{
	return __atomic_load_n(&clock_ns, __ATOMIC_SEQ_CST);
}

#define ktime_sub(a, b)		((a) - (b))
#define ktime_to_ns(a)		(a)
#define ns_to_ktime(a)		((ktime_t)(a))

static void hrtimer_init(struct hrtimer *t, int clock, int mode)
{
	memset(t, 0, sizeof(*t));
}

static void hrtimer_start(struct hrtimer *t, ktime_t in, int mode)
{
	pthread_mutex_lock(&tm);
	t->enqueued = 1;
	pthread_mutex_unlock(&tm);
}

static bool hrtimer_active(struct hrtimer *t)
{
	bool r;

	pthread_mutex_lock(&tm);
	r = t->enqueued || t->running;
	pthread_mutex_unlock(&tm);
	return r;
}

static int hrtimer_cancel(struct hrtimer *t)
{
	pthread_mutex_lock(&tm);
	t->enqueued = 0;
	while (t->running)
		pthread_cond_wait(&tc, &tm);
	pthread_mutex_unlock(&tm);
	return 0;
}

static u64 hrtimer_forward_now(struct hrtimer *t, ktime_t interval)
{
	return 1;
}

static __thread bool in_timer;

/* __run_hrtimer(): dequeue, run, requeue on RESTART unless started meanwhile */
static bool hrtimer_fire(struct hrtimer *t)
{
	enum hrtimer_restart r;

	pthread_mutex_lock(&tm);
	if (!t->enqueued) {
		pthread_mutex_unlock(&tm);
		return false;
	}
	t->enqueued = 0;
	t->running = 1;
	pthread_mutex_unlock(&tm);
	in_timer = true;
	r = t->function(t);
	in_timer = false;
	pthread_mutex_lock(&tm);
	t->running = 0;
	if (r == HRTIMER_RESTART && !t->enqueued)
		t->enqueued = 1;
	pthread_cond_broadcast(&tc);
	pthread_mutex_unlock(&tm);
	return true;
}

static bool timer_queued(struct hrtimer *t)
{
	bool r;

	pthread_mutex_lock(&tm);
	r = t->enqueued;
	pthread_mutex_unlock(&tm);
	return r;
}

/* the kernel bits the cut functions use */
struct device;
struct device_attribute;
#define capable(c)		1
#define CAP_NET_ADMIN		12
#define EPERM			1
#define EINVAL			22
#define u64_stats_fetch_begin_irq(s)	((void)(s), 0U)
#define u64_stats_fetch_retry_irq(s, n)	((void)(s), (void)(n), 0)
#define rcu_read_lock()		do { } while (0)
#define rcu_read_unlock()	do { } while (0)
#define pci_get_drvdata(p)	((struct ixgbe_adapter *)(p))
#define to_pci_dev(d)		((void *)(d))
enum { __IXGBE_DOWN };

static int sysfs_match_string(const char * const *array, const char *buf)
{
	int i;

	for (i = 0; i < 3; i++) {
		size_t n = strlen(array[i]);

		if (!strncmp(array[i], buf, n) && (!buf[n] || !strcmp(buf + n, "\n")))
			return i;
	}
	return -EINVAL;
}

#include "ixgbe_tune.h"
#include "rxm_defs.inc"

struct u64_stats_sync {
	int dummy;
};

struct ixgbe_ring {
	struct u64_stats_sync syncp;
	struct {
		u64 packets;
	} stats;
};

struct ixgbe_adapter {
	struct ixgbe_rxmode rxm;
	unsigned long state;
	int num_rx_queues;
	struct ixgbe_ring *rx_ring[2];
};

#include "rxm_a.inc"
#ifdef MUTANT
#include "mutant.inc"
#else
#include "rxm_start.inc"
#endif
#include "rxm_b.inc"

static struct ixgbe_adapter ad;
static struct ixgbe_ring rings[2];
static unsigned int seed = 53;
static const char *const stores[] = { "napi\n", "de\n", "hybrid\n" };
static const char *const names[] = { "napi", "de", "hybrid" };

static void store(int mode)
{
	ssize_t r = mode_store((struct device *)&ad, NULL, stores[mode], strlen(stores[mode]));

	CHECK(r == (ssize_t)strlen(stores[mode]), "store %s: %zd", names[mode], r);
}

static void down(void)
{
	set_bit(__IXGBE_DOWN, &ad.state);	/* ixgbe_down() */
	ixgbe_rxmode_stop(&ad);
}

static void up(void)
{
	clear_bit(__IXGBE_DOWN, &ad.state);	/* ixgbe_up_complete() */
	ixgbe_rxmode_start(&ad);
}

/* one of: store napi, de, hybrid, down, up */
static void op(int k)
{
	if (k < 3)
		store(k);
	else if (k == 3)
		down();
	else
		up();
}

static int inject = -1;
static bool stop_pending;
static unsigned int injections, injected_at_norestart;

static void hook(spinlock_t *l, bool taken)
{
	int k = inject;

	if (taken || !in_timer || k < 0 || l != &ad.rxm.lock)
		return;
	inject = -1;
	injections++;
	if (READ_ONCE(ad.rxm.mode) != IXGBE_TUNE_RXM_HYBRID ||
	    test_bit(__IXGBE_DOWN, &ad.state))
		injected_at_norestart++;
	in_timer = false;	/* another CPU */
	if (k == 3) {
		/* ixgbe_down(): __IXGBE_DOWN now, ixgbe_rxmode_stop() waits
		 * for this callback, so it runs once the callback is done
		 */
		set_bit(__IXGBE_DOWN, &ad.state);
		stop_pending = true;
	} else {
		op(k);
	}
	in_timer = true;
}

static void traffic(void)
{
	__atomic_fetch_add(&rings[0].stats.packets, 900, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&rings[1].stats.packets, 300, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&clock_ns, IXGBE_TUNE_WINDOW_NS, __ATOMIC_SEQ_CST);
}

static bool want_timer(void)
{
	return READ_ONCE(ad.rxm.mode) == IXGBE_TUNE_RXM_HYBRID &&
	       !test_bit(__IXGBE_DOWN, &ad.state);
}

static void check_quiescent(const char *how, unsigned int round)
{
	bool q = timer_queued(&ad.rxm.timer);
	int i;

	if (!want_timer()) {
		/* it stops itself at its next run */
		hrtimer_fire(&ad.rxm.timer);
		q = timer_queued(&ad.rxm.timer);
		CHECK(!q, "%s %u: mode %s%s, estimator timer still queued after a run",
		      how, round, names[ad.rxm.mode],
		      test_bit(__IXGBE_DOWN, &ad.state) ? " (down)" : "");
		CHECK(ad.rxm.est.rate_pps == 0, "%s %u: mode %s, rate_pps %u",
		      how, round, names[ad.rxm.mode], ad.rxm.est.rate_pps);
		return;
	}
	CHECK(q, "%s %u: mode hybrid and up, estimator timer stopped: hybrid with no estimator",
	      how, round);
	for (i = 0; i < 3; i++) {
		traffic();
		hrtimer_fire(&ad.rxm.timer);
	}
	CHECK(ad.rxm.est.rate_pps > 0, "%s %u: hybrid with traffic, rate_pps %u",
	      how, round, ad.rxm.est.rate_pps);
}

static volatile bool stop_timer;

static void *timer_thread(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop_timer, __ATOMIC_SEQ_CST)) {
		traffic();
		if (!hrtimer_fire(&ad.rxm.timer))
			sched_yield();
	}
	return NULL;
}

int main(void)
{
	unsigned int round, i;
	pthread_t t;

	spin_lock_init(&ad.rxm.lock);
	ad.num_rx_queues = 2;
	ad.rx_ring[0] = &rings[0];
	ad.rx_ring[1] = &rings[1];
	hrtimer_init(&ad.rxm.timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_SOFT);
	ad.rxm.timer.function = ixgbe_rxm_timer;
	ad.rxm.cliff_pps = 100000;
	ad.rxm.cliff_low_pps = ixgbe_tune_cliff_low(100000, 15);
	ad.rxm.cliff_high_pps = ixgbe_tune_cliff_high(100000, 15);
	lock_hook = hook;
	up();

	/* 1: injected at the callback's lock drops */
	for (round = 0; round < 3000; round++) {
		int before = rand_r(&seed) % 5, x = rand_r(&seed) % 5;

		/* the reviewed case first: hybrid, a store of napi or de,
		 * and hybrid again while the callback returns NORESTART
		 */
		if (round < 2) {
			before = 2;
			x = round;
		}
		op(2);
		op(4);
		check_quiescent("start", round);
		op(before);
		op(x);
		inject = round < 2 ? 2 : rand_r(&seed) % 5;
		traffic();
		if (!hrtimer_fire(&ad.rxm.timer) && inject >= 0)
			op(inject);	/* nothing ran: the store just happens */
		inject = -1;
		if (stop_pending)
			ixgbe_rxmode_stop(&ad);
		stop_pending = false;
		check_quiescent("injected", round);
	}

	/* 2: threaded */
	op(4);
	op(2);
	pthread_create(&t, NULL, timer_thread, NULL);
	lock_hook = NULL;
	for (i = 0; i < 2000; i++)
		store(rand_r(&seed) % 3);
	store(2);
	__atomic_store_n(&stop_timer, true, __ATOMIC_SEQ_CST);
	pthread_join(t, NULL);
	check_quiescent("threaded", i);

	printf("%lu checks, %lu failed: 3000 injected sequences (%u stores or down/up inside the callback, %u of them while it returned NORESTART), 2000 threaded stores\n",
	       checks, failures, injections, injected_at_norestart);
	return failures ? 1 : 0;
}
