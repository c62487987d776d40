/* SPDX-License-Identifier: GPL-2.0 */
/* Kernel stand-ins for the real-code tests of test/realcode: functions
 * are cut by name out of the patched driver sources (see ../realcode.sh)
 * and compiled against this and a mirror of the structures they touch.
 * Locks are real pthread locks where the test runs threads.
 */
#ifndef _REALCODE_COMMON_H_
#define _REALCODE_COMMON_H_

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int32_t s32;
typedef int64_t s64;

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define READ_ONCE(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define WRITE_ONCE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define BIT(n) (1UL << (n))
#define BIT_ULL(n) (1ULL << (n))
#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))
#define min_t(t, a, b) ((t)(a) < (t)(b) ? (t)(a) : (t)(b))
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#define smp_mb__before_atomic() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define fallthrough __attribute__((__fallthrough__))

static inline int test_bit(int nr, const unsigned long *addr)
{
	return (__atomic_load_n(addr, __ATOMIC_SEQ_CST) >> nr) & 1;
}

static inline void set_bit(int nr, unsigned long *addr)
{
	__atomic_fetch_or(addr, 1UL << nr, __ATOMIC_SEQ_CST);
}

static inline void clear_bit(int nr, unsigned long *addr)
{
	__atomic_fetch_and(addr, ~(1UL << nr), __ATOMIC_SEQ_CST);
}

static inline int test_and_set_bit(int nr, unsigned long *addr)
{
	return (__atomic_fetch_or(addr, 1UL << nr, __ATOMIC_SEQ_CST) >> nr) & 1;
}

static inline int test_and_clear_bit(int nr, unsigned long *addr)
{
	return (__atomic_fetch_and(addr, ~(1UL << nr), __ATOMIC_SEQ_CST) >> nr) & 1;
}

/* spinlock_t is a pthread mutex; a test may hook the moments just after
 * a lock is taken and just after it is dropped, to run the other side
 * exactly there
 */
typedef struct {
	pthread_mutex_t m;
} spinlock_t;

extern void (*lock_hook)(spinlock_t *l, bool taken);
/* the last lock a thread had to wait for: another thread can tell that
 * its peer is blocked rather than done
 */
extern spinlock_t *volatile contended;

static inline void spin_lock_init(spinlock_t *l)
{
	pthread_mutex_init(&l->m, NULL);
}

static inline void spin_lock(spinlock_t *l)
{
	if (pthread_mutex_trylock(&l->m)) {
		contended = l;
		pthread_mutex_lock(&l->m);
	}
	if (lock_hook)
		lock_hook(l, true);
}

static inline void spin_unlock(spinlock_t *l)
{
	pthread_mutex_unlock(&l->m);
	if (lock_hook)
		lock_hook(l, false);
}

#define spin_lock_bh(l) spin_lock(l)
#define spin_unlock_bh(l) spin_unlock(l)
#define spin_lock_irqsave(l, f) do { (f) = 0; spin_lock(l); } while (0)
#define spin_unlock_irqrestore(l, f) do { (void)(f); spin_unlock(l); } while (0)

static unsigned long checks, failures;
#define CHECK(cond, ...) do {						\
	checks++;							\
	if (!(cond)) {							\
		failures++;						\
		if (failures <= 10) {					\
			printf("FAIL %s:%d: ", __FILE__, __LINE__);	\
			printf(__VA_ARGS__);				\
			printf("\n");					\
		}							\
	}								\
} while (0)

#endif
