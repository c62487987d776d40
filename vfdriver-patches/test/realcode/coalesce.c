// SPDX-License-Identifier: GPL-2.0
/* coalesce-reset-wthresh: "ethtool -C <pf> rx-usecs N" through the real
 * ixgbe_set_coalesce() and ixgbe_update_rsc() (ixgbe_ethtool.c), the real
 * ixgbe_write_eitr() and ixgbe_tx_wthresh() (ixgbe_main.c) and the real
 * ixgbe_tune.h, from the patched sources (coalesce.inc).  Mirrored here:
 * ixgbe_do_reset() as ixgbe_reinit_locked() does it (each tx ring set up
 * with ixgbe_tx_wthresh(), as ixgbe_configure_tx_ring() does, then each
 * vector's EITR written, as ixgbe_configure_msix() does: realcode.sh
 * checks that the real functions are wired that way) and the head of
 * ixgbe_poll() that takes a pending request.
 *
 * Asserted for every from/to setting, idle port or one whose poll runs
 * first, interface up or down then up, DE or not: once the vectors have
 * polled, EITR 0 comes with WTHRESH 1 (and any EITR below IXGBE_100K_ITR
 * with WTHRESH 1, the stock rule), and EITR holds the requested value.
 */
#include "common.h"

void (*lock_hook)(spinlock_t *l, bool taken);
spinlock_t *volatile contended;

#define NETIF_F_LRO		BIT(15)
#define EINVAL			22
#define IXGBE_EITR(i)		(0x820 + (i) * 4)
#define NVEC			3

enum ixgbe_mac_type { ixgbe_mac_unknown, ixgbe_mac_82598EB, ixgbe_mac_82599EB,
		      ixgbe_mac_X540, ixgbe_mac_X550, ixgbe_mac_X550EM_x,
		      ixgbe_mac_x550em_a };
enum { __IXGBE_DOWN };

struct net_device {
	u64 features;
	void *priv;
	bool running;
};

struct ethtool_coalesce {
	u32 rx_coalesce_usecs;
	u32 tx_coalesce_usecs;
};

struct kernel_ethtool_coalesce;
struct netlink_ext_ack;

struct ixgbe_ring_container {
	u8 count;
};

struct ixgbe_adapter;

struct ixgbe_q_vector {
	struct ixgbe_adapter *adapter;
	int v_idx;
	u16 itr;
	u16 itr_request;
	unsigned long itr_flags;
	struct ixgbe_ring_container rx, tx;
	bool rx_de;
};

struct ixgbe_hw {
	struct {
		enum ixgbe_mac_type type;
	} mac;
};

struct ixgbe_adapter {
	struct net_device *netdev;
	struct ixgbe_hw hw;
	struct ixgbe_q_vector *q_vector[NVEC];
	int num_q_vectors;
	u16 rx_itr_setting;
	u16 tx_itr_setting;
	u32 flags2;
	unsigned long state;
};

static u32 regs[0x1000];
static u32 wthresh[NVEC];	/* TXDCTL.WTHRESH of the vector's tx ring */
static bool poll_owed[NVEC];	/* a software interrupt was raised */
static int resets;

#define IXGBE_WRITE_REG(hw, reg, val) ((void)(hw), regs[(reg) / 4] = (val))
#define netdev_priv(nd) ((nd)->priv)
#define e_info(...) do { } while (0)

static void ixgbe_do_reset(struct net_device *netdev);
static void ixgbe_irq_rearm_queues(struct ixgbe_adapter *adapter, u64 qmask)
{
	int v;

	(void)adapter;
	for (v = 0; v < NVEC; v++)
		if (qmask & BIT_ULL(v))
			poll_owed[v] = true;
}

#include "coalesce_defs.inc"
#include "ixgbe_tune.h"
#include "coalesce.inc"
#ifdef MUTANT
#include "mutant.inc"
#endif

static struct net_device nd;
static struct ixgbe_adapter ad;
static struct ixgbe_q_vector qv[NVEC];
static bool poll_before_reset;

/* the head of ixgbe_poll(): a pending request (or DE switch) reaches EITR */
static void poll(struct ixgbe_q_vector *q)
{
	if (test_bit(IXGBE_QV_ITR_REQUEST, &q->itr_flags))
		ixgbe_write_eitr(q);
	poll_owed[q->v_idx] = false;
}

/* ixgbe_up(): ixgbe_configure() sets up the tx rings, then
 * ixgbe_up_complete() -> ixgbe_configure_msix() writes each EITR
 */
static void up(void)
{
	int v;

	for (v = 0; v < NVEC; v++)
		wthresh[v] = ixgbe_tx_wthresh(&qv[v]);
	for (v = 0; v < NVEC; v++)
		ixgbe_write_eitr(&qv[v]);
	clear_bit(__IXGBE_DOWN, &ad.state);
}

