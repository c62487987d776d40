/* SPDX-License-Identifier: GPL-2.0 */
/* Stand-in for ixgbevf.h in mbx-loopback: the adapter fields that the
 * real vf.c and the functions cut out of ixgbevf_main.c use.  The
 * feature bits and ITR constants come from the real ixgbevf.h
 * (ixgbevf_defs.inc, extracted at build time).
 */
#ifndef _IXGBEVF_H_
#define _IXGBEVF_H_

#include "kshim.h"
#include "vf.h"
#include "ixgbevf_defs.inc"

#define NON_Q_VECTORS 1

/* kernel timers and work items: vfdrv.c's vf_loop() runs them */
struct timer_list {
	unsigned long expires;
	int pending;
};

struct work_struct {
	int pending;
};

typedef int irqreturn_t;
#define IRQ_HANDLED 1
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#define from_timer(var, t, field) container_of(t, __typeof__(*var), field)
#define IXGBEVF_Q_VECTORS 2

struct ixgbevf_ring_container {
	unsigned int count;
};

struct ixgbevf_adapter;

struct ixgbevf_q_vector {
	struct ixgbevf_adapter *adapter;
	u16 v_idx;
	u16 itr;
	spinlock_t itr_lock;
	struct ixgbevf_ring_container rx, tx;
};

enum ixbgevf_state_t {
	__IXGBEVF_TESTING,
	__IXGBEVF_RESETTING,
	__IXGBEVF_DOWN,
	__IXGBEVF_DISABLED,
	__IXGBEVF_REMOVING,
	__IXGBEVF_SERVICE_SCHED,
	__IXGBEVF_SERVICE_INITED,
	__IXGBEVF_RESET_REQUESTED,
	__IXGBEVF_QUEUE_RESET_REQUESTED,
	__IXGBEVF_HOST_ITR_SYNC,
	__IXGBEVF_HOST_ITR_ONLY,
};

struct ixgbevf_adapter {
	struct ixgbe_hw hw;
	struct net_device *netdev;
	spinlock_t mbx_lock;
	unsigned long state;
	u32 pf_features;
	u16 rx_itr_setting;
	u16 tx_itr_setting;
	int num_msix_vectors;
	struct ixgbevf_q_vector *q_vector[IXGBEVF_Q_VECTORS];
	u32 eims_other;
	struct timer_list service_timer;
	struct work_struct service_task;
#ifdef VF_NEW
	struct ixgbevf_host_itr_state host_itr;
	unsigned long host_itr_next;
#endif
#ifdef VF_FAST
	bool host_itr_busy;
	struct timer_list host_itr_timer;
	spinlock_t service_lock;
#endif
};

extern const struct ixgbe_mbx_operations ixgbevf_mbx_ops;
extern const struct ixgbe_mbx_operations ixgbevf_mbx_ops_legacy;
extern const struct ixgbevf_info ixgbevf_82599_vf_info;

#endif
