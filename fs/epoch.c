/*
 * epoch.c - the sample orders behind the epoch views, and the seed table.
 *
 * An epoch view /<split>/epochs/<seed>/<epoch>/<n>.sprite holds samples
 * perm[n*batch ...] of the shared permutation (common/perm.h): sprite_perm()
 * when the split fits in the cache, sprite_perm_windowed() otherwise, so
 * that a window of sheets is resident while its samples are served. A
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

#include "common/perm.h"
#include "fs/sfs.h"

#define NPERMS 6

struct perm {
	uint32_t *p;
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
	for (int k = 0; k < NPERMS; k++)
		free(e->perms[k].p);
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
	pthread_mutex_unlock(&e->lock);

	uint64_t seed = sfs_seed_of(fs, slot);
	uint32_t *p = old && victim->count == sp->count ? old : NULL;
	if (!p) {
		free(old);
		p = malloc((sp->count ? sp->count : 1) * sizeof(uint32_t));
	}
	if (p) {
		if (sp->window)
			sprite_perm_windowed(seed, epoch, (uint32_t)sp->count,
					     fs->info->sheet_tiles, sp->window, p);
		else
			sprite_perm(seed, epoch, (uint32_t)sp->count, p);
		/* the order indexes our sheets: check it before trusting it */
		for (uint64_t k = 0; k < sp->count; k++)
			if (p[k] >= sp->count) {
				free(p);
				p = NULL;
				break;
			}
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
