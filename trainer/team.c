/*
 * team.c - the cpu backend's thread team: one dispatch = one generation.
 *
 * The caller bumps a generation counter and works as member 0; the other
 * members notice the new generation (spinning SPIN_ITERS pauses first --
 * tens to hundreds of microseconds, depending on the CPU's pause latency --
 * since a training step dispatches twice within milliseconds, then sleeping
 * on a condition variable), run the function, and count down. The last to
 * finish wakes the caller if it went to sleep. A dispatch costs a few
 * microseconds on an idle machine and never busy-waits for long on a loaded
 * one.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "trainer/team.h"

#define SPIN_ITERS 4000

struct hn_team {
	int n;
	pthread_t th[HN_TEAM_MAX];
	pthread_mutex_t mu;
	pthread_cond_t go, done;
	hn_team_fn fn;
	void *arg;
	unsigned long gen; /* __atomic */
	int pending;	   /* __atomic: members still running this generation */
	int quit;
};

struct member {
	hn_team *t;
	int tid;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void *member_main(void *p)
{
	struct member *me = p;
	hn_team *t = me->t;
	int tid = me->tid;
	unsigned long seen = 0;
	free(me);
	for (;;) {
		unsigned long g = __atomic_load_n(&t->gen, __ATOMIC_ACQUIRE);
		for (int i = 0; i < SPIN_ITERS && g == seen; i++) {
			cpu_relax();
			g = __atomic_load_n(&t->gen, __ATOMIC_ACQUIRE);
		}
		if (g == seen) {
			pthread_mutex_lock(&t->mu);
			while ((g = __atomic_load_n(&t->gen, __ATOMIC_ACQUIRE)) == seen && !t->quit)
				pthread_cond_wait(&t->go, &t->mu);
			pthread_mutex_unlock(&t->mu);
		}
		if (t->quit)
			return NULL;
		seen = g;
		t->fn(t->arg, tid, t->n);
		if (__atomic_sub_fetch(&t->pending, 1, __ATOMIC_ACQ_REL) == 0) {
			pthread_mutex_lock(&t->mu);
			pthread_cond_signal(&t->done);
			pthread_mutex_unlock(&t->mu);
		}
	}
}

int hn_team_create(int nthreads, hn_team **out)
{
	if (nthreads < 1 || nthreads > HN_TEAM_MAX)
		return -EINVAL;
	hn_team *t = calloc(1, sizeof *t);
	if (!t)
		return -ENOMEM;
	t->n = 1;
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->go, NULL);
	pthread_cond_init(&t->done, NULL);
	for (int i = 1; i < nthreads; i++) {
		struct member *me = malloc(sizeof *me);
		if (!me) {
			hn_team_destroy(t);
			return -ENOMEM;
		}
		me->t = t;
		me->tid = i;
		int rc = pthread_create(&t->th[i], NULL, member_main, me);
		if (rc) {
			free(me);
			hn_team_destroy(t);
			return -rc;
		}
		t->n = i + 1;
	}
	*out = t;
	return 0;
}

void hn_team_destroy(hn_team *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	t->quit = 1;
	__atomic_add_fetch(&t->gen, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&t->go);
	pthread_mutex_unlock(&t->mu);
	for (int i = 1; i < t->n; i++)
		pthread_join(t->th[i], NULL);
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->go);
	pthread_cond_destroy(&t->done);
	free(t);
}

int hn_team_size(const hn_team *t)
{
	return t ? t->n : 1;
}

void hn_team_run(hn_team *t, hn_team_fn fn, void *arg)
{
	if (!t || t->n == 1) {
		fn(arg, 0, 1);
		return;
	}
	t->fn = fn;
	t->arg = arg;
	__atomic_store_n(&t->pending, t->n - 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&t->mu);
	__atomic_add_fetch(&t->gen, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&t->go);
	pthread_mutex_unlock(&t->mu);
	fn(arg, 0, t->n);
	for (int i = 0; i < SPIN_ITERS; i++) {
		if (__atomic_load_n(&t->pending, __ATOMIC_ACQUIRE) == 0)
			return;
		cpu_relax();
	}
	pthread_mutex_lock(&t->mu);
	while (__atomic_load_n(&t->pending, __ATOMIC_ACQUIRE) != 0)
		pthread_cond_wait(&t->done, &t->mu);
	pthread_mutex_unlock(&t->mu);
}
