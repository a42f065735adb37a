/*
 * cache.c - decoded sheets held in memory under a budget.
 *
 * One slot per sheet of the store (states: empty, loading, ready, failed),
 * one mutex and one condition variable. Decoded sheets live in their own
 * anonymous mappings rather than in malloc'd memory: a sheet is large, and
 * munmap() returns its pages at once, so the process's resident size follows
 * the budget instead of the allocator's high-water mark.
 *
 * Eviction is CLOCK over ready, unpinned sheets. A sheet that was prefetched
 * and not yet read is only evicted by a reader that needs room (never by
 * another prefetch), so a prefetch cannot push out the work of the previous
 * one. A reader that needs a sheet while everything is pinned goes over
 * budget for the duration (pins are bounded by the readers in flight); a
 * prefetch never does. A sheet that fails its checksum is marked failed for
 * good: the bytes on disk will not change while we are mounted, and every
 * later reader gets EIO without another read.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fs/sfs.h"

enum { S_EMPTY = 0, S_LOADING, S_READY, S_FAILED };

struct slot {
	uint8_t *raw;
	size_t map_len;
	uint32_t pins;
	uint8_t state;
	uint8_t clock;	 /* referenced since the hand last passed */
	uint8_t unused;	 /* prefetched, not yet read */
	uint8_t waiters; /* a reader sleeps on it */
	int err;	 /* last error for S_EMPTY after a transient failure */
};

struct sfs_cache {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct slot *slots;
	uint32_t n;
	uint32_t hand;
	uint64_t budget;
	uint64_t resident; /* ready + loading reservations */
};

static size_t map_len_of(struct sfs *fs, uint32_t i)
{
	size_t raw = fs->info->sheets[i].raw_size;
	return (raw + 4095) & ~(size_t)4095;
}

int sfs_cache_create(struct sfs *fs)
{
	struct sfs_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->n = fs->info->nsheets;
	c->slots = calloc(c->n ? c->n : 1, sizeof(*c->slots));
	if (!c->slots) {
		free(c);
		return -ENOMEM;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	c->budget = fs->o.cache_bytes;
	fs->cache = c;
	return 0;
}

void sfs_cache_destroy(struct sfs *fs)
{
	struct sfs_cache *c = fs->cache;
	if (!c)
		return;
	for (uint32_t i = 0; i < c->n; i++)
		if (c->slots[i].raw)
			munmap(c->slots[i].raw, c->slots[i].map_len);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c->slots);
	free(c);
	fs->cache = NULL;
}

/*
 * Evict until need more bytes fit, or nothing more may go. Called locked;
 * victims are unmapped after the lock is dropped, by the caller, through
 * the list it passes.
 */
struct victims {
	void *p[16];
	size_t len[16];
	int n;
};

static void make_room(struct sfs *fs, struct sfs_cache *c, uint64_t need, int demand,
		      struct victims *v)
{
	uint32_t scanned = 0;
	while (c->resident + need > c->budget && scanned < 2 * c->n && v->n < 16) {
		struct slot *s = &c->slots[c->hand];
		uint32_t idx = c->hand;
		c->hand = (c->hand + 1) % c->n;
		scanned++;
		if (s->state != S_READY || s->pins)
			continue;
		if (s->unused && !demand)
			continue;
		if (s->clock) {
			s->clock = 0;
			continue;
		}
		(void)idx;
		v->p[v->n] = s->raw;
		v->len[v->n] = s->map_len;
		v->n++;
		c->resident -= s->map_len;
		SFS_SUB(fs, bytes_resident, s->map_len);
		SFS_SUB(fs, sheets_resident, 1);
		SFS_ADD(fs, evictions, 1);
		s->raw = NULL;
		s->map_len = 0;
		s->unused = 0;
		s->state = S_EMPTY;
	}
}

static void drop_victims(struct victims *v)
{
	for (int k = 0; k < v->n; k++)
		munmap(v->p[k], v->len[k]);
	v->n = 0;
}

/* Start loading sheet i (locked, slot empty). Returns 0 or -EAGAIN (no room for a prefetch). */
static int start_load(struct sfs *fs, struct sfs_cache *c, uint32_t i, int demand,
		      struct victims *v)
{
	struct slot *s = &c->slots[i];
	size_t len = map_len_of(fs, i);
	make_room(fs, c, len, demand, v);
	while (demand && c->resident + len > c->budget && v->n == 16) {
		/* the victim list filled up: unmap outside the lock and go on */
		pthread_mutex_unlock(&c->lock);
		drop_victims(v);
		pthread_mutex_lock(&c->lock);
		if (s->state != S_EMPTY)
			return 0;
		make_room(fs, c, len, demand, v);
	}
	if (!demand && c->resident + len > c->budget)
		return -EAGAIN;
	s->state = S_LOADING;
	s->err = 0;
	c->resident += len;
	s->unused = !demand;
	sfs_prefetch_submit(fs, i, demand);
	return 0;
}

