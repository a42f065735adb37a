/*
 * epoch.c - the sample orders behind the epoch views, and the seed table.
 *
 * An epoch view /<split>/epochs/<seed>/<epoch>/<n>.sprite holds samples
 * perm[n*batch ...] of the data set's order (common/perm.h: sprite_order()
 * with the split's window, which the store records, never the cache budget),
 * so that a window of sheets is resident while its samples are served. Each
 * order comes with its plan (which sheets each batch needs, and when each
 * sheet is used), which the cache follows to load and evict. A
 * permutation costs 4 bytes a sample and a few milliseconds to build, so a
 * handful are kept (LRU, pinned while a read uses them) rather than one per
 * epoch.
 *
 * Inode numbers carry a 10-bit seed slot instead of the 64-bit seed: the
 * mount's own seed is slot 0 and other seeds get a slot on first lookup,
 * for as long as the mount lives. A slot is never given to another seed
 * while mounted: the kernel may hold inodes (and cached pages) of the old
 * one, and would be served the new seed's bytes under them. After
 * SFS_MAX_SEEDS seeds, a new one gets ENOSPC (logged once); readers such as
 * hntrain then gather samples from images.npy.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/perm.h"
#include "fs/sfs.h"

#define NPERMS 6

struct perm {
	uint32_t *p;
	struct sfs_plan plan; /* its arrays are malloc'd; NULL when it could not be built */
	uint64_t count;
	uint32_t slot, epoch, split;
	uint32_t pins;
	uint64_t used; /* LRU tick */
	int valid;
};

struct sfs_epochs {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct perm perms[NPERMS];
	uint64_t tick;
	int building;
};

static void plan_free(struct sfs_plan *pl)
{
	free((void *)pl->boff);
	free((void *)pl->bsh);
	free((void *)pl->soff);
	free((void *)pl->suse);
	memset(pl, 0, sizeof(*pl));
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

int sfs_epochs_create(struct sfs *fs)
{
	struct sfs_epochs *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	fs->ep = e;
	pthread_mutex_init(&fs->seed_lock, NULL);
	fs->seeds[0] = fs->o.seed;
	fs->nseeds = 1;
	return 0;
}

void sfs_epochs_destroy(struct sfs *fs)
{
	struct sfs_epochs *e = fs->ep;
	if (!e)
		return;
	for (int k = 0; k < NPERMS; k++) {
		free(e->perms[k].p);
		plan_free(&e->perms[k].plan);
	}
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->cond);
	free(e);
	fs->ep = NULL;
	pthread_mutex_destroy(&fs->seed_lock);
}

int sfs_seed_slot(struct sfs *fs, uint64_t seed)
{
	int r = -ENOSPC;
	pthread_mutex_lock(&fs->seed_lock);
	for (uint32_t k = 0; k < fs->nseeds; k++)
		if (fs->seeds[k] == seed) {
			r = (int)k;
			goto out;
		}
	if (fs->nseeds < SFS_MAX_SEEDS) {
		fs->seeds[fs->nseeds] = seed;
		/* tree.c reads nseeds without the lock: the seed is stored first */
		__atomic_store_n(&fs->nseeds, fs->nseeds + 1, __ATOMIC_RELEASE);
		r = (int)fs->nseeds - 1;
	} else if (!fs->seeds_full_logged) {
		fs->seeds_full_logged = 1;
		sfs_log("spritefs: %u seeds looked up under epochs/ since mounting; no room for "
			"seed %" PRIu64 " or any new one (ENOSPC): remount to start over",
			SFS_MAX_SEEDS, seed);
	}
out:
	pthread_mutex_unlock(&fs->seed_lock);
	return r;
}

uint64_t sfs_seed_of(struct sfs *fs, uint32_t slot)
{
	uint64_t s;
	pthread_mutex_lock(&fs->seed_lock);
	s = slot < fs->nseeds ? fs->seeds[slot] : 0;
	pthread_mutex_unlock(&fs->seed_lock);
	return s;
}

int sfs_epoch_get(struct sfs *fs, uint32_t slot, uint32_t epoch, uint32_t split,
		  const uint32_t **perm, void **handle)
{
	struct sfs_epochs *e = fs->ep;
	struct sfs_split *sp = &fs->splits[split];
	pthread_mutex_lock(&e->lock);
	for (;;) {
		for (int k = 0; k < NPERMS; k++) {
			struct perm *q = &e->perms[k];
			if (q->valid && q->slot == slot && q->epoch == epoch && q->split == split) {
				q->pins++;
				q->used = ++e->tick;
				*perm = q->p;
				*handle = q;
				pthread_mutex_unlock(&e->lock);
				return 0;
			}
		}
		if (!e->building)
			break;
		/* one builder at a time: the others most likely want the same order */
		pthread_cond_wait(&e->cond, &e->lock);
	}
	struct perm *victim = NULL;
	for (int k = 0; k < NPERMS; k++) {
		struct perm *q = &e->perms[k];
		if (q->pins)
			continue;
		if (!victim || !q->valid || (victim->valid && q->used < victim->used))
			victim = q;
		if (!q->valid)
			break;
	}
	if (!victim) {
		pthread_mutex_unlock(&e->lock);
		return -EBUSY;
	}
	e->building = 1;
	victim->valid = 0;
	uint32_t *old = victim->p;
	victim->p = NULL;
	struct sfs_plan oldplan = victim->plan;
	memset(&victim->plan, 0, sizeof(victim->plan));
	pthread_mutex_unlock(&e->lock);
	plan_free(&oldplan);

	uint64_t seed = sfs_seed_of(fs, slot);
	uint32_t *p = old && victim->count == sp->count ? old : NULL;
	if (!p) {
		free(old);
		p = malloc((sp->count ? sp->count : 1) * sizeof(uint32_t));
	}
	struct sfs_plan plan = {0};
	if (p && sprite_order(seed, epoch, (uint32_t)sp->count, fs->info->sheet_tiles, sp->window,
			      p) < 0) {
		free(p);
		p = NULL;
	}
	if (p) {
		/* the order indexes our sheets: check it before trusting it */
		for (uint64_t k = 0; k < sp->count; k++)
			if (p[k] >= sp->count) {
				free(p);
				p = NULL;
				break;
			}
		/* without a plan the views still work, read ahead by the old rule */
		if (p)
			(void)plan_build(fs, sp, p, &plan);
	}

	pthread_mutex_lock(&e->lock);
	e->building = 0;
	pthread_cond_broadcast(&e->cond);
	if (!p) {
		victim->count = 0;
		pthread_mutex_unlock(&e->lock);
		return -ENOMEM;
	}
	victim->p = p;
	victim->plan = plan;
	victim->count = sp->count;
	victim->slot = slot;
	victim->epoch = epoch;
	victim->split = split;
	victim->pins = 1;
	victim->used = ++e->tick;
	victim->valid = 1;
	*perm = p;
	*handle = victim;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

void sfs_epoch_put(struct sfs *fs, void *handle)
{
	struct sfs_epochs *e = fs->ep;
	struct perm *q = handle;
	pthread_mutex_lock(&e->lock);
	if (q->pins)
		q->pins--;
	pthread_mutex_unlock(&e->lock);
}
