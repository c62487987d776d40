// SPDX-License-Identifier: GPL-2.0
/* PF side of mbx-loopback: the real ixgbe_mbx.c does the mailbox; the
 * message handlers of this series (and the stock API negotiation, for
 * the "old PF") are the driver's own functions, cut out of ixgbe_sriov.c
 * at build time (pf_new.inc, pf_old.inc).  What is written here mirrors
 * ixgbe_msg_task(), ixgbe_rcv_msg_from_vf(), the reset handshake and the
 * sysfs store, for the messages a VF sends in these scenarios.  Built
 * from the whole series and, with PF_CUR, from the series without the
 * patch that sets IXGBE_VF_HOST_ITR_BUSY ("cur PF").
 */
#include "ixgbe.h"
#include "harness.h"

static struct ixgbe_adapter adapter_store;
static struct ixgbe_adapter *const padapter = &adapter_store;
static struct vf_data_storage vfinfo_store[FAKE_VF + 1];
static int pf_is_new;
static struct pf_stats stats;

#define CONFIG_IXGBE_IPSEC
#include "pf_new.inc"
#include "pf_old.inc"

#ifdef PF_REAL
/* mbx-real-dispatch: ixgbe_msg_task(), ixgbe_rcv_msg_from_vf(),
 * ixgbe_rcv_ack_from_vf(), ixgbe_vf_reset_msg(), ixgbe_vf_reset_event()
 * and ixgbe_vf_clear_mbx() are the driver's own (pf_real.inc), with their
 * calls of the mailbox and of ixgbe_vf_host_itr_msg() renamed to the
 * counting wrappers below.  Stubbed: the filter, VLAN, queue and IPsec
 * programming of a VF reset (register writes with no effect on the
 * mailbox) and the handlers of requests these scenarios never send,
 * which count as "stubbed" and must stay at 0.
 */
static unsigned int stubbed;

static s32 pf_counted_read_mbx(struct ixgbe_hw *hw, u32 *msg, u16 size, u16 vf)
{
	s32 err = ixgbe_read_mbx(hw, msg, size, vf);

	if (err)
		stats.read_errors++;
	else if (!(msg[0] & (IXGBE_VT_MSGTYPE_ACK | IXGBE_VT_MSGTYPE_NACK)))
		stats.requests++;
	return err;
}

static s32 pf_counted_write_mbx(struct ixgbe_hw *hw, u32 *msg, u16 size, u16 vf)
{
	/* a NACK in reply to a request; not the bare one of the ack path */
	if ((msg[0] & IXGBE_VT_MSGTYPE_NACK) && (msg[0] & 0xFFFF))
		stats.nacks++;
	return ixgbe_write_mbx(hw, msg, size, vf);
}

static int pf_counted_host_itr_msg(struct ixgbe_adapter *adapter, u32 *msgbuf, u32 vf)
{
	if ((msgbuf[0] & 0xFFFF) == IXGBE_VF_GET_HOST_ITR) {
		stats.fetches++;
		stats.last_fetch = jiffies;
	}
	return ixgbe_vf_host_itr_msg(adapter, msgbuf, vf);
}

static void pf_err_log(const char *fmt, ...)
{
	if (!strncmp(fmt, "Unhandled Msg", 13))
		stats.unhandled++;
	shim_log("err", "%s", fmt);
}

#define pf_counted_reset_event(adapter, vf) \
	do { stats.resets++; ixgbe_vf_reset_event(adapter, vf); } while (0)
#define e_info(msglvl, fmt, ...) do { } while (0)
#define __ALIGN_MASK(x, mask) (((x) + (mask)) & ~(mask))
#define spin_lock_irqsave(l, f) do { (void)(l); (f) = 0; } while (0)
#define spin_unlock_irqrestore(l, f) do { (void)(l); (void)(f); } while (0)

static void ixgbe_clear_vf_vlans(struct ixgbe_adapter *a, u32 vf) { }
static int ixgbe_set_vf_vlan(struct ixgbe_adapter *a, int add, int vid, u32 vf) { return 0; }
static void ixgbe_set_vmolr(struct ixgbe_hw *hw, u32 vf, bool aupe) { }
static void ixgbe_clear_vmvir(struct ixgbe_adapter *a, u32 vf) { }
static void ixgbe_set_vmvir(struct ixgbe_adapter *a, u16 vid, u16 qos, u32 vf) { }
static void ixgbe_ipsec_vf_clear(struct ixgbe_adapter *a, u32 vf) { }
static void ixgbe_set_rx_mode(struct net_device *nd) { }
static int ixgbe_del_mac_filter(struct ixgbe_adapter *a, const u8 *addr, u16 pool) { return 0; }
static int ixgbe_set_vf_macvlan(struct ixgbe_adapter *a, int vf, int index, unsigned char *addr) { return 0; }
static int ixgbe_set_vf_mac(struct ixgbe_adapter *a, int vf, unsigned char *mac) { return 0; }
static void ixgbe_write_qde(struct ixgbe_adapter *a, u32 vf, u32 qde) { }
static void ixgbe_set_vf_rx_tx(struct ixgbe_adapter *a, int vf) { }
#define STUB(name) static int name(struct ixgbe_adapter *a, u32 *msgbuf, u32 vf) { stubbed++; return -EIO; }
STUB(ixgbe_set_vf_mac_addr)
STUB(ixgbe_set_vf_multicasts)
STUB(ixgbe_set_vf_vlan_msg)
STUB(ixgbe_set_vf_macvlan_msg)
STUB(ixgbe_get_vf_queues)
STUB(ixgbe_get_vf_reta)
STUB(ixgbe_get_vf_rss_key)
STUB(ixgbe_update_vf_xcast_mode)
STUB(ixgbe_get_vf_link_state)
STUB(ixgbe_ipsec_vf_add_sa)
STUB(ixgbe_ipsec_vf_del_sa)
static int ixgbe_set_vf_lpe(struct ixgbe_adapter *a, u32 max_frame, u32 vf) { stubbed++; return -EIO; }

