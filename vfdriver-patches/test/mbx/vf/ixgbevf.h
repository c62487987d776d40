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
#define IXGBEVF_Q_VECTORS 2

struct ixgbevf_ring_container {
	unsigned int count;
};

struct ixgbevf_adapter;

struct ixgbevf_q_vector {
	struct ixgbevf_adapter *adapter;
	u16 v_idx;
	u16 itr;
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
#ifdef VF_NEW
	struct ixgbevf_host_itr_state host_itr;
	unsigned long host_itr_next;
#endif
};

extern const struct ixgbe_mbx_operations ixgbevf_mbx_ops;
extern const struct ixgbe_mbx_operations ixgbevf_mbx_ops_legacy;
extern const struct ixgbevf_info ixgbevf_82599_vf_info;

#endif
