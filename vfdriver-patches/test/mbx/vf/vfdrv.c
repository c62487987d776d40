// SPDX-License-Identifier: GPL-2.0
/* VF side of mbx-loopback: the real vf.c and mbx.c of ixgbevf, and the
 * service-task functions cut out of ixgbevf_main.c at build time
 * (vf_main.inc): API and feature negotiation, the service timer, the
 * mailbox interrupt, the service task and, in the patched driver, the
 * host-set interval subtask, ixgbevf_set_itr_usecs() and the fast-fetch
 * timer.  What is written here mirrors probe/open, the kernel's timers
 * and workqueue, and the subtasks the loopback does not run for real.
 * Built three times: from the pristine sources (old VF), with VF_NEW
 * from the series without its fast-fetch patch (cur VF) and with VF_NEW
 * and VF_FAST from the whole series (new VF).
 */
#include <stdlib.h>
#include "vf.h"
#include "ixgbevf.h"
#include "fakehw.h"
#include "harness.h"

static u8 vf_bar[0x4000];	/* hw_addr: only the offset matters */
static struct ixgbevf_adapter adapter_store;
static struct ixgbevf_q_vector q_vectors[IXGBEVF_Q_VECTORS];
#define rtnl_lock() do { } while (0)
#define rtnl_unlock() do { } while (0)
/* mbx_lock: how long it is held, in busy-wait time */
static unsigned long long mbx_taken, mbx_max_hold;

static void vf_lock_bh(spinlock_t *l);
static void vf_unlock_bh(spinlock_t *l);
#define spin_lock_bh(l) vf_lock_bh(l)
#define spin_unlock_bh(l) vf_unlock_bh(l)
/* single-threaded here: locks only have to compile (test/vf_itr_race.c
 * runs the ITR code with real locks)
 */
#define spin_lock_irqsave(l, f) do { (void)(l); (f) = 0; } while (0)
#define spin_unlock_irqrestore(l, f) do { (void)(l); (void)(f); } while (0)

static inline int test_bit(int nr, const unsigned long *addr)
{
	return (*addr >> nr) & 1;
}

static inline void set_bit(int nr, unsigned long *addr)
{
	*addr |= 1UL << nr;
}

static inline void clear_bit(int nr, unsigned long *addr)
{
	*addr &= ~(1UL << nr);
}

static inline int test_and_clear_bit(int nr, unsigned long *addr)
{
	int old = test_bit(nr, addr);

	clear_bit(nr, addr);
	return old;
}

static inline int test_and_set_bit(int nr, unsigned long *addr)
{
	int old = test_bit(nr, addr);

	set_bit(nr, addr);
	return old;
}

#define BUG_ON(cond) do { if (cond) abort(); } while (0)
#define smp_mb__before_atomic() do { } while (0)

/* the kernel's timers and workqueue, as vf_loop() runs them */
static int ixgbevf_wq_token;
static int *const ixgbevf_wq = &ixgbevf_wq_token;

static int mod_timer(struct timer_list *t, unsigned long expires)
{
	int was = t->pending;

	t->expires = expires;
	t->pending = 1;
	return was;
}

static bool queue_work(int *wq, struct work_struct *work)
{
	int was = work->pending;

	(void)wq;
	work->pending = 1;
	return !was;
}

/* the subtasks the loopback does not run for real: the watchdog's link
 * check (which reads PF control messages) and a record of when the
 * tx hang check ran
 */
static struct vf_loop_stats loop;
static unsigned long last_hang_check;
static int timer_fires_in_run;	/* vf_service_now(1) */
static void timer_fires_now(void);

static void ixgbevf_queue_reset_subtask(struct ixgbevf_adapter *adapter)
{
}

static void ixgbevf_reset_subtask(struct ixgbevf_adapter *adapter)
{
}

static void ixgbevf_down(struct ixgbevf_adapter *adapter)
{
}

static void ixgbevf_watchdog_subtask(struct ixgbevf_adapter *adapter)
{
	struct ixgbe_hw *hw = &adapter->hw;
	ixgbe_link_speed speed;
	bool link_up;

	loop.watchdog_runs++;
	spin_lock_bh(&adapter->mbx_lock);
	hw->mac.ops.check_link(hw, &speed, &link_up, false);
	spin_unlock_bh(&adapter->mbx_lock);
}

