/*
 * team.h - a fixed team of threads for the cpu backend (private to trainer/).
 *
 * hn_team_run(t, fn, arg) runs fn(arg, tid, n) on every member (the caller
 * is tid 0) and returns when all are done. Work is split by tid, statically,
 * so the same thread count always does the same arithmetic in the same
 * order: results are deterministic. Idle members spin briefly, then sleep
 * on a condition variable, so they never compete for the cores for long.
 */
#ifndef HN_TEAM_H
#define HN_TEAM_H

typedef struct hn_team hn_team;
typedef void (*hn_team_fn)(void *arg, int tid, int nthreads);

#define HN_TEAM_MAX 64

/* nthreads >= 1 in total (1: no threads are started). Returns 0 or -errno. */
int hn_team_create(int nthreads, hn_team **out);
void hn_team_destroy(hn_team *t); /* accepts NULL */
int hn_team_size(const hn_team *t);
void hn_team_run(hn_team *t, hn_team_fn fn, void *arg);

/* [*lo, *hi) = part tid of n items split into nthreads near-equal runs. */
static inline void hn_team_split(long n, int tid, int nthreads, long *lo, long *hi)
{
	*lo = n * tid / nthreads;
	*hi = n * (tid + 1) / nthreads;
}

#endif
