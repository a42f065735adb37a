/*
 * epoch.c - the sample orders behind the epoch views, and the seed table.
 *
 * An epoch view /<split>/epochs/<seed>/<epoch>/<n>.sprite holds samples
 * perm[n*batch ...] of the data set's order (common/perm.h: sprite_order()
 * with the split's window, which the store records, never the cache budget),
 * so that a window of sheets is resident while its samples are served. Each
 * order comes with its plan (which sheets each batch needs, and when each
 * sheet is used), which the cache follows to load and evict.
 *
 * An order and its plan cost about 12 bytes a sample (sfs_order_bytes), so
 * they come out of a budget of their own (-o orders=): as many order slots
 * as the largest split's orders fit, at most SFS_MAX_ORDERS, kept LRU and
 * pinned while a read uses them. A store whose largest split does not fit
 * one order is refused at mount (main.c), so no declared sample count can
 * make the daemon allocate past the budget. A reader that finds every slot
 * pinned first asks the cache to let go of an idle stream's pin, then waits
 * on the condition variable, at most SFS_ORDER_WAIT_S seconds, for a slot;
 * only then does it get EBUSY. Waits and refusals are counted (stats.json).
 *
 * Orders are built by SFS_ORDER_BUILDERS builder threads, started after the
 * mount (sfs_epochs_start) and joined at unmount (sfs_epochs_stop), never
 * inside a FUSE request: a request that needs an order takes a slot for it
 * (its key set, "pending"), queues it and waits on the condition variable
 * until it is built; a request for the same order finds it pending and
 * waits for the same build. The lookup of an epoch view's batch file queues
 * its order when a builder is idle (sfs_epoch_prepare), so that the read
 * mostly finds it built. Nothing else waits for a build: stats.json,
 * dataset.json and reads of built orders take the lock only to find or pin
 * a slot, and the builders hold it only to take work and to publish it.
 * The wait for a build has no time limit of its own (it ends when the build
 * does, and the budget bounds the build's size, hence its time: 60-90 ns
 * a sample on 2 cores, 0.95-1.6 s for 16M samples by bench/order_time.sh);
 * the wait for a slot is bounded as said.
 * A slot being built holds the memory of its order already, so the budget
 * bounds the orders being built and the orders built together, as before.
 *
 * Inode numbers carry a 10-bit seed slot instead of the 64-bit seed: the
 * mount's own seed is slot 0 and other seeds get a slot on first lookup.
 * The kernel's lookups of each slot's inodes are counted (ll.c: lookups and
 * readdirplus entries add, FUSE forget subtracts); a slot whose count is
 * back to 0 holds no inode in the kernel, hence no cached page, and is
 * given to the next new seed once the table is full. A uid may hold at most
 * SFS_SEEDS_PER_UID slots at once, so one user's sweep of seeds cannot take
 * every slot of a shared (allow_other) mount; past that its new seeds get
 * ENOSPC (logged once) and readers such as hntrain gather from images.npy.
 * Orders are keyed by the seed itself, not its slot: an order of a slot's
 * former seed never answers for the new one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/perm.h"
#include "fs/sfs.h"

/* idle cache streams asked to unpin their orders before a reader waits */
#define RELEASE_TRIES 8
/* orders remembered as streamed (sfs_epoch_streamed), however often rebuilt */
#define STREAMED 256
/* threads that build orders: one big order does not hold up another's */
#define SFS_ORDER_BUILDERS 2

struct perm {
	uint32_t *p;
	struct sfs_plan plan; /* its arrays are malloc'd; NULL when it could not be built */
	uint64_t count;
	uint64_t seed;
	uint64_t bytes; /* of p and the plan, against the budget */
	uint32_t epoch, split;
	uint32_t pins;
	uint64_t used;	 /* LRU tick */
	uint64_t queued; /* tick when it was queued, while pending */
	int valid;	 /* built: p and plan may be read by whoever pins it */
	int pending;	 /* key set, queued or being built; never a victim */
	int busy;	 /* a builder has it */
};

