/*
 * loader.c - loader threads that read batches ahead of the compute thread
 * into a bounded ring, delivered strictly in sequence.
 *
 * The whole run is one fixed sequence of batches (epoch by epoch: the
 * training split in permutation order, then the test split in index order),
 * so the loaders can read the next epoch while the current one is being
 * evaluated. Batch k always lives in ring slot k % queue: a loader claims
 * the next k only when that slot is free, which bounds memory to `queue`
 * batches and makes the delivery order independent of how many loaders
 * there are and which one finishes first. The sample indices of a batch are
 * copied out of the permutation at claim time, under the lock, so only the
 * permutation of the newest epoch needs to be kept.
 *
 * A data watchdog bounds the consumer's wait: a read that has not returned
 * after max(HNTRAIN_DATA_TIMEOUT, HNTRAIN_DATA_TIMEOUT_FACTOR x the slowest
 * read so far) seconds (and, with several ranks, HNTRAIN_DIST_TIMEOUT at
 * most) fails the run with a message the source words (a mount names its
 * daemon and pid). A read stuck in the kernel cannot be interrupted, so its
 * thread is then left behind, unjoined (the process ends once the read
 * returns or the daemon is killed: the kernel waits for a request the
 * daemon has taken even through SIGKILL).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "trainer/augment.h"
#include "trainer/loader.h"

#define WAIT_FLOOR_S 60.0  /* HNTRAIN_DATA_TIMEOUT's default */
#define WAIT_FACTOR  10.0  /* HNTRAIN_DATA_TIMEOUT_FACTOR's default */
#define DIST_WAIT_S  600.0 /* HNTRAIN_DIST_TIMEOUT's default (dist_mpi.c) */

enum { SLOT_FREE, SLOT_LOADING, SLOT_READY };

struct slot {
	struct hn_batch b; /* b.idx: the sample indices, copied at claim time */
	uint64_t seq;
	int state;
	double t0; /* when its read began (sprite_now) */
};

struct hn_loader {
	struct hn_loader_config c;
	size_t tile_bytes;
	uint64_t ntrain, ntest; /* samples per pass */
	uint64_t ntrain_b, ntest_b, per_epoch, total;
	pthread_t *threads;
	int nthreads;
	pthread_mutex_t lock;
	pthread_cond_t loader_cv, consumer_cv;
	struct slot *slots;
	uint64_t next_claim, next_deliver;
	uint32_t *perm;
	uint64_t perm_epoch;
	int have_perm;
	int stop;
	int rc;
	char err[HN_ERR_MAX];
	double floor_s, factor, cap_s; /* the watchdog's limits (cap_s 0: none) */
	double slowest;		       /* the longest read so far, seconds */
	int stalled;		       /* the watchdog fired: a loader may be stuck in a read */
};

uint64_t hn_batches(uint64_t samples, int batch)
{
	return batch > 0 ? (samples + (uint64_t)batch - 1) / (uint64_t)batch : 0;
}

void hn_rank_share(uint64_t g, int batch, int rank, int nranks, uint64_t *lo, uint64_t *hi,
		   int *view)
{
	uint64_t vlo = (uint64_t)rank * (uint64_t)batch, vhi = vlo + (uint64_t)batch;
	*lo = g * (uint64_t)rank / (uint64_t)nranks;
	*hi = g * (uint64_t)(rank + 1) / (uint64_t)nranks;
	*view = *lo == (vlo < g ? vlo : g) && *hi == (vhi < g ? vhi : g) && *hi > *lo;
}

/*
 * This rank's share of global batch k of a pass of `count` samples: its
 * first sample in the pass and its size.
 */
static uint64_t share(const hn_loader *l, uint64_t k, uint64_t count, uint64_t *n, int *view)
{
	uint64_t gb = (uint64_t)l->c.batch * (uint64_t)l->c.nranks, first = k * gb, lo, hi;
	uint64_t g = count - first < gb ? count - first : gb;
	hn_rank_share(g, l->c.batch, l->c.rank, l->c.nranks, &lo, &hi, view);
	*n = hi - lo;
	return first + lo;
}

/*
 * Fill slot q for sequence number seq; called with the lock held. 0, or
 * < 0 with l->rc and l->err set and q left free.
 */