bool is_zero_ether_addr(const u8 *addr)
{
	static const u8 zero[ETH_ALEN];

	return !memcmp(addr, zero, ETH_ALEN);
}

#include "pf_real.inc"

#endif

/* requests that reached a stubbed handler of the real dispatcher */
unsigned int pf_stubbed(void)
{
#ifdef PF_REAL
	return stubbed;
#else
	return 0;
#endif
}

/* built with the driver's own dispatcher: always the patched PF */
int pf_real_only(void)
{
#ifdef PF_REAL
	return 1;
#else
	return 0;
#endif
}

void pf_init(int new_pf)
{
	struct ixgbe_hw *hw = &padapter->hw;

	memset(padapter, 0, sizeof(*padapter));
	memset(vfinfo_store, 0, sizeof(vfinfo_store));
	memset(&stats, 0, sizeof(stats));
	pf_is_new = new_pf;
	padapter->vfinfo = vfinfo_store;
	padapter->num_vfs = FAKE_VF + 1;
	hw->mac.type = ixgbe_mac_82599EB;
	hw->mbx.ops = &mbx_ops_generic;
	ixgbe_init_mbx_params_pf(hw);
	memcpy(vfinfo_store[FAKE_VF].vf_mac_addresses,
	       (u8[ETH_ALEN]){ 0x02, 0, 0, 0, 0, FAKE_VF }, ETH_ALEN);
#ifdef PF_REAL
	vfinfo_store[FAKE_VF].pf_set_mac = true;
	fake_pf_other_regs = 1;
#endif
}

/* ixgbe_vf_reset_event() + ixgbe_vf_reset_msg(), the mailbox part */
static void pf_vf_reset_msg(u32 vf)
{
	struct vf_data_storage *vfinfo = &padapter->vfinfo[vf];
	u32 msgbuf[4];

	vfinfo->vf_api = ixgbe_mbox_api_10;
	if (pf_is_new) {
		vfinfo->vf_features = 0;
		ixgbe_vf_itr_reset(&vfinfo->itr);
	}
	vfinfo->clear_to_send = true;
	stats.resets++;

	msgbuf[0] = IXGBE_VF_RESET | IXGBE_VT_MSGTYPE_ACK;
	memcpy(&msgbuf[1], vfinfo->vf_mac_addresses, ETH_ALEN);
	msgbuf[3] = 0;
	ixgbe_write_mbx(&padapter->hw, msgbuf, IXGBE_VF_PERMADDR_MSG_LEN, vf);
}

/* the default: branch of ixgbe_rcv_msg_from_vf(), log line included */
static int pf_unhandled(const u32 *msgbuf)
{
	shim_log("err", "Unhandled Msg %8.8x\n", msgbuf[0]);
	stats.unhandled++;
	return -EIO;
}

