/* SPDX-License-Identifier: GPL-2.0 */
/* Stand-in for ixgbe.h in mbx-loopback: the real ixgbe_type.h and
 * mailbox headers, register access through the fake mailbox, and the
 * parts of the adapter the PF's message handlers touch.
 */
#ifndef _IXGBE_H_
#define _IXGBE_H_

#include "kshim.h"
#include "fakehw.h"
#include "ixgbe_type.h"
#include "ixgbe_mbx.h"
#include "ixgbe_vf_itr.h"

#define IXGBE_READ_REG(hw, reg) fake_pf_read(reg)
#define IXGBE_WRITE_REG(hw, reg, v) fake_pf_write(reg, v)
#define IXGBE_READ_REG_ARRAY(hw, reg, off) fake_pf_read((reg) + ((off) << 2))
#define IXGBE_WRITE_REG_ARRAY(hw, reg, off, v) \
	fake_pf_write((reg) + ((off) << 2), v)
#define IXGBE_WRITE_FLUSH(hw) fake_pf_read(IXGBE_STATUS)

#define e_dbg(msglvl, fmt, ...) do { } while (0)
#define e_err(msglvl, fmt, ...) shim_log("err", fmt, ##__VA_ARGS__)
#define e_warn(msglvl, fmt, ...) shim_log("warn", fmt, ##__VA_ARGS__)

struct vf_data_storage {
	unsigned char vf_mac_addresses[ETH_ALEN];
	bool clear_to_send;
	unsigned int vf_api;
	u32 vf_features;
	struct ixgbe_vf_itr itr;
#ifdef PF_REAL
	u16 pf_vlan;
	u16 pf_qos;
	bool spoofchk_enabled;
	bool pf_set_mac;
	u16 num_vf_mc_hashes;
#endif
};

#ifdef PF_REAL
struct net_device;
struct ixgbe_ring_feature {
	u16 limit;
	u16 indices;
	u16 mask;
	u16 offset;
};
enum { RING_F_NONE, RING_F_VMDQ, RING_F_ARRAY_SIZE };
#endif

struct ixgbe_adapter {
	struct ixgbe_hw hw;
	struct vf_data_storage *vfinfo;
	unsigned int num_vfs;
#ifdef PF_REAL
	struct ixgbe_ring_feature ring_feature[RING_F_ARRAY_SIZE];
	u8 hw_tcs;
	u8 default_up;
	struct net_device *netdev;
	spinlock_t vfs_lock;
#endif
};

#ifdef PF_REAL
static void pf_err_log(const char *fmt, ...);
#undef e_err
#define e_err(msglvl, fmt, ...) pf_err_log(fmt, ##__VA_ARGS__)
#endif

#endif
