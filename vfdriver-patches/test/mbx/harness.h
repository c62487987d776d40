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
};

void pf_init(int new_pf);
void pf_interrupt(void);
int pf_stock_ping(void);
void pf_set_clear_to_send(int cts);
int pf_host_write(enum pf_field field, unsigned int usecs);
struct pf_view pf_view(void);
struct pf_stats pf_stats(void);

struct vf_view {
	int new_vf;		/* built from the patched ixgbevf */
	unsigned int api;	/* negotiated mailbox API (enum value) */
	uint32_t pf_features;
	int host_itr;		/* feature negotiated */
	unsigned int rx_usecs;	/* rx-usecs in force, ethtool encoding */
	unsigned int eitr0;	/* EITR value of vector 0 (usecs << 2) */
	unsigned int reported;	/* last interval reported to the PF */
};

int vf_probe(void);		/* reset, negotiate, up */
void vf_service(unsigned int ms);	/* time passes, service task runs */
void vf_ethtool(unsigned int usecs);	/* ethtool -C rx-usecs */
unsigned int vf_adaptive_clamp(unsigned int itr);
struct vf_view vf_view(void);

#endif