struct sfs_epochs {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* an order built, or a pin dropped to 0 */
	pthread_cond_t work; /* an order queued, or stop */
	struct perm *perms;
	uint32_t nperms;
	uint32_t waiters;  /* readers waiting for a slot */
	uint32_t npending; /* slots pending, queued or being built */
	uint64_t tick;
	pthread_t builders[SFS_ORDER_BUILDERS];
	uint32_t nbuilders; /* started; 0: requests build their orders themselves */
	int stop;
	/* the last STREAMED orders the cache has followed readers of, as a ring */
	struct {
		uint64_t seed;
		uint32_t epoch, split;
	} streamed[STREAMED];
	uint32_t nstreamed;
};

static void plan_free(struct sfs_plan *pl)
{
	free((void *)pl->boff);
	free((void *)pl->bsh);
	free((void *)pl->soff);
	free((void *)pl->suse);
	memset(pl, 0, sizeof(*pl));
}

uint64_t sfs_order_bytes(const struct sfs *fs, const struct sfs_split *sp)
{
	/* perm, bsh and suse: 4 bytes a sample each at most; boff, soff, the plan's scratch */
	return 12 * sp->count + 4 * ((uint64_t)sp->epoch_batches + 2ull * sp->nsheets + 3) +
	       ((uint64_t)sp->epoch_batches + 63) / 64 * 8; /* the cache stream's bitmap */
}

/*
 * The plan of an order: the sheets each view batch needs, in the order of
 * their first use, and for each sheet the batches that use it. The cache
 * loads sheets in that order and evicts the one used farthest ahead
 * (Belady's rule, exact here because a view's reads are known in advance).
 * Costs about 8 bytes per distinct (batch, sheet) pair, at most 8 a sample.
 */
static int plan_build(struct sfs *fs, const struct sfs_split *sp, const uint32_t *perm,
		      struct sfs_plan *pl)
{
	uint64_t n = sp->count, B = fs->o.batch, T = fs->info->sheet_tiles;
	uint32_t S = sp->nsheets, nb = sp->epoch_batches;
	uint32_t *boff = malloc(((size_t)nb + 1) * sizeof(*boff));
	uint32_t *bsh = malloc((n ? n : 1) * sizeof(*bsh));
	uint32_t *soff = calloc((size_t)S + 1, sizeof(*soff));
	uint32_t *last = malloc((S ? S : 1) * sizeof(*last));
	uint32_t *suse = NULL;
	if (!boff || !bsh || !soff || !last)
		goto nomem;
	memset(last, 0xff, (S ? S : 1) * sizeof(*last));
	uint32_t m = 0;
	boff[0] = 0;
	for (uint32_t b = 0; b < nb; b++) {
		uint64_t end = (uint64_t)(b + 1) * B < n ? (uint64_t)(b + 1) * B : n;
		/* -o ranks: another node's batch needs nothing here, so nothing is loaded for it */
		uint32_t owner = fs->o.nranks > 1 ? b % fs->o.nranks : 0;
		if (owner < fs->o.rank_lo || owner > fs->o.rank_hi)
			end = (uint64_t)b * B;
		for (uint64_t k = (uint64_t)b * B; k < end; k++) {
			uint32_t sh = (uint32_t)(perm[k] / T);
			if (last[sh] != b) {
				last[sh] = b;
				bsh[m++] = sh;
				soff[sh + 1]++;
			}
		}
		boff[b + 1] = m;
	}
	uint32_t *shrunk = realloc(bsh, (m ? m : 1) * sizeof(*bsh));
	if (shrunk)
		bsh = shrunk;
	suse = malloc((m ? m : 1) * sizeof(*suse));
	if (!suse)
		goto nomem;
	for (uint32_t k = 0; k < S; k++)
		soff[k + 1] += soff[k];
	memcpy(last, soff, S * sizeof(*last)); /* fill positions */
	for (uint32_t b = 0; b < nb; b++)
		for (uint32_t k = boff[b]; k < boff[b + 1]; k++)
			suse[last[bsh[k]]++] = b;
	free(last);
	pl->split = sp->index;
	pl->first_sheet = sp->first_sheet;
	pl->nsheets = S;
	pl->nbatches = nb;
	pl->boff = boff;
	pl->bsh = bsh;
	pl->soff = soff;
	pl->suse = suse;
	return 0;
nomem:
	free(boff);
	free(bsh);
	free(soff);
	free(last);
	free(suse);
	return -ENOMEM;
}

const struct sfs_plan *sfs_epoch_plan(void *handle)
{
	struct perm *q = handle;
	return q->plan.boff ? &q->plan : NULL;
}