int64_t sfs_sheet_get(struct sfs *fs, uint32_t i, const uint8_t **raw)
{
	struct sfs_cache *c = fs->cache;
	struct victims v = {.n = 0};
	int64_t ret;
	int waited = 0, counted = 0;

	if (i >= c->n)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	struct slot *s = &c->slots[i];
	for (;;) {
		if (s->state == S_READY) {
			s->pins++;
			s->clock = 1;
			if (s->unused) {
				s->unused = 0;
				SFS_ADD(fs, prefetch_hits, 1);
			}
			if (!counted)
				SFS_ADD(fs, cache_hits, 1);
			*raw = s->raw;
			ret = (int64_t)fs->info->sheets[i].raw_size;
			break;
		}
		if (s->state == S_FAILED) {
			ret = -EIO;
			break;
		}
		if (!counted) {
			counted = 1;
			SFS_ADD(fs, cache_misses, 1);
			if (s->state == S_LOADING && s->unused) {
				/* a prefetch already on its way: a hit for the prefetcher */
				s->unused = 0;
				SFS_ADD(fs, prefetch_hits, 1);
			}
		}
		if (s->state == S_EMPTY) {
			if (waited && s->err) {
				/* the load we waited for failed (I/O error, no memory) */
				ret = s->err;
				break;
			}
			start_load(fs, c, i, 1, &v);
		}
		if (v.n) {
			pthread_mutex_unlock(&c->lock);
			drop_victims(&v);
			pthread_mutex_lock(&c->lock);
			continue;
		}
		if (s->state != S_LOADING)
			continue;
		waited = 1;
		s->waiters = 1;
		sfs_prefetch_submit(fs, i, 2); /* promote it if still queued */
		pthread_cond_wait(&c->cond, &c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	drop_victims(&v);
	return ret;
}

void sfs_sheet_put(struct sfs *fs, uint32_t i)
{
	struct sfs_cache *c = fs->cache;
	pthread_mutex_lock(&c->lock);
	if (i < c->n && c->slots[i].pins)
		c->slots[i].pins--;
	pthread_mutex_unlock(&c->lock);
}

int sfs_sheet_present(struct sfs *fs, uint32_t i)
{
	struct sfs_cache *c = fs->cache;
	if (i >= c->n)
		return 0;
	return __atomic_load_n(&c->slots[i].state, __ATOMIC_RELAXED) != S_EMPTY;
}

void sfs_sheet_prefetch(struct sfs *fs, const uint32_t *list, uint32_t n)
{
	struct sfs_cache *c = fs->cache;
	struct victims v = {.n = 0};
	if (!n)
		return;
	pthread_mutex_lock(&c->lock);
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = list[k];
		if (i >= c->n || c->slots[i].state != S_EMPTY)
			continue;
		if (start_load(fs, c, i, 0, &v) < 0) {
			SFS_ADD(fs, prefetch_skipped, 1);
			break;
		}
		SFS_ADD(fs, prefetch_issued, 1);
		if (v.n == 16)
			break;
	}
	pthread_mutex_unlock(&c->lock);
	drop_victims(&v);
}

void sfs_sheet_prefetch_run(struct sfs *fs, uint32_t from, uint32_t n, uint32_t lo, uint32_t hi)
{
	uint32_t list[256];
	uint32_t k = 0;
	if (n > 256)
		n = 256;
	for (uint32_t i = from; i < hi && k < n; i++)
		if (i >= lo && !sfs_sheet_present(fs, i))
			list[k++] = i;
	sfs_sheet_prefetch(fs, list, k);
}

void sfs_cache_complete(struct sfs *fs, uint32_t i, uint8_t *raw, size_t map_len, int err)
{
	struct sfs_cache *c = fs->cache;
	pthread_mutex_lock(&c->lock);
	struct slot *s = &c->slots[i];
	size_t reserved = map_len_of(fs, i);
	if (s->state != S_LOADING) {
		/* cannot happen (one read per load); never lose track of memory */
		pthread_mutex_unlock(&c->lock);
		if (raw)
			munmap(raw, map_len);
		return;
	}
	if (err == -SPRITE_ECHECKSUM || err == -SPRITE_ECORRUPT) {
		s->state = S_FAILED;
		c->resident -= reserved;
	} else if (err < 0) {
		s->state = S_EMPTY;
		s->err = -EIO;
		c->resident -= reserved;
	} else {
		s->state = S_READY;
		s->raw = raw;
		s->map_len = map_len;
		s->clock = 1;
		c->resident += map_len;
		c->resident -= reserved;
		SFS_ADD(fs, bytes_resident, map_len);
		SFS_ADD(fs, sheets_resident, 1);
	}
	s->waiters = 0;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}
