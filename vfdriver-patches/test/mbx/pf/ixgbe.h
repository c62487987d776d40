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
};

struct ixgbe_adapter {
	struct ixgbe_hw hw;
	struct vf_data_storage *vfinfo;
	unsigned int num_vfs;
};

#endif