void sfs_epoch_pin(struct sfs *fs, void *handle)
{
	struct sfs_epochs *e = fs->ep;
	struct perm *q = handle;
	pthread_mutex_lock(&e->lock);
	q->pins++;
	pthread_mutex_unlock(&e->lock);
}

int sfs_epoch_streamed(struct sfs *fs, void *handle)
{
	struct sfs_epochs *e = fs->ep;
	struct perm *q = handle;
	int was = 0;
	pthread_mutex_lock(&e->lock);
	for (uint32_t k = 0; k < STREAMED && k < e->nstreamed && !was; k++)
		was = e->streamed[k].seed == q->seed && e->streamed[k].epoch == q->epoch &&
		      e->streamed[k].split == q->split;
	if (!was) {
		uint32_t k = e->nstreamed++ % STREAMED;
		e->streamed[k].seed = q->seed;
		e->streamed[k].epoch = q->epoch;
		e->streamed[k].split = q->split;
	}
	pthread_mutex_unlock(&e->lock);
	return was;
}

uint32_t sfs_epoch_pins(struct sfs *fs, void *handle)
{
	struct sfs_epochs *e = fs->ep;
	struct perm *q = handle;
	pthread_mutex_lock(&e->lock);
	uint32_t n = q->pins;
	pthread_mutex_unlock(&e->lock);
	return n;
}

uint32_t sfs_order_slots(const struct sfs *fs)
{
	uint64_t most = 0;
	for (uint32_t k = 0; k < fs->info->nsplits; k++) {
		uint64_t b = sfs_order_bytes(fs, &fs->splits[k]);
		most = b > most ? b : most;
	}
	uint64_t n = most ? fs->o.orders_bytes / most : SFS_MAX_ORDERS;
	return n > SFS_MAX_ORDERS ? SFS_MAX_ORDERS : (uint32_t)n;
}

int sfs_epochs_create(struct sfs *fs)
{
	struct sfs_epochs *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->nperms = sfs_order_slots(fs);
	e->perms = calloc(e->nperms ? e->nperms : 1, sizeof(*e->perms));
	if (!e->perms) {
		free(e);
		return -ENOMEM;
	}
	pthread_mutex_init(&e->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->cond, &ca);
	pthread_cond_init(&e->work, &ca);
	pthread_condattr_destroy(&ca);
	fs->ep = e;
	pthread_mutex_init(&fs->seed_lock, NULL);
	fs->seeds[0] = fs->o.seed;
	fs->seed_live[0] = 1;
	fs->nseeds = 1;
	return 0;
}

void sfs_epochs_destroy(struct sfs *fs)
{
	struct sfs_epochs *e = fs->ep;
	if (!e)
		return;
	sfs_epochs_stop(fs);
	for (uint32_t k = 0; k < e->nperms; k++) {
		free(e->perms[k].p);
		plan_free(&e->perms[k].plan);
	}
	free(e->perms);
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->cond);
	pthread_cond_destroy(&e->work);
	free(e);
	fs->ep = NULL;
	pthread_mutex_destroy(&fs->seed_lock);
}

/* Called with seed_lock held: a free slot for a new seed of uid, or -ENOSPC. */
static int seed_take(struct sfs *fs, uint32_t uid)
{
	uint32_t held = 0, idle = SFS_MAX_SEEDS;
	for (uint32_t k = 1; k < fs->nseeds; k++) {
		if (fs->seed_live[k] && fs->seed_refs[k] && fs->seed_uid[k] == uid)
			held++;
		if ((!fs->seed_live[k] || !fs->seed_refs[k]) && idle == SFS_MAX_SEEDS)
			idle = k;
	}
	if (uid != 0 && held >= SFS_SEEDS_PER_UID)
		return -ENOSPC;
	if (fs->nseeds < SFS_MAX_SEEDS) /* a slot never used before */
		return (int)fs->nseeds;
	if (idle == SFS_MAX_SEEDS)
		return -ENOSPC;
	/* the kernel holds no inode of it: nothing can be served under its old seed */
	if (fs->seed_live[idle])
		SFS_ADD(fs, seeds_recycled, 1);
	return (int)idle;
}

