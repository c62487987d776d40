/* SPDX-License-Identifier: GPL-2.0 */
/* A fake 82599 mailbox between the PF and one VF: the PF's and the VF's
 * view of the same 16-word buffer and control bits, as the two drivers
 * use them.  Plain C, no driver headers.
 */
#ifndef FAKEHW_H
#define FAKEHW_H

#include <stdint.h>

#define FAKE_VF 3		/* the VF's index on the PF side */

uint32_t fake_pf_read(uint32_t reg);
void fake_pf_write(uint32_t reg, uint32_t value);
uint32_t fake_vf_read(uint32_t reg);
void fake_vf_write(uint32_t reg, uint32_t value);
void fake_reset(void);
/* 1: PF registers other than the mailbox's are plain storage (the real
 * VF reset path of mbx-real-dispatch writes them); 0: touching one fails
 */
extern int fake_pf_other_regs;

/* set when the VF raised REQ: the harness then runs the PF's interrupt */
int fake_pf_irq_pending(void);
/* set when the PF wrote STS (a message for the VF); reading clears it */
int fake_vf_irq_take(void);
/* called by the VF side when it raised REQ (hook for "host acts while a
 * VF request is in flight")
 */
extern void (*fake_on_vf_request)(void);

#endif
