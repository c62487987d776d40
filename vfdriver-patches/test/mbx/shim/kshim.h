/* SPDX-License-Identifier: GPL-2.0 */
/* Just enough of the kernel's API for the mailbox code of ixgbe and
 * ixgbevf to build and run in user space (mbx-loopback).  Register
 * accesses go to fakehw.c.
 */
#ifndef KSHIM_H
#define KSHIM_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <stdio.h>
#include <errno.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int8_t s8;
typedef int16_t s16;
typedef int32_t s32;
typedef int64_t s64;
typedef u16 __le16;
typedef u32 __le32;
typedef u64 __le64;
typedef u16 __be16;
typedef u32 __be32;
typedef u64 __be64;
typedef unsigned int gfp_t;
typedef u64 dma_addr_t;
typedef struct { int dummy; } spinlock_t;

#define __iomem
#define __always_unused __attribute__((unused))
#define __maybe_unused __attribute__((unused))
#define __packed __attribute__((packed))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))
#define BIT(n) (1UL << (n))
#define BIT_ULL(n) (1ULL << (n))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define DIV_ROUND_UP(n, d) (((n) + (d) - 1) / (d))
#define fallthrough __attribute__((__fallthrough__))
#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))
#define min_t(t, a, b) ((t)(a) < (t)(b) ? (t)(a) : (t)(b))
#define EXPORT_SYMBOL(x)
#define ETH_ALEN 6
#define ETH_HLEN 14
#define ETH_FCS_LEN 4
#define ETH_DATA_LEN 1500
#define ETH_FRAME_LEN 1514
#define VLAN_N_VID 4096
#define HZ 1000

/* simulated time, shared by both sides (test/mbx/main.c) */
extern unsigned long jiffies;
#define time_before(a, b) ((long)((a) - (b)) < 0)
#define IS_ENABLED(option) 0	/* only CONFIG_PCI_MMCONFIG (Hyper-V) */

/* the PCI device of the Hyper-V ops; never used by the loopback */
struct pci_dev { int devfn; };
struct net_device { int dummy; };
struct netdev_hw_addr { u8 addr[ETH_ALEN]; };
struct mdio_if_info { int dummy; };
#define netdev_mc_count(dev) 0
#define netdev_uc_count(dev) 0
#define netdev_for_each_mc_addr(ha, dev) for ((ha) = NULL; (ha); )
#define netdev_for_each_uc_addr(ha, dev) for ((ha) = NULL; (ha); )

static inline void ether_addr_copy(u8 *dst, const u8 *src)
{
	memcpy(dst, src, ETH_ALEN);
}

static inline bool ether_addr_equal(const u8 *a, const u8 *b)
{
	return !memcmp(a, b, ETH_ALEN);
}

static inline bool is_link_local_ether_addr(const u8 *a)
{
	return a[0] == 0x01 && a[1] == 0x80 && a[2] == 0xc2;
}

static inline bool is_valid_ether_addr(const u8 *a)
{
	static const u8 zero[ETH_ALEN];

	return !(a[0] & 1) && memcmp(a, zero, ETH_ALEN);
}

/* waiting is where the other side of the mailbox gets to run */
void shim_delay(unsigned long usecs);
#define udelay(n) shim_delay(n)
#define mdelay(n) shim_delay((n) * 1000UL)
#define msleep(n) shim_delay((n) * 1000UL)
#define usleep_range(a, b) shim_delay(a)

void shim_log(const char *level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
#define pr_err(fmt, ...) shim_log("err", fmt, ##__VA_ARGS__)
#define pr_info(fmt, ...) shim_log("info", fmt, ##__VA_ARGS__)
#define pr_debug(fmt, ...) do { } while (0)
#define hw_dbg(hw, fmt, ...) do { } while (0)
#define netdev_dbg(dev, fmt, ...) do { } while (0)

/* VF side MMIO: hw->hw_addr is a token, the offset is the register */
u32 shim_vf_readl(const volatile void *addr);
void shim_vf_writel(u32 value, volatile void *addr);
#define readl(a) shim_vf_readl(a)
#define writel(v, a) shim_vf_writel(v, a)

#endif
