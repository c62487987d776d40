// SPDX-License-Identifier: GPL-2.0
/* VF side of mbx-loopback: the real vf.c and mbx.c of ixgbevf, and the
 * service-task functions cut out of ixgbevf_main.c at build time
 * (vf_main.inc): API and feature negotiation and, in the patched
 * driver, the host-set interval subtask and ixgbevf_set_itr_usecs().
 * What is written here mirrors probe/open and the service task around
 * them.  Built twice: from the pristine sources (old VF) and with VF_NEW
 * from the patched ones.
 */
#include "vf.h"
#include "ixgbevf.h"
#include "fakehw.h"
#include "harness.h"

static u8 vf_bar[0x4000];	/* hw_addr: only the offset matters */
static struct ixgbevf_adapter adapter_store;
static struct ixgbevf_q_vector q_vectors[IXGBEVF_Q_VECTORS];
static unsigned long jiffies;

#define time_before(a, b) ((long)((a) - (b)) < 0)
#define rtnl_lock() do { } while (0)
#define rtnl_unlock() do { } while (0)
#define spin_lock_bh(l) do { (void)(l); } while (0)
#define spin_unlock_bh(l) do { (void)(l); } while (0)

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
#ifdef VF_NEW
	v.new_vf = 1;
	v.host_itr = !!(adapter->pf_features & IXGBEVF_PF_SUP_HOST_ITR);
	v.reported = adapter->host_itr.reported;
#endif
	return v;
}
