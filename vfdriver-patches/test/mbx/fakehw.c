// SPDX-License-Identifier: GPL-2.0
/* The fake mailbox.  Semantics as both drivers rely on them:
 * PF side PFMAILBOX(vf): STS (write: message for the VF), ACK (write: VF's
 * message taken), VFU/PFU (ownership), RVFU; MBVFICR: VF request and ack
 * bits, write 1 to clear.  VF side VFMAILBOX: REQ and ACK (write), VFU
 * (take/release ownership), PFU (ro), PFSTS/PFACK/RSTD (clear on read),
 * RSTI.  A write that takes ownership fails while the other side owns
 * the buffer; a write without the ownership bit releases it.
 */
#include <stdio.h>
#include <stdlib.h>
#include "fakehw.h"

#define PFMAILBOX(i)	(0x04B00 + 4 * (i))
#define PFMBMEM(i)	(0x13000 + 64 * (i))
#define MBVFICR(i)	(0x00710 + 4 * (i))
#define VFLRE0		0x00600
#define VFLREC(i)	(0x00700 + 4 * (i))
#define VFCTRL		0x00000
#define VFSTATUS	0x00008
#define VFLINKS		0x00010
#define VFMAILBOX	0x002FC
#define VFMBMEM		0x00200

#define PF_STS	0x01
#define PF_ACK	0x02
#define PF_VFU	0x04
#define PF_PFU	0x08
#define PF_RVFU	0x10

#define VF_REQ		0x01
#define VF_ACK		0x02
#define VF_VFU		0x04
#define VF_PFU		0x08
#define VF_PFSTS	0x10
#define VF_PFACK	0x20
#define VF_RSTI		0x40
#define VF_RSTD		0x80

static uint32_t mem[16];
static int vfu, pfu, pfsts, pfack, rstd, vf_irq;
static uint32_t mbvficr[4];
void (*fake_on_vf_request)(void);

void fake_reset(void)
{
	for (int i = 0; i < 16; i++)
		mem[i] = 0;
	vfu = pfu = pfsts = pfack = rstd = vf_irq = 0;
	for (int i = 0; i < 4; i++)
		mbvficr[i] = 0;
	fake_on_vf_request = NULL;
}

int fake_pf_irq_pending(void)
{
	return mbvficr[FAKE_VF / 16] != 0;
}

int fake_vf_irq_take(void)
{
	int irq = vf_irq;

	vf_irq = 0;
	return irq;
}

static void bad(const char *side, uint32_t reg)
{
	fprintf(stderr, "fakehw: %s access to unmodelled register 0x%x\n",
		side, reg);
	abort();
}

/* the rest of the PF's register file, for the real VF reset path
 * (mbx-real-dispatch): plain storage, no side effects
 */
#define OTHER_REGS 0x10000
int fake_pf_other_regs;
static uint32_t other_regs[OTHER_REGS];

uint32_t fake_pf_read(uint32_t reg)
{
	if (reg == PFMAILBOX(FAKE_VF))
		return (vfu ? PF_VFU : 0) | (pfu ? PF_PFU : 0);
	if (reg >= PFMBMEM(FAKE_VF) && reg < PFMBMEM(FAKE_VF) + 64)
		return mem[(reg - PFMBMEM(FAKE_VF)) / 4];
	if (reg >= MBVFICR(0) && reg <= MBVFICR(3))
		return mbvficr[(reg - MBVFICR(0)) / 4];
	if (reg == VFLRE0 || reg == 0x001C0)
		return 0;		/* no function level reset */
	if (reg == 0x00008)
		return 0;		/* STATUS, read by IXGBE_WRITE_FLUSH */
	if (fake_pf_other_regs && reg < 4 * OTHER_REGS)
		return other_regs[reg / 4];
	bad("PF", reg);
	return 0;
}

void fake_pf_write(uint32_t reg, uint32_t value)
{
	if (reg == PFMAILBOX(FAKE_VF)) {
		if (value & PF_RVFU)
			vfu = 0;
		/* ownership: granted only while the VF does not hold it */
		if (value & PF_PFU)
			pfu = !vfu;
		else
			pfu = 0;
		if (value & PF_STS)
			pfsts = vf_irq = 1;
		if (value & PF_ACK)
			pfack = 1;
		return;
	}
	if (reg >= PFMBMEM(FAKE_VF) && reg < PFMBMEM(FAKE_VF) + 64) {
		mem[(reg - PFMBMEM(FAKE_VF)) / 4] = value;
		return;
	}
	if (reg >= MBVFICR(0) && reg <= MBVFICR(3)) {
		mbvficr[(reg - MBVFICR(0)) / 4] &= ~value;
		return;
	}
	if (reg == VFLREC(0) || reg == VFLREC(1))
		return;
	if (fake_pf_other_regs && reg < 4 * OTHER_REGS) {
		other_regs[reg / 4] = value;
		return;
	}
	bad("PF", reg);
}

uint32_t fake_vf_read(uint32_t reg)
{
	uint32_t v;

	if (reg == VFMAILBOX) {
		v = (vfu ? VF_VFU : 0) | (pfu ? VF_PFU : 0) |
		    (pfsts ? VF_PFSTS : 0) | (pfack ? VF_PFACK : 0) |
		    (rstd ? VF_RSTD : 0);
		pfsts = pfack = rstd = 0;	/* read to clear */
		return v;
	}
	if (reg >= VFMBMEM && reg < VFMBMEM + 64)
		return mem[(reg - VFMBMEM) / 4];
	if (reg == VFLINKS)
		return 0x40000000 | 0x30000000;	/* LINKS_UP | 10G */
	/* VFSTATUS, queue and interrupt registers: nothing to model */
	return 0;
}

void fake_vf_write(uint32_t reg, uint32_t value)
{
	if (reg == VFMAILBOX) {
		if (value & VF_VFU)
			vfu = !pfu;
		else
			vfu = 0;
		if (value & VF_REQ) {
			mbvficr[FAKE_VF / 16] |= 1u << (FAKE_VF % 16);
			if (fake_on_vf_request)
				fake_on_vf_request();
		}
		if (value & VF_ACK)
			mbvficr[FAKE_VF / 16] |= 1u << (16 + FAKE_VF % 16);
		return;
	}
	if (reg >= VFMBMEM && reg < VFMBMEM + 64) {
		mem[(reg - VFMBMEM) / 4] = value;
		return;
	}
	if (reg == VFCTRL && (value & 0x04000000)) {	/* CTRL_RST */
		vfu = pfu = 0;
		rstd = 1;
		return;
	}
	/* queue, interrupt and misc registers: ignored */
	(void)reg;
}
