// SPDX-License-Identifier: GPL-2.0
/* vf-itr-race: ixgbevf's adaptive update in the poll against the service
 * task's (or ethtool's) ixgbevf_set_itr_usecs(), on two threads with the
 * real ixgbevf_set_itr(), ixgbevf_update_itr(), ixgbevf_set_itr_usecs()
 * and ixgbevf_write_eitr() cut out of the patched ixgbevf_main.c, the
 * real host_itr.h, and itr_lock as a pthread mutex.  Mirrored: the poll's
 * "if (adapter->rx_itr_setting == 1) ixgbevf_set_itr(q_vector);" (checked
 * against ixgbevf_poll() by realcode-tests) and the traffic counters.
 *
 * 1. Forced interleaving: the poll is stopped at its EITR write (an
 *    adaptive value), the other thread fixes the interval meanwhile (or
 *    blocks on itr_lock trying), then the poll goes on.  VTEITR must hold
 *    the fixed value afterwards, and so must the value reported to the PF.
 * 2. Free running: both threads at full speed, 2000 fixed or adaptive
 *    settings; after each fixed one and two more polls, VTEITR holds it.
 */
#include "common.h"
#include <time.h>

void (*lock_hook)(spinlock_t *l, bool taken);
spinlock_t *volatile contended;

#define NON_Q_VECTORS		1
#define IXGBEVF_Q_VECTORS	2

enum latency_range {
	lowest_latency = 0,
	low_latency = 1,
	bulk_latency = 2,
	latency_invalid = 255
};

struct ixgbevf_ring_container {
	void *ring;
	unsigned int total_bytes;
	unsigned int total_packets;
	u8 count;
	u8 itr;
};

struct ixgbevf_adapter;

struct ixgbevf_q_vector {
	struct ixgbevf_adapter *adapter;
	u16 v_idx;
	u16 itr;
	spinlock_t itr_lock;
	struct ixgbevf_ring_container rx, tx;
};

struct ixgbe_hw {
	int dummy;
};

#include "vf_itr_defs.inc"
#include "host_itr.h"

struct ixgbevf_adapter {
	struct ixgbe_hw hw;
	u16 rx_itr_setting;
	u16 tx_itr_setting;
	int num_msix_vectors;
	struct ixgbevf_q_vector *q_vector[IXGBEVF_Q_VECTORS];
	struct ixgbevf_host_itr_state host_itr;
};

static volatile u32 vteitr[IXGBEVF_Q_VECTORS];
static __thread bool in_poll;
static void poll_writes_eitr(void);

static void write_reg(u32 reg, u32 val)
{
	if (in_poll)
		poll_writes_eitr();
	vteitr[(reg - IXGBE_VTEITR(0)) / 4] = val;
}

#define IXGBE_WRITE_REG(hw, reg, val) ((void)(hw), write_reg((reg), (val)))

#include "vf_itr_base.inc"
#ifdef MUTANT
#include "mutant.inc"
#else
#include "vf_itr.inc"
#endif

static struct ixgbevf_adapter ad;
static struct ixgbevf_q_vector qv[IXGBEVF_Q_VECTORS];
static unsigned long polls;
static bool stop;
static unsigned int seed = 53;

/* forced interleaving (1): the poll stops at its EITR write */
static volatile int phase;	/* 0 off, 1 poll waits at the write, 2 setter done */
static u32 inject_usecs;

static void poll_writes_eitr(void)
{
	if (!__atomic_load_n(&phase, __ATOMIC_SEQ_CST))
		return;
	__atomic_store_n(&phase, 1, __ATOMIC_SEQ_CST);
	/* until the setter is done or blocked on itr_lock */
	while (__atomic_load_n(&phase, __ATOMIC_SEQ_CST) == 1 && !contended)
		sched_yield();
}