static void ixgbevf_check_hang_subtask(struct ixgbevf_adapter *adapter)
{
	unsigned long gap = jiffies - last_hang_check;

	if (loop.hang_checks++) {
		if (loop.hang_checks == 2 || gap < loop.min_hang_gap)
			loop.min_hang_gap = gap;
		if (gap > loop.max_hang_gap)
			loop.max_hang_gap = gap;
	}
	last_hang_check = jiffies;
	/* the last subtask: the run is past its fetch */
	if (timer_fires_in_run)
		timer_fires_now();
}

u32 shim_vf_readl(const volatile void *addr)
{
	return fake_vf_read((u32)((const volatile u8 *)addr - vf_bar));
}

void shim_vf_writel(u32 value, volatile void *addr)
{
	fake_vf_write((u32)((volatile u8 *)addr - vf_bar), value);
}

u32 ixgbevf_read_reg(struct ixgbe_hw *hw, u32 reg)
{
	return readl(hw->hw_addr + reg);
}

#include "vf_main.inc"

static struct ixgbevf_adapter *const adapter = &adapter_store;

int vf_probe(void)
{
	struct ixgbe_hw *hw = &adapter->hw;
	const struct ixgbevf_info *ii = &ixgbevf_82599_vf_info;
	int i, err;

	memset(adapter, 0, sizeof(*adapter));
	hw->back = adapter;
	hw->hw_addr = vf_bar;
	hw->mac.type = ii->mac;
	memcpy(&hw->mac.ops, ii->mac_ops, sizeof(hw->mac.ops));
	memcpy(&hw->mbx.ops, &ixgbevf_mbx_ops_legacy,
	       sizeof(struct ixgbe_mbx_operations));
	hw->mbx.ops.init_params(hw);
	adapter->rx_itr_setting = 1;
	adapter->tx_itr_setting = 1;
	adapter->num_msix_vectors = IXGBEVF_Q_VECTORS + NON_Q_VECTORS;
	for (i = 0; i < IXGBEVF_Q_VECTORS; i++) {
		q_vectors[i].adapter = adapter;
		q_vectors[i].v_idx = i;
		q_vectors[i].itr = IXGBE_20K_ITR;
		q_vectors[i].rx.count = 1;
		q_vectors[i].tx.count = 1;
		adapter->q_vector[i] = &q_vectors[i];
	}

	/* ixgbevf_reset() from ixgbevf_open(), then ixgbevf_up_complete() */
	set_bit(__IXGBEVF_DOWN, &adapter->state);
	err = hw->mac.ops.reset_hw(hw);
	if (err)
		return err;
	hw->mac.ops.init_hw(hw);
	ixgbevf_negotiate_api(adapter);
	clear_bit(__IXGBEVF_DOWN, &adapter->state);
	hw->mac.get_link_status = 1;
#ifdef VF_NEW
	ixgbevf_host_itr_forget(&adapter->host_itr);
	set_bit(__IXGBEVF_HOST_ITR_SYNC, &adapter->state);
#endif
	/* ixgbevf_up_complete(): the service task runs at once */
	mod_timer(&adapter->service_timer, jiffies);
	memset(&loop, 0, sizeof(loop));
	return 0;
}

static int in_loop;

void vf_irq_during_wait(void)
{
	if (in_loop && fake_vf_irq_take())
		ixgbevf_msix_other(0, adapter);
}

static bool timer_due(struct timer_list *t)
{
	if (!t->pending || time_before(jiffies, t->expires))
		return false;
	t->pending = 0;
	return true;
}

void vf_loop(unsigned int ms)
{
	in_loop = 1;
	while (ms--) {
		jiffies++;
#ifdef VF_FAST
		/* first, so that a tick in the same jiffy finds its run */
		if (timer_due(&adapter->host_itr_timer))
			ixgbevf_host_itr_timer(&adapter->host_itr_timer);
#endif
		if (timer_due(&adapter->service_timer)) {
			loop.timer_ticks++;
			ixgbevf_service_timer(&adapter->service_timer);
		}
		/* a PF message that came while nobody waited */
		vf_irq_during_wait();
		if (adapter->service_task.pending) {
			adapter->service_task.pending = 0;
			loop.runs++;
			ixgbevf_service_task(&adapter->service_task);
		}
	}
	in_loop = 0;
}

