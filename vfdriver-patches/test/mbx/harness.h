/* SPDX-License-Identifier: GPL-2.0 */
/* Interface between the PF side, the VF side and the scenarios of
 * mbx-loopback; plain C types only (the two sides' driver headers
 * define conflicting struct ixgbe_hw).
 */
#ifndef HARNESS_H
#define HARNESS_H

#include <stdint.h>

enum pf_field { PF_REQ, PF_MIN, PF_MAX };

struct pf_view {
	unsigned int capable, req, min, max, applied, api;
	uint32_t features;
};

struct pf_stats {
	unsigned int requests, nacks, unhandled, resets, read_errors;
	unsigned int host_writes;
	unsigned int fetches;		/* IXGBE_VF_GET_HOST_ITR requests */
	unsigned long last_fetch;	/* jiffies of the last one */
};

/* simulated time in jiffies (HZ 1000: one jiffy is 1 ms), both sides */
extern unsigned long jiffies;

void pf_init(int new_pf);
void pf_interrupt(void);
int pf_stock_ping(void);
void pf_set_clear_to_send(int cts);
int pf_host_write(enum pf_field field, unsigned int usecs);
struct pf_view pf_view(void);
struct pf_stats pf_stats(void);
int pf_has_busy_flag(void);	/* built with IXGBE_VF_HOST_ITR_BUSY */
unsigned int pf_stubbed(void);
int pf_real_only(void);

struct vf_view {
	int new_vf;		/* built from the patched ixgbevf */
	unsigned int api;	/* negotiated mailbox API (enum value) */
	uint32_t pf_features;
	int host_itr;		/* feature negotiated */
	unsigned int rx_usecs;	/* rx-usecs in force, ethtool encoding */
	unsigned int eitr0;	/* EITR value of vector 0 (usecs << 2) */
	unsigned int reported;	/* last interval reported to the PF */
	int fast_vf;		/* fetches fast while the PF says busy */
};

/* what the service-loop mirror (vf_loop) ran */
struct vf_loop_stats {
	unsigned int timer_ticks;	/* service timer expiries */
	unsigned int runs;		/* service task runs */
	unsigned int watchdog_runs;	/* runs with the other subtasks */
	unsigned int hang_checks;
	unsigned long min_hang_gap, max_hang_gap;	/* jiffies */
};

int vf_probe(void);		/* reset, negotiate, up */
void vf_service(unsigned int ms);	/* time passes, service task runs */
void vf_ethtool(unsigned int usecs);	/* ethtool -C rx-usecs */
unsigned int vf_adaptive_clamp(unsigned int itr);
struct vf_view vf_view(void);
/* @ms jiffies pass one at a time; the driver's own service timer,
 * host_itr_timer, mailbox interrupt and service task run as the kernel
 * would run them (cut out of ixgbevf_main.c)
 */
void vf_loop(unsigned int ms);
/* while the VF waits on the mailbox: a PF reply's interrupt */
void vf_irq_during_wait(void);
struct vf_loop_stats vf_loop_stats(void);
/* a full service run now, as a reset request or link interrupt makes;
 * with @timer_meanwhile host_itr_timer fires during it, after its fetch
 */
void vf_service_now(int timer_meanwhile);
/* jiffies host_itr_timer is armed for, 0 if it is not */
unsigned long vf_host_itr_due(void);
/* the longest time the VF held mbx_lock since the reset, in us of
 * busy-waiting (sim_us)
 */
extern unsigned long long sim_us;
void vf_reset_mbx_hold(void);
unsigned long long vf_max_mbx_hold_us(void);

#endif