static void poll_once(struct ixgbevf_q_vector *q, unsigned int *rnd)
{
	unsigned int r = rand_r(rnd);

	/* traffic since the last interrupt: idle, light or bulk */
	q->rx.total_packets = 1 + r % 64;
	q->rx.total_bytes = (r >> 8) % 3 == 0 ? 64 * q->rx.total_packets :
			    (r >> 8) % 3 == 1 ? 4000 : 200000;
	in_poll = true;
	/* ixgbevf_poll(), after napi_complete_done() */
	if (READ_ONCE(ad.rx_itr_setting) == 1)
		ixgbevf_set_itr(q);
	in_poll = false;
	__atomic_fetch_add(&polls, 1, __ATOMIC_SEQ_CST);
}

static void *poller(void *arg)
{
	unsigned int rnd = 7;

	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_SEQ_CST)) {
		poll_once(&qv[0], &rnd);
		poll_once(&qv[1], &rnd);
		sched_yield();	/* another interrupt, later */
	}
	return NULL;
}

static void wait_polls(unsigned long n)
{
	unsigned long until = __atomic_load_n(&polls, __ATOMIC_SEQ_CST) + n;

	while (__atomic_load_n(&polls, __ATOMIC_SEQ_CST) < until)
		sched_yield();
}

static u32 reported(void)
{
	/* what ixgbevf_host_itr_subtask() reports as applied */
	return ad.rx_itr_setting > 1 ? ad.rx_itr_setting >> 2 : ad.rx_itr_setting;
}

static void check_fixed(u32 usecs, const char *how, unsigned int round)
{
	int v;

	for (v = 0; v < 2; v++) {
		u32 eitr = vteitr[v] & IXGBE_MAX_EITR;

		CHECK(eitr == usecs << 2, "%s round %u: host set %u us, vector %d VTEITR %u us",
		      how, round, usecs, v, eitr >> 2);
		CHECK(reported() == eitr >> 2, "%s round %u: reports %u us, VTEITR %u us",
		      how, round, reported(), eitr >> 2);
	}
#ifdef MUTANT
	if (failures)
		exit(1);	/* it sees the defect; no need to go on */
#endif
}

int main(void)
{
	pthread_t t;
	unsigned int round, forced_contended = 0;
	int v;

	ad.num_msix_vectors = IXGBEVF_Q_VECTORS + NON_Q_VECTORS;
	for (v = 0; v < IXGBEVF_Q_VECTORS; v++) {
		qv[v].adapter = &ad;
		qv[v].v_idx = v;
		qv[v].rx.count = 1;
		qv[v].tx.count = 1;
		spin_lock_init(&qv[v].itr_lock);
		ad.q_vector[v] = &qv[v];
	}
	ixgbevf_set_itr_usecs(&ad, 1, 1);

	pthread_create(&t, NULL, poller, NULL);

	/* 1: forced interleavings */
	for (round = 0; round < 200; round++) {
		u32 usecs = 2 * (1 + rand_r(&seed) % 511);

		ixgbevf_set_itr_usecs(&ad, 1, 1);	/* back to adaptive */
		wait_polls(4);
		contended = NULL;
		__atomic_store_n(&phase, 3, __ATOMIC_SEQ_CST);	/* armed */
		/* wait for the poll to reach an EITR write */
		while (__atomic_load_n(&phase, __ATOMIC_SEQ_CST) != 1)
			sched_yield();
		inject_usecs = usecs;
		ixgbevf_set_itr_usecs(&ad, usecs, usecs);
		if (contended)
			forced_contended++;
		__atomic_store_n(&phase, 0, __ATOMIC_SEQ_CST);
		wait_polls(4);
		check_fixed(usecs, "forced", round);
	}

	/* 2: free running */
	for (round = 0; round < 2000; round++) {
		u32 r = rand_r(&seed);
		u32 usecs = r % 4 ? 2 * (1 + (r >> 2) % 511) : 1;

		ixgbevf_set_itr_usecs(&ad, usecs, usecs);
		wait_polls(2);
		if (usecs != 1)
			check_fixed(usecs, "free", round);
	}
	__atomic_store_n(&stop, true, __ATOMIC_SEQ_CST);
	pthread_join(t, NULL);

	printf("%lu checks, %lu failed: 200 forced interleavings (the setter blocked on itr_lock in %u), 2000 free-running settings over %lu polls\n",
	       checks, failures, forced_contended, polls);
	return failures ? 1 : 0;
}