/* ixgbe_rcv_msg_from_vf() for the requests of these scenarios */
static void pf_rcv_msg(u32 vf)
{
	struct ixgbe_hw *hw = &padapter->hw;
	u32 msgbuf[IXGBE_VFMAILBOX_SIZE];
	int retval;

	if (ixgbe_read_mbx(hw, msgbuf, IXGBE_VFMAILBOX_SIZE, vf)) {
		stats.read_errors++;
		return;
	}
	if (msgbuf[0] & (IXGBE_VT_MSGTYPE_ACK | IXGBE_VT_MSGTYPE_NACK))
		return;
	IXGBE_WRITE_FLUSH(hw);
	stats.requests++;

	if (msgbuf[0] == IXGBE_VF_RESET) {
		pf_vf_reset_msg(vf);
		return;
	}
	if (!padapter->vfinfo[vf].clear_to_send) {
		msgbuf[0] |= IXGBE_VT_MSGTYPE_NACK;
		ixgbe_write_mbx(hw, msgbuf, 1, vf);
		stats.nacks++;
		return;
	}

	switch (msgbuf[0] & 0xFFFF) {
	case IXGBE_VF_API_NEGOTIATE:
		retval = pf_is_new ?
			 ixgbe_negotiate_vf_api(padapter, msgbuf, vf) :
			 old_ixgbe_negotiate_vf_api(padapter, msgbuf, vf);
		break;
	case IXGBE_VF_FEATURES_NEGOTIATE:
		retval = pf_is_new ?
			 ixgbe_negotiate_vf_features(padapter, msgbuf, vf) :
			 pf_unhandled(msgbuf);
		break;
	case IXGBE_VF_GET_HOST_ITR:
	case IXGBE_VF_HOST_ITR_APPLIED:
		if ((msgbuf[0] & 0xFFFF) == IXGBE_VF_GET_HOST_ITR) {
			stats.fetches++;
			stats.last_fetch = jiffies;
		}
		retval = pf_is_new ?
			 ixgbe_vf_host_itr_msg(padapter, msgbuf, vf) :
			 pf_unhandled(msgbuf);
		break;
	default:
		retval = pf_unhandled(msgbuf);
		break;
	}

	if (retval) {
		msgbuf[0] |= IXGBE_VT_MSGTYPE_NACK;
		stats.nacks++;
	} else {
		msgbuf[0] |= IXGBE_VT_MSGTYPE_ACK;
	}
	msgbuf[0] |= IXGBE_VT_MSGTYPE_CTS;
	ixgbe_write_mbx(hw, msgbuf, IXGBE_VFMAILBOX_SIZE, vf);
}

/* ixgbe_msg_task() from the mailbox interrupt */
void pf_interrupt(void)
{
#ifdef PF_REAL
	ixgbe_msg_task(padapter);
	return;
#endif
	{
	struct ixgbe_hw *hw = &padapter->hw;
	u32 vf = FAKE_VF;

	if (!ixgbe_check_for_rst(hw, vf))
		stats.resets++;
	if (!ixgbe_check_for_msg(hw, vf))
		pf_rcv_msg(vf);
	if (!ixgbe_check_for_ack(hw, vf) &&
	    !padapter->vfinfo[vf].clear_to_send) {
		u32 msg = IXGBE_VT_MSGTYPE_NACK;

		ixgbe_write_mbx(hw, &msg, 1, vf);
	}
	}
}

/* ixgbe_ping_vf(), as stock ixgbe sends it from process context (link
 * changes, ndo_set_vf_* and the like): nothing of this series
 */
int pf_stock_ping(void)
{
	struct vf_data_storage *vfinfo = &padapter->vfinfo[FAKE_VF];
	u32 ping = IXGBE_PF_CONTROL_MSG;

	if (vfinfo->clear_to_send)
		ping |= IXGBE_VT_MSGTYPE_CTS;
	return ixgbe_write_mbx(&padapter->hw, &ping, 1, FAKE_VF);
}

void pf_set_clear_to_send(int cts)
{
	padapter->vfinfo[FAKE_VF].clear_to_send = cts;
}

/* the sysfs store: validation and update, never the mailbox */
int pf_host_write(enum pf_field field, unsigned int usecs)
{
	struct ixgbe_vf_itr *itr = &padapter->vfinfo[FAKE_VF].itr;

	if (!pf_is_new)
		return -ENOENT;		/* a stock PF has no sriov/ */
	if (field == PF_REQ ? !ixgbe_vf_itr_req_valid(usecs) :
			      !ixgbe_vf_itr_bound_valid(usecs))
		return -EINVAL;
	usecs = ixgbe_vf_itr_round(usecs);
	switch (field) {
	case PF_REQ:
		itr->req_usecs = usecs;
		break;
	case PF_MIN:
		if (ixgbe_vf_itr_bounds_crossed(usecs, itr->max_usecs))
			return -ERANGE;
		itr->min_usecs = usecs;
		break;
	case PF_MAX:
		if (ixgbe_vf_itr_bounds_crossed(itr->min_usecs, usecs))
			return -ERANGE;
		itr->max_usecs = usecs;
		break;
	}
#ifndef PF_CUR
	ixgbe_vf_itr_stamp(itr, jiffies);
#endif
	stats.host_writes++;
	return 0;
}

int pf_has_busy_flag(void)
{
#ifdef PF_CUR
	return 0;
#else
	return 1;
#endif
}

struct pf_view pf_view(void)
{
	struct vf_data_storage *vfinfo = &padapter->vfinfo[FAKE_VF];
	struct pf_view v = {
		.capable = vfinfo->itr.capable,
		.req = vfinfo->itr.req_usecs,
		.min = vfinfo->itr.min_usecs,
		.max = vfinfo->itr.max_usecs,
		.applied = vfinfo->itr.applied_usecs,
		.api = vfinfo->vf_api,
		.features = vfinfo->vf_features,
	};

	return v;
}

struct pf_stats pf_stats(void)
{
	return stats;
}