static int claim_locked(hn_loader *l, struct slot *q, uint64_t seq)
{
	uint64_t e = l->c.first_epoch + seq / l->per_epoch, r = seq % l->per_epoch;
	q->seq = seq;
	q->state = SLOT_LOADING;
	q->t0 = sprite_now();
	q->b.epoch = e;
	if (r < l->ntrain_b) {
		q->b.split = HN_SPLIT_TRAIN;
		q->b.index = r;
		uint64_t n;
		int view;
		uint64_t first = share(l, r, l->ntrain, &n, &view);
		q->b.view = view ? r * (uint64_t)l->c.nranks + (uint64_t)l->c.rank : HN_NO_VIEW;
		if (!l->have_perm || l->perm_epoch != e) {
			char why[HN_ERR_MAX];
			int rc = hn_source_perm(l->c.src, l->c.seed, e, l->c.window, l->perm, why);
			if (rc < 0) {
				q->state = SLOT_FREE;
				l->have_perm = 0;
				if (l->rc == 0) {
					l->rc = rc;
					snprintf(l->err, sizeof l->err, "%s", why);
				}
				return rc;
			}
			l->perm_epoch = e;
			l->have_perm = 1;
		}
		memcpy(q->b.idx, l->perm + first, n * sizeof *q->b.idx);
		q->b.n = (int)n;
		q->b.order_pos = first;
		q->b.in_order = 1;
	} else {
		q->b.split = HN_SPLIT_TEST;
		q->b.index = r - l->ntrain_b;
		q->b.view = HN_NO_VIEW;
		q->b.in_order = 0;
		uint64_t n;
		int view;
		uint64_t first = share(l, q->b.index, l->ntest, &n, &view);
		for (uint64_t i = 0; i < n; i++)
			q->b.idx[i] = (uint32_t)(first + i);
		q->b.n = (int)n;
	}
	return 0;
}

static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/*
 * --augment on a training batch just read: sample i is number first + i of
 * the epoch's order (first: this rank's share of global batch index), the
 * same number whatever the ranks and whichever loader read it. Timed
 * in this thread's CPU time, apart from the read, so that data wait still
 * measures the storage.
 */
static void augment_batch(hn_loader *l, struct hn_batch *b, uint8_t *tmp)
{
	const struct hn_source_info *si = hn_source_info(l->c.src);
	double t0 = thread_cpu_s();
	uint64_t n;
	int view;
	uint64_t first = share(l, b->index, l->ntrain, &n, &view);
	for (int i = 0; i < b->n; i++)
		hn_augment_tile(l->c.aug, l->c.seed, b->epoch, first + (uint64_t)i, si->h, si->w,
				si->c, b->tiles + (size_t)i * l->tile_bytes, tmp);
	b->augment_s = thread_cpu_s() - t0;
}

static void *loader_main(void *arg)
{
	hn_loader *l = arg;
	char err[HN_ERR_MAX];
	uint8_t *tmp = l->c.aug ? malloc(l->tile_bytes) : NULL;
	if (l->c.aug && !tmp) {
		pthread_mutex_lock(&l->lock);
		if (l->rc == 0) {
			l->rc = -ENOMEM;
			snprintf(l->err, sizeof l->err, "loader: out of memory");
		}
		pthread_cond_broadcast(&l->consumer_cv);
		pthread_mutex_unlock(&l->lock);
		return NULL;
	}
	pthread_mutex_lock(&l->lock);
	for (;;) {
		struct slot *q = NULL;
		while (!l->stop && l->rc == 0 && l->next_claim < l->total) {
			q = &l->slots[l->next_claim % (uint64_t)l->c.queue];
			if (q->state == SLOT_FREE)
				break;
			q = NULL;
			pthread_cond_wait(&l->loader_cv, &l->lock);
		}
		if (!q)
			break;
		if (claim_locked(l, q, l->next_claim++) < 0) {
			pthread_cond_broadcast(&l->consumer_cv);
			break;
		}
		pthread_mutex_unlock(&l->lock);

		err[0] = 0;
		double t0 = thread_cpu_s();
		int rc = hn_source_read(l->c.src, &q->b, err);
		q->b.augment_s = 0;
		if (rc >= 0 && tmp && q->b.split == HN_SPLIT_TRAIN) {
			q->b.n = rc; /* only this thread touches the slot until it is ready */
			augment_batch(l, &q->b, tmp);
		}
		q->b.loader_cpu_s = thread_cpu_s() - t0;

		pthread_mutex_lock(&l->lock);
		double took = sprite_now() - q->t0;
		if (took > l->slowest)
			l->slowest = took;
		if (rc < 0) {
			if (l->rc == 0) {
				l->rc = rc;
				snprintf(l->err, sizeof l->err, "%s", err[0] ? err : strerror(-rc));
			}
			q->state = SLOT_FREE;
		} else {
			q->b.n = rc; /* fewer where image files did not decode */
			q->state = SLOT_READY;
		}
		pthread_cond_broadcast(&l->consumer_cv);
	}
	pthread_mutex_unlock(&l->lock);
	free(tmp);
	return NULL;
}