int sfs_seed_slot(struct sfs *fs, uint64_t seed, uint32_t uid)
{
	int r;
	pthread_mutex_lock(&fs->seed_lock);
	for (uint32_t k = 0; k < fs->nseeds; k++)
		if (fs->seed_live[k] && fs->seeds[k] == seed) {
			fs->seed_refs[k]++;
			r = (int)k;
			goto out;
		}
	r = seed_take(fs, uid);
	if (r >= 0) {
		uint32_t k = (uint32_t)r;
		__atomic_store_n(&fs->seeds[k], seed, __ATOMIC_RELAXED); /* read by epoch_get */
		fs->seed_uid[k] = uid;
		fs->seed_refs[k] = 1;
		/* tree.c reads these without the lock: the seed is stored first */
		__atomic_store_n(&fs->seed_live[k], 1, __ATOMIC_RELEASE);
		if (k == fs->nseeds)
			__atomic_store_n(&fs->nseeds, k + 1, __ATOMIC_RELEASE);
	} else {
		SFS_ADD(fs, seed_refusals, 1);
		if (!fs->seeds_full_logged) {
			fs->seeds_full_logged = 1;
			sfs_log("spritefs: no seed slot for seed %" PRIu64 " of uid %u (ENOSPC): "
				"%u seeds in use, at most %u per uid; a slot is free again once "
				"the kernel forgets its files (logged once)",
				seed, uid, SFS_MAX_SEEDS, SFS_SEEDS_PER_UID);
		}
	}
out:
	pthread_mutex_unlock(&fs->seed_lock);
	return r;
}

int sfs_seed_ref(struct sfs *fs, uint32_t slot, const uint64_t *seed)
{
	int r = -ENOENT;
	if (slot >= SFS_MAX_SEEDS)
		return r;
	pthread_mutex_lock(&fs->seed_lock);
	if (slot < fs->nseeds && fs->seed_live[slot] && (!seed || fs->seeds[slot] == *seed)) {
		fs->seed_refs[slot]++;
		r = 0;
	}
	pthread_mutex_unlock(&fs->seed_lock);
	return r;
}

void sfs_seed_unref(struct sfs *fs, uint32_t slot, uint64_t n)
{
	if (slot >= SFS_MAX_SEEDS)
		return;
	pthread_mutex_lock(&fs->seed_lock);
	fs->seed_refs[slot] = fs->seed_refs[slot] > n ? fs->seed_refs[slot] - n : 0;
	pthread_mutex_unlock(&fs->seed_lock);
}