struct vf_loop_stats vf_loop_stats(void)
{
	return loop;
}

/* the run takes until host_itr_timer expires, and the timer fires */
static void timer_fires_now(void)
{
	timer_fires_in_run = 0;
#ifdef VF_FAST
	if (!adapter->host_itr_timer.pending)
		return;
	jiffies = adapter->host_itr_timer.expires;
	adapter->host_itr_timer.pending = 0;
	ixgbevf_host_itr_timer(&adapter->host_itr_timer);
#endif
}

/* something else (a reset request, a link interrupt) runs the service
 * task now; with @timer_meanwhile, host_itr_timer fires while it runs,
 * after its fetch subtask
 */
void vf_service_now(int timer_meanwhile)
{
	in_loop = 1;
	timer_fires_in_run = timer_meanwhile;
	ixgbevf_service_event_schedule(adapter);
	if (adapter->service_task.pending) {
		adapter->service_task.pending = 0;
		loop.runs++;
		ixgbevf_service_task(&adapter->service_task);
	}
	timer_fires_in_run = 0;
	in_loop = 0;
}

unsigned long vf_host_itr_due(void)
{
#ifdef VF_FAST
	if (adapter->host_itr_timer.pending)
		return adapter->host_itr_timer.expires;
#endif
	return 0;
}

/* time passes, then the service task runs: the mailbox interrupt
 * (ixgbevf_msix_other) and the watchdog's link check, then the subtask
 */
void vf_service(unsigned int ms)
{
	struct ixgbe_hw *hw = &adapter->hw;
	ixgbe_link_speed speed;
	bool link_up;

	jiffies += ms * (HZ / 1000);
	if (fake_vf_irq_take())
		hw->mac.get_link_status = 1;
	spin_lock_bh(&adapter->mbx_lock);
	hw->mac.ops.check_link(hw, &speed, &link_up, false);
	spin_unlock_bh(&adapter->mbx_lock);
#ifdef VF_NEW
	ixgbevf_host_itr_subtask(adapter);
#endif
}

void vf_ethtool(unsigned int usecs)
{
#ifdef VF_NEW
	ixgbevf_set_itr_usecs(adapter, usecs, usecs);
#else
	adapter->rx_itr_setting = usecs > 1 ? usecs << 2 : usecs;
#endif
}

unsigned int vf_adaptive_clamp(unsigned int itr)
{
#ifdef VF_NEW
	return ixgbevf_host_itr_clamp(itr, &adapter->host_itr);
#else
	return itr;
#endif
}

struct vf_view vf_view(void)
{
	struct vf_view v = {
		.api = adapter->hw.api_version,
		.pf_features = adapter->pf_features,
		.rx_usecs = adapter->rx_itr_setting > 1 ?
			    adapter->rx_itr_setting >> 2 :
			    adapter->rx_itr_setting,
		.eitr0 = q_vectors[0].itr,
	};
#ifdef VF_FAST
	v.fast_vf = 1;
#endif
#ifdef VF_NEW
	v.new_vf = 1;
	v.host_itr = !!(adapter->pf_features & IXGBEVF_PF_SUP_HOST_ITR);
	v.reported = adapter->host_itr.reported;
#endif
	return v;
}

static void vf_lock_bh(spinlock_t *l)
{
	if (l == &adapter_store.mbx_lock)
		mbx_taken = sim_us;
}

static void vf_unlock_bh(spinlock_t *l)
{
	if (l == &adapter_store.mbx_lock && sim_us - mbx_taken > mbx_max_hold)
		mbx_max_hold = sim_us - mbx_taken;
}

void vf_reset_mbx_hold(void)
{
	mbx_max_hold = 0;
}

unsigned long long vf_max_mbx_hold_us(void)
{
	return mbx_max_hold;
}