static void ixgbe_do_reset(struct net_device *netdev)
{
	int v;

	resets++;
	if (!netdev->running)
		return;		/* ixgbe_reset(): the rings wait for up */
	/* a busy port: the vector's poll may take the request first */
	if (poll_before_reset)
		for (v = 0; v < NVEC; v++)
			poll(&qv[v]);
	set_bit(__IXGBE_DOWN, &ad.state);	/* ixgbe_down() */
	up();
}

static u32 eitr(int v)
{
	return regs[IXGBE_EITR(v) / 4] & IXGBE_MAX_EITR;
}

static void setup(u32 from_usecs, bool running, bool de, bool mixed)
{
	struct ethtool_coalesce ec = { from_usecs, mixed ? 0 : from_usecs };
	int v;

	poll_before_reset = false;
	memset(&nd, 0, sizeof(nd));
	memset(&ad, 0, sizeof(ad));
	memset(qv, 0, sizeof(qv));
	memset(regs, 0, sizeof(regs));
	nd.priv = &ad;
	nd.running = true;
	nd.features = NETIF_F_LRO;
	ad.netdev = &nd;
	ad.hw.mac.type = ixgbe_mac_82599EB;
	ad.num_q_vectors = NVEC;
	ad.flags2 = IXGBE_FLAG2_RSC_CAPABLE | IXGBE_FLAG2_RSC_ENABLED;
	ad.rx_itr_setting = 1;
	ad.tx_itr_setting = 1;
	for (v = 0; v < NVEC; v++) {
		qv[v].adapter = &ad;
		qv[v].v_idx = v;
		qv[v].itr = IXGBE_20K_ITR;
		/* mixed: every vector rx+tx; else rx, rx+tx, tx only */
		qv[v].rx.count = mixed || v < 2;
		qv[v].tx.count = mixed || v > 0;
		qv[v].rx_de = de && qv[v].rx.count;
		ad.q_vector[v] = &qv[v];
	}
	set_bit(__IXGBE_DOWN, &ad.state);
	up();
	/* the starting setting, settled */
	ixgbe_set_coalesce(&nd, &ec, NULL, NULL);
	for (v = 0; v < NVEC; v++)
		poll(&qv[v]);
	nd.running = running;
	if (!running)
		set_bit(__IXGBE_DOWN, &ad.state);
}

int main(void)
{
	static const u32 usecs[] = { 1, 0, 2, 4, 8, 10, 12, 20, 24, 50, 100, 200, 1022 };
	unsigned int n = sizeof(usecs) / sizeof(usecs[0]);
	unsigned int i, j, k, zero_cases = 0;

	for (i = 0; i < n; i++)
	for (j = 0; j < n; j++)
	for (k = 0; k < 16; k++) {
		bool running = k & 1, early_poll = k & 2, de = k & 4, mixed = k & 8;
		struct ethtool_coalesce ec = { usecs[j], mixed ? 0 : usecs[j] };
		int v, err;

		setup(usecs[i], true, de, mixed);
		nd.running = running;
		if (!running)
			set_bit(__IXGBE_DOWN, &ad.state);
		poll_before_reset = early_poll;
		err = ixgbe_set_coalesce(&nd, &ec, NULL, NULL);
		CHECK(!err, "set_coalesce %u -> %u: %d", usecs[i], usecs[j], err);
		if (!running) {		/* ip link set up */
			nd.running = true;
			up();
		}
		/* traffic: every vector polls (the software interrupt or
		 * the first packet)
		 */
		for (v = 0; v < NVEC; v++)
			poll(&qv[v]);
		for (v = 0; v < NVEC; v++) {
			u32 want = usecs[j] == 1 ? (qv[v].rx.count ? IXGBE_20K_ITR : IXGBE_12K_ITR) :
				   usecs[j] << 2;
			u32 got = eitr(v);

			if (qv[v].rx_de)
				want = ixgbe_tune_de_itr(want, IXGBE_100K_ITR);
			CHECK(got == want, "%u -> %u us, vector %d%s%s%s: EITR %u, want %u",
			      usecs[i], usecs[j], v, running ? "" : " (down, then up)",
			      early_poll ? " (poll first)" : "", de ? " DE" : "", got, want);
			if (got == 0) {
				zero_cases++;
				CHECK(!qv[v].tx.count || wthresh[v] == 1,
				      "%u -> %u us, vector %d%s%s%s: EITR 0 with WTHRESH %u",
				      usecs[i], usecs[j], v, running ? "" : " (down, then up)",
				      early_poll ? " (poll first)" : "", de ? " DE" : "",
				      wthresh[v]);
			}
			CHECK(!qv[v].tx.count || got >= IXGBE_100K_ITR || wthresh[v] == 1,
			      "%u -> %u us, vector %d: EITR %u below IXGBE_100K_ITR with WTHRESH %u",
			      usecs[i], usecs[j], v, got, wthresh[v]);
		}
	}
	printf("%lu checks, %lu failed: %u transitions x 16 (up/down, poll first, DE, mixed vectors), %u vectors with EITR 0, %d resets\n",
	       checks, failures, n * n, zero_cases, resets);
	return failures ? 1 : 0;
}