int sfs_seed_live(struct sfs *fs, uint32_t slot)
{
	return slot < __atomic_load_n(&fs->nseeds, __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(&fs->seed_live[slot], __ATOMIC_ACQUIRE);
}

uint64_t sfs_seed_of(struct sfs *fs, uint32_t slot)
{
	uint64_t s;
	pthread_mutex_lock(&fs->seed_lock);
	s = slot < fs->nseeds ? fs->seeds[slot] : 0;
	pthread_mutex_unlock(&fs->seed_lock);
	return s;
}

/*
 * A slot for a new order: an unpinned one (empty first, else least recently
 * used), or NULL when every slot is pinned. Called with the lock held.
 */
static struct perm *victim_of(struct sfs_epochs *e)
{
	struct perm *victim = NULL;
	for (uint32_t k = 0; k < e->nperms; k++) {
		struct perm *q = &e->perms[k];
		if (q->pins || q->pending)
			continue;
		if (!victim || !q->valid || (victim->valid && q->used < victim->used))
			victim = q;
		if (!q->valid)
			break;
	}
	return victim;
}

/* Build the order of (seed, epoch, split) into p (count entries) and its plan. */
static uint32_t *order_build(struct sfs *fs, const struct sfs_split *sp, uint64_t seed,
			     uint32_t epoch, uint32_t *p, struct sfs_plan *plan)
{
	if (!p)
		p = malloc((sp->count ? sp->count : 1) * sizeof(uint32_t));
	if (p && sprite_order(seed, epoch, (uint32_t)sp->count, fs->info->sheet_tiles, sp->window,
			      p) < 0) {
		free(p);
		return NULL;
	}
	if (!p)
		return NULL;
	/* the order indexes our sheets: check it before trusting it */
	for (uint64_t k = 0; k < sp->count; k++)
		if (p[k] >= sp->count) {
			free(p);
			return NULL;
		}
	/* without a plan the views still work, read ahead by the old rule */
	(void)plan_build(fs, sp, p, plan);
	return p;
}

/*
 * Give slot q to the order (seed, epoch, split) and queue it: its old order
 * leaves the budget now (its array is kept for the builder to reuse when
 * the count is the same). Called with the lock held.
 */
static void order_queue(struct sfs *fs, struct sfs_epochs *e, struct perm *q, uint64_t seed,
			uint32_t epoch, uint32_t split)
{
	q->valid = 0;
	SFS_SUB(fs, orders_bytes, q->bytes);
	q->bytes = 0;
	q->seed = seed;
	q->epoch = epoch;
	q->split = split;
	q->pending = 1;
	q->busy = 0;
	q->queued = ++e->tick;
	q->used = e->tick;
	e->npending++;
	pthread_cond_signal(&e->work);
}

/*
 * Build the pending order of slot q: called with the lock held, which is
 * dropped while building. Publishes the order (valid) or, without memory,
 * an empty slot, and wakes the readers waiting for it.
 */
static void order_make(struct sfs *fs, struct sfs_epochs *e, struct perm *q)
{
	q->busy = 1;
	const struct sfs_split *sp = &fs->splits[q->split];
	uint64_t seed = q->seed;
	uint32_t epoch = q->epoch;
	uint32_t *old = q->p;
	q->p = NULL;
	struct sfs_plan oldplan = q->plan;
	memset(&q->plan, 0, sizeof(q->plan));
	uint32_t *reuse = old && q->count == sp->count ? old : NULL;
	q->count = 0;
	pthread_mutex_unlock(&e->lock);

	plan_free(&oldplan);
	if (!reuse)
		free(old);
	struct sfs_plan plan = {0};
	uint32_t *p = order_build(fs, sp, seed, epoch, reuse, &plan);

	pthread_mutex_lock(&e->lock);
	q->busy = 0;
	q->pending = 0;
	e->npending--;
	if (p) {
		q->p = p;
		q->plan = plan;
		q->count = sp->count;
		q->bytes = sfs_order_bytes(fs, sp);
		SFS_ADD(fs, orders_bytes, q->bytes);
		q->valid = 1;
	}
	pthread_cond_broadcast(&e->cond);
}

/* The pending order queued first that no builder has yet, or NULL. Lock held. */
static struct perm *order_next(struct sfs_epochs *e)
{
	struct perm *next = NULL;
	for (uint32_t k = 0; k < e->nperms; k++) {
		struct perm *q = &e->perms[k];
		if (q->pending && !q->busy && (!next || q->queued < next->queued))
			next = q;
	}
	return next;
}

static void *builder_main(void *arg)
{
	struct sfs *fs = arg;
	struct sfs_epochs *e = fs->ep;
	pthread_mutex_lock(&e->lock);
	for (;;) {
		struct perm *q = order_next(e);
		if (q && e->stop && !q->pins) {
			q->pending = 0; /* queued by a lookup alone: nobody will read it now */
			e->npending--;
		} else if (q) {
			order_make(fs, e, q); /* a reader waits for it */
		} else if (e->stop)
			break;
		else
			pthread_cond_wait(&e->work, &e->lock);
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

int sfs_epochs_start(struct sfs *fs)
{
	struct sfs_epochs *e = fs->ep;
	int r = 0;
	pthread_mutex_lock(&e->lock);
	e->stop = 0;
	while (e->nbuilders < SFS_ORDER_BUILDERS) {
		r = -pthread_create(&e->builders[e->nbuilders], NULL, builder_main, fs);
		if (r < 0)
			break;
		e->nbuilders++;
	}
	pthread_mutex_unlock(&e->lock);
	/* with none, requests build their own orders (as they did before builders) */
	return e->nbuilders ? 0 : r;
}

void sfs_epochs_stop(struct sfs *fs)
{
	struct sfs_epochs *e = fs->ep;
	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	e->stop = 1;
	pthread_cond_broadcast(&e->work);
	uint32_t n = e->nbuilders;
	pthread_mutex_unlock(&e->lock);
	/* only the thread that started them stops them: nbuilders is not read elsewhere then */
	for (uint32_t k = 0; k < n; k++)
		pthread_join(e->builders[k], NULL);
	pthread_mutex_lock(&e->lock);
	e->nbuilders = 0;
	pthread_mutex_unlock(&e->lock);
}

static struct perm *order_find(struct sfs_epochs *e, uint64_t seed, uint32_t epoch, uint32_t split)
{
	for (uint32_t k = 0; k < e->nperms; k++) {
		struct perm *q = &e->perms[k];
		if ((q->valid || q->pending) && q->seed == seed && q->epoch == epoch &&
		    q->split == split)
			return q;
	}
	return NULL;
}

void sfs_epoch_prepare(struct sfs *fs, uint32_t slot, uint32_t epoch, uint32_t split)
{
	struct sfs_epochs *e = fs->ep;
	if (slot >= SFS_MAX_SEEDS || split >= fs->info->nsplits)
		return;
	uint64_t seed = __atomic_load_n(&fs->seeds[slot], __ATOMIC_RELAXED);
	pthread_mutex_lock(&e->lock);
	/* only for an idle builder: lookups alone never queue more than the builders do */
	if (e->nbuilders && !e->stop && e->npending < e->nbuilders &&
	    !order_find(e, seed, epoch, split)) {
		struct perm *victim = victim_of(e);
		if (victim)
			order_queue(fs, e, victim, seed, epoch, split);
	}
	pthread_mutex_unlock(&e->lock);
}

int sfs_epoch_get(struct sfs *fs, uint32_t slot, uint32_t epoch, uint32_t split,
		  const uint32_t **perm, void **handle)
{
	struct sfs_epochs *e = fs->ep;
	struct sfs_split *sp = &fs->splits[split];
	/*
	 * No lock: the slot is live while the kernel holds the inode being
	 * read, so its seed cannot change under this request.
	 */
	uint64_t seed =
		slot < SFS_MAX_SEEDS ? __atomic_load_n(&fs->seeds[slot], __ATOMIC_RELAXED) : 0;
	struct timespec until = {0};
	int waited = 0, released = 0;
	pthread_mutex_lock(&e->lock);
	struct perm *q;
	for (;;) {
		q = order_find(e, seed, epoch, split);
		if (q)
			break;
		struct perm *victim = victim_of(e);
		if (victim) {
			order_queue(fs, e, victim, seed, epoch, split);
			continue;
		}
		if (released < RELEASE_TRIES) {
			/* the cache's streams pin orders they follow: an idle one lets go */
			pthread_mutex_unlock(&e->lock);
			int dropped = fs->release_order ? fs->release_order(fs) : 0;
			pthread_mutex_lock(&e->lock);
			released = dropped ? released + 1 : RELEASE_TRIES;
			continue;
		}
		if (!waited) {
			waited = 1;
			SFS_ADD(fs, order_waits, 1);
		}
		if (!until.tv_sec) {
			clock_gettime(CLOCK_MONOTONIC, &until);
			until.tv_sec += SFS_ORDER_WAIT_S;
		}
		e->waiters++;
		int r = pthread_cond_timedwait(&e->cond, &e->lock, &until);
		e->waiters--;
		released = 0; /* a pin dropped: a stream may now be the only one left */
		if (r == ETIMEDOUT) {
			pthread_mutex_unlock(&e->lock);
			SFS_ADD(fs, order_refusals, 1);
			sfs_log("spritefs: %s/epochs/%" PRIu64 "/%u: every one of the %u epoch "
				"orders stayed in use for %d s (EBUSY); -o orders= above %llu "
				"keeps more",
				sp->name, seed, epoch, e->nperms, SFS_ORDER_WAIT_S,
				(unsigned long long)fs->o.orders_bytes);
			return -EBUSY;
		}
	}
	/* pinned, the slot stays this order's while it is built */
	q->pins++;
	q->used = ++e->tick;
	while (q->pending) {
		if (!e->nbuilders && !q->busy)
			order_make(fs, e, q); /* no builder threads: build it here */
		else
			pthread_cond_wait(&e->cond, &e->lock);
	}
	if (!q->valid) {
		/* no memory for it: the slot is free again */
		if (--q->pins <= 1 && e->waiters)
			pthread_cond_broadcast(&e->cond);
		pthread_mutex_unlock(&e->lock);
		return -ENOMEM;
	}
	*perm = q->p;
	*handle = q;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

void sfs_epoch_put(struct sfs *fs, void *handle)
{
	struct sfs_epochs *e = fs->ep;
	struct perm *q = handle;
	pthread_mutex_lock(&e->lock);
	/* at 0 the slot is free; at 1 it may be a stream's alone, which lets go on request */
	if (q->pins && --q->pins <= 1 && e->waiters)
		pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
}