/* Seconds from the environment variable name (> 0), else dflt; -EINVAL naming it. */
static int env_seconds(const char *name, double dflt, double min, double *out, char *err)
{
	const char *s = getenv(name);
	*out = dflt;
	if (!s || !*s)
		return 0;
	char *end;
	double v = strtod(s, &end);
	if (*end || !(v >= min) || v > 1e9) {
		snprintf(err, HN_ERR_MAX, "%s=%s: expected a number %s %g", name, s,
			 min > 0 ? ">=" : ">", min);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

/*
 * A batch's tiles: from 2 MiB up, in transparent huge pages
 * (sprite_huge_alloc). A mount's epoch
 * views are read with O_DIRECT straight into it, and FUSE pins the reader's
 * pages for each 1 MiB request: a huge page is pinned with one reference
 * where 4 KiB pages take one each (docs/ARCHITECTURE.md, "CPU floor").
 * Smaller batches stay in 4 KiB pages. Freed with free().
 */
static void *tiles_alloc(size_t n)
{
	if (n < (2u << 20))
		return malloc(n ? n : 1);
	return sprite_huge_alloc(&n);
}

int hn_loader_start(const struct hn_loader_config *c, hn_loader **out, char *err)
{
	const struct hn_source_info *si = hn_source_info(c->src);
	if (c->nloaders < 1 || c->nloaders > 256 || c->queue < 1 || c->queue > 4096 ||
	    c->batch < 1 || c->nranks < 1 || c->rank < 0 || c->rank >= c->nranks) {
		snprintf(err, HN_ERR_MAX, "loader: bad configuration");
		return -EINVAL;
	}
	double floor_s, factor, cap_s = 0;
	if (env_seconds("HNTRAIN_DATA_TIMEOUT", WAIT_FLOOR_S, 0.001, &floor_s, err) < 0 ||
	    env_seconds("HNTRAIN_DATA_TIMEOUT_FACTOR", WAIT_FACTOR, 1, &factor, err) < 0 ||
	    (c->nranks > 1 &&
	     env_seconds("HNTRAIN_DIST_TIMEOUT", DIST_WAIT_S, 0.001, &cap_s, err) < 0))
		return -EINVAL;
	hn_loader *l = calloc(1, sizeof *l);
	if (!l)
		return -ENOMEM;
	l->c = *c;
	l->floor_s = floor_s;
	l->factor = factor;
	l->cap_s = cap_s;
	l->tile_bytes = (size_t)si->h * si->w * si->c;
	l->ntrain = c->eval_only ? 0 : si->count[HN_SPLIT_TRAIN];
	l->ntest = c->eval ? si->count[HN_SPLIT_TEST] : 0;
	l->ntrain_b = hn_batches(l->ntrain, c->batch * c->nranks);
	l->ntest_b = hn_batches(l->ntest, c->batch * c->nranks);
	l->per_epoch = l->ntrain_b + l->ntest_b;
	l->total = c->eval_only			   ? l->per_epoch
		   : c->end_epoch > c->first_epoch ? (c->end_epoch - c->first_epoch) * l->per_epoch
						   : 0;
	if (!c->eval_only && l->total && c->first_batch <= l->ntrain_b) /* mid-epoch resume */
		l->next_claim = l->next_deliver = c->first_batch;
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->loader_cv, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* sprite_now's clock */
	pthread_cond_init(&l->consumer_cv, &ca);
	pthread_condattr_destroy(&ca);
	l->perm = malloc((l->ntrain ? l->ntrain : 1) * sizeof *l->perm);
	l->slots = calloc((size_t)c->queue, sizeof *l->slots);
	l->threads = calloc((size_t)c->nloaders, sizeof *l->threads);
	int rc = l->perm && l->slots && l->threads ? 0 : -ENOMEM;
	for (int i = 0; rc == 0 && i < c->queue; i++) {
		struct slot *q = &l->slots[i];
		q->b.tiles = tiles_alloc((size_t)c->batch * l->tile_bytes);
		q->b.labels = malloc((size_t)c->batch * sizeof *q->b.labels);
		q->b.idx = malloc((size_t)c->batch * sizeof *q->b.idx);
		if (!q->b.tiles || !q->b.labels || !q->b.idx)
			rc = -ENOMEM;
	}
	if (rc < 0) {
		snprintf(err, HN_ERR_MAX, "loader: out of memory for %d batches of %d samples",
			 c->queue, c->batch);
		hn_loader_stop(l);
		return rc;
	}
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	if (c->mask)
		pthread_attr_setaffinity_np(&attr, sizeof *c->mask, c->mask);
	for (int i = 0; i < c->nloaders; i++) {
		rc = -pthread_create(&l->threads[i], &attr, loader_main, l);
		if (rc < 0) {
			snprintf(err, HN_ERR_MAX, "loader: cannot start thread %d: %s", i,
				 strerror(-rc));
			break;
		}
		l->nthreads++;
	}
	pthread_attr_destroy(&attr);
	if (rc < 0) {
		hn_loader_stop(l);
		return rc;
	}
	*out = l;
	return 0;
}

/* How long a read may take: the floor, or factor x the slowest so far; the cap. */
static double wait_limit(const hn_loader *l)
{
	double lim = l->factor * l->slowest > l->floor_s ? l->factor * l->slowest : l->floor_s;
	return l->cap_s > 0 && l->cap_s < lim ? l->cap_s : lim;
}

/* The watchdog fired on a read begun `waited` seconds ago. Locked. */
static void stall_locked(hn_loader *l, double waited)
{
	char who[HN_ERR_MAX];
	hn_source_stalled(l->c.src, who, sizeof who);
	l->rc = -ETIMEDOUT;
	l->stalled = 1;
	double lim = wait_limit(l);
	const char *why = l->cap_s > 0 && lim == l->cap_s ? "HNTRAIN_DIST_TIMEOUT"
			  : lim == l->floor_s		  ? "HNTRAIN_DATA_TIMEOUT"
							  : "HNTRAIN_DATA_TIMEOUT_FACTOR";
	/* who last: a long mount path cuts the hint, not the facts */
	int n = snprintf(l->err, sizeof l->err,
			 "no data for %.0f s (limit %g s: %s; slowest read %.2f s): %s", waited,
			 lim, why, l->slowest, who);
	if (n >= (int)sizeof l->err)
		memcpy(l->err + sizeof l->err - 4, "...", 4);
}

int hn_loader_next(hn_loader *l, struct hn_batch **b, char *err)
{
	pthread_mutex_lock(&l->lock);
	if (l->next_deliver >= l->total) {
		pthread_mutex_unlock(&l->lock);
		snprintf(err, HN_ERR_MAX, "loader: no more batches");
		return -ENODATA;
	}
	struct slot *q = &l->slots[l->next_deliver % (uint64_t)l->c.queue];
	double since = sprite_now();
	while (l->rc == 0 && !(q->state == SLOT_READY && q->seq == l->next_deliver)) {
		/* the read of this batch began at claim; before that, count from now */
		double start =
			q->state == SLOT_LOADING && q->seq == l->next_deliver ? q->t0 : since;
		double until = start + wait_limit(l), now = sprite_now();
		if (now >= until) {
			stall_locked(l, now - start);
			break;
		}
		struct timespec ts = {.tv_sec = (time_t)until,
				      .tv_nsec = (long)((until - (double)(time_t)until) * 1e9)};
		pthread_cond_timedwait(&l->consumer_cv, &l->lock, &ts);
	}
	int rc = l->rc;
	if (rc < 0)
		snprintf(err, HN_ERR_MAX, "%s", l->err);
	else
		l->next_deliver++;
	pthread_mutex_unlock(&l->lock);
	*b = rc < 0 ? NULL : &q->b;
	return rc;
}

void hn_loader_release(hn_loader *l, struct hn_batch *b)
{
	struct slot *q = (struct slot *)((char *)b - offsetof(struct slot, b));
	pthread_mutex_lock(&l->lock);
	q->state = SLOT_FREE;
	pthread_cond_broadcast(&l->loader_cv);
	pthread_mutex_unlock(&l->lock);
}

int hn_loader_stop(hn_loader *l)
{
	if (!l)
		return 0;
	pthread_mutex_lock(&l->lock);
	l->stop = 1;
	int stalled = l->stalled;
	pthread_cond_broadcast(&l->loader_cv);
	pthread_mutex_unlock(&l->lock);
	if (stalled) {
		/*
		 * A loader waits in a read the kernel will not give up (a stopped
		 * FUSE daemon): it cannot be joined, and its slot and the source stay
		 * in use. The caller is about to exit, which ends it.
		 */
		for (int i = 0; i < l->nthreads; i++)
			pthread_detach(l->threads[i]);
		return 1;
	}
	for (int i = 0; i < l->nthreads; i++)
		pthread_join(l->threads[i], NULL);
	if (l->slots)
		for (int i = 0; i < l->c.queue; i++) {
			free(l->slots[i].b.tiles);
			free(l->slots[i].b.labels);
			free(l->slots[i].b.idx);
		}
	free(l->slots);
	free(l->threads);
	free(l->perm);
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->loader_cv);
	pthread_cond_destroy(&l->consumer_cv);
	free(l);
	return 0;
}
