/*
 * cache.c - decoded sheets held in memory under a budget.
 *
 * One slot per sheet of the store (states: empty, loading, ready, failed),
 * one mutex and one condition variable.
 *
 * Decoded sheets live in fixed-size blocks (the largest sheet, page-rounded)
 * carved from large anonymous chunks that ask for transparent huge pages. An
 * evicted sheet's block goes on a free list and the next decode reuses it, so
 * a cold pass costs one huge-page fault per 2 MiB instead of a fault, a
 * memory-cgroup charge and a page-table lock per 4 KiB, and a warm cache
 * recycles memory without returning it to the kernel. Blocks are taken only
 * when the budget allows (or a reader must go over it, see below), so the
 * process's resident size follows the budget: at most one chunk's worth of
 * never-used blocks lies beyond it, and those were never touched.
 *
 * Epoch views are read in an order known in advance: each has a plan
 * (epoch.c) listing the sheets every batch needs. A reader of a view makes a
 * stream (up to NSTREAMS at a time) that remembers how far it has read; the
 * cache then loads sheets in the order of their first use, as far ahead as
 * the budget allows, and evicts the sheet whose next use is farthest away
 * (Belady's rule; sheets no stream will use again go first, least recently
 * used first). A prefetch never evicts a sheet needed sooner than the one it
 * loads, so the window, the read-ahead and the readers' pinned sheets share
 * the budget without throwing away what the next batches need. A sheet that
 * was prefetched for another kind of reader (batches/, images.npy) and not yet
 * read is only evicted by a reader that needs room, never by another
 * prefetch. A reader of a view evicts by the same rule, only sheets needed
 * later than its own; where there is none it goes over budget (up to a
 * quarter more). Streams, their read-ahead and the admission of readers of
 * later batches are in stream.c; the structures both files share, in
 * cache_int.h.
 * A reader that needs a sheet while everything is pinned goes over budget
 * for the duration (pins are bounded by the readers in flight); a prefetch
 * never does. A sheet that fails its checksum is marked failed for
 * good: the bytes on disk will not change while we are mounted, and every
 * later reader gets EIO without another read.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fs/cache_int.h"
#include "fs/sfs.h"

/*
 * State changes are made under the lock, and stored atomically: sfs_sheet_present()
 * peeks at a state without the lock.
 */
static void set_state(struct slot *s, uint8_t state)
{
	__atomic_store_n(&s->state, state, __ATOMIC_RELAXED);
}

#define HUGE_PAGE  (2ull << 20)
#define CHUNK_WANT (16ull << 20)

static void prealloc(struct sfs *fs, struct sfs_cache *c);

int sfs_cache_create(struct sfs *fs)
{
	struct sfs_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->n = fs->info->nsheets;
	c->slots = calloc(c->n ? c->n : 1, sizeof(*c->slots));
	c->res = malloc((c->n ? c->n : 1) * sizeof(*c->res));
	c->split_read = calloc(SPRITE_MAX_SPLITS, sizeof(*c->split_read));
	if (!c->slots || !c->res || !c->split_read) {
		free(c->slots);
		free(c->res);
		free(c->split_read);
		free(c);
		return -ENOMEM;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	for (uint32_t k = 0; k < SHEET_CONDS; k++)
		pthread_cond_init(&c->sheet_cond[k], NULL);
	c->budget = fs->o.cache_bytes;
	c->block = ((size_t)fs->max_raw + 4095) & ~(size_t)4095;
	if (c->block < 4096)
		c->block = 4096;
	/* about 16 MiB of blocks per chunk, fewer under a small budget, at least one */
	uint64_t per = CHUNK_WANT / c->block;
	if (per > c->budget / 4 / c->block)
		per = c->budget / 4 / c->block;
	if (per < 1)
		per = 1;
	c->chunk_len = (size_t)((per * c->block + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
	fs->cache = c;
	prealloc(fs, c);
	return 0;
}

/* A new chunk, 2 MiB-aligned so that it can be backed by huge pages. Locked. */
static int add_chunk(struct sfs *fs, struct sfs_cache *c)
{
	if (c->nchunks == c->chunk_cap) {
		uint32_t cap = c->chunk_cap ? 2 * c->chunk_cap : 16;
		uint8_t **n = realloc(c->chunks, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		c->chunks = n;
		c->chunk_cap = cap;
	}
	size_t over = c->chunk_len + HUGE_PAGE;
	uint8_t *p = mmap(NULL, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	uint8_t *base = (uint8_t *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
	if (base > p)
		munmap(p, (size_t)(base - p));
	if (base + c->chunk_len < p + over)
		munmap(base + c->chunk_len, (size_t)(p + over - (base + c->chunk_len)));
	/* advice only: without THP the chunk still works, one fault per page */
	(void)madvise(base, c->chunk_len, MADV_HUGEPAGE);
	c->chunks[c->nchunks++] = base;
	c->bump = base;
	c->bump_end = base + c->chunk_len / c->block * c->block;
	SFS_ADD(fs, bytes_mapped, c->chunk_len);
	return 0;
}

/* Return a block to the free list. Locked. */
static void block_put(struct sfs_cache *c, uint8_t *p)
{
	memcpy(p, &c->free_list, sizeof(c->free_list));
	c->free_list = p;
}

uint8_t *sfs_sheet_mem_get(struct sfs *fs)
{
	struct sfs_cache *c = fs->cache;
	uint8_t *p = NULL;
	pthread_mutex_lock(&c->lock);
	if (c->free_list) {
		p = c->free_list;
		memcpy(&c->free_list, p, sizeof(c->free_list));
	} else if (c->bump < c->bump_end || add_chunk(fs, c) == 0) {
		p = c->bump;
		c->bump += c->block;
	}
	pthread_mutex_unlock(&c->lock);
	return p;
}

void sfs_sheet_mem_put(struct sfs *fs, uint8_t *p)
{
	struct sfs_cache *c = fs->cache;
	if (!p)
		return;
	pthread_mutex_lock(&c->lock);
	block_put(c, p);
	pthread_mutex_unlock(&c->lock);
}

/*
 * Fault in the blocks that the first pass over the store will fill (at most
 * the budget and -o prealloc), so that serving it takes no page faults: on a
 * 2-core machine, faulting and zeroing fresh pages cost a cold pass as much
 * CPU as the checksums. The blocks go on the free list.
 */
static void prealloc(struct sfs *fs, struct sfs_cache *c)
{
	uint64_t want = (uint64_t)c->n * c->block;
	if (want > c->budget)
		want = c->budget;
	if (want > fs->o.prealloc_bytes)
		want = fs->o.prealloc_bytes;
	uint64_t blocks = want / c->block, got = 0;
	while (got < blocks && add_chunk(fs, c) == 0) {
		uint8_t *base = c->chunks[c->nchunks - 1];
#ifdef MADV_POPULATE_WRITE
		if (madvise(base, c->chunk_len, MADV_POPULATE_WRITE) < 0)
#endif
			memset(base, 0, c->chunk_len);
		while (c->bump < c->bump_end) {
			block_put(c, c->bump);
			c->bump += c->block;
			got++;
		}
	}
}

size_t sfs_sheet_mem_block(struct sfs *fs)
{
	return fs->cache->block;
}

void sfs_cache_destroy(struct sfs *fs)
{
	struct sfs_cache *c = fs->cache;
	if (!c)
		return;
	for (uint32_t k = 0; k < c->nchunks; k++)
		munmap(c->chunks[k], c->chunk_len);
	free(c->chunks);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	for (uint32_t k = 0; k < SHEET_CONDS; k++)
		pthread_cond_destroy(&c->sheet_cond[k]);
	/* the streams' pins go with the epoch table, freed whole (main.c frees it first) */
	for (uint32_t k = 0; k < NSTREAMS; k++)
		free(c->streams[k].done);
	free(c->slots);
	free(c->res);
	free(c->split_read);
	free(c);
	fs->cache = NULL;
}

static void res_add(struct sfs_cache *c, uint32_t i)
{
	c->slots[i].ridx = c->nres;
	c->res[c->nres++] = i;
}

static void res_del(struct sfs_cache *c, uint32_t i)
{
	uint32_t k = c->slots[i].ridx, last = c->res[--c->nres];
	c->res[k] = last;
	c->slots[last].ridx = k;
}

/* Batches from a stream's position to sheet i's next use by it, or NO_USE. Locked. */
static uint64_t stream_next_use(const struct stream *st, uint32_t i)
{
	const struct sfs_plan *pl = st->plan;
	if (i < pl->first_sheet || i - pl->first_sheet >= pl->nsheets)
		return NO_USE;
	uint32_t s = i - pl->first_sheet, lo = pl->soff[s], hi = pl->soff[s + 1];
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (pl->suse[mid] < st->pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	/*
	 * Batches read to their end (some readers finish after later ones) need
	 * it no more; a batch admitted and being read uses it now (0), wherever
	 * it lies: readers that start together may begin with a later batch
	 * than the position's, and evicting its sheets under its reader makes
	 * it read them again.
	 */
	uint64_t first = NO_USE;
	for (; lo < pl->soff[s + 1]; lo++) {
		uint32_t d = pl->suse[lo] - st->pos;
		if (d >= FINWIN)
			return first != NO_USE ? first : d;
		if (st->fin >> d & 1)
			continue;
		if (st->admitted >> d & 1)
			return 0;
		if (first == NO_USE)
			first = d;
		if (!(st->admitted >> d))
			break; /* no admitted batch from here on */
	}
	return first;
}

/* Nearest next use of sheet i by any stream, in batches, or NO_USE. Locked. */
static uint64_t next_use(struct sfs_cache *c, uint32_t i)
{
	uint64_t best = NO_USE;
	for (uint32_t k = 0; k < NSTREAMS; k++) {
		if (!c->streams[k].handle)
			continue;
		uint64_t d = stream_next_use(&c->streams[k], i);
		if (d < best)
			best = d;
	}
	return best;
}

/*
 * The sheet to evict: ready, unpinned, and used farthest ahead (no use at
 * all first, the least recently used of those first). A sheet prefetched for
 * a reader outside the streams and not yet read is taken only on demand.
 * Only a sheet whose next use is after `before` may go, unless demand is
 * ANY_USE. Returns its number, or UINT32_MAX. Locked.
 */
#define ANY_USE 2 /* demand: any unpinned sheet may go, whatever its next use */
static uint32_t pick_victim(struct sfs_cache *c, int demand, uint64_t before)
{
	uint32_t best = UINT32_MAX;
	uint64_t best_score = 0, best_tick = 0;
	for (uint32_t k = 0; k < c->nres; k++) {
		uint32_t i = c->res[k];
		struct slot *s = &c->slots[i];
		if (s->pins || s->fresh)
			continue;
		uint64_t score = next_use(c, i);
		if (score == NO_USE && s->unused) {
			if (!demand)
				continue;
			score = NO_USE - 1;
		}
		if (score <= before && demand != ANY_USE)
			continue;
		if (best == UINT32_MAX || score > best_score ||
		    (score == best_score && s->tick < best_tick)) {
			best = i;
			best_score = score;
			best_tick = s->tick;
		}
	}
	return best;
}

/* Evict until need more bytes fit, or nothing more may go. Called locked. */
static void make_room(struct sfs *fs, struct sfs_cache *c, uint64_t need, int demand,
		      uint64_t before)
{
	while (c->resident + need > c->budget) {
		uint32_t i = pick_victim(c, demand, before);
		if (i == UINT32_MAX)
			break;
		struct slot *s = &c->slots[i];
		res_del(c, i);
		block_put(c, s->raw);
		c->resident -= c->block;
		SFS_SUB(fs, bytes_resident, c->block);
		SFS_SUB(fs, sheets_resident, 1);
		SFS_ADD(fs, evictions, 1);
		s->raw = NULL;
		s->unused = 0;
		set_state(s, S_EMPTY);
	}
}

/*
 * Start loading sheet i (locked, slot empty); a prefetch only evicts sheets
 * used after `before`. A demand load of a sheet that a view needs evicts by
 * Belady's rule too, only sheets needed later than it, and else goes over
 * budget (up to OVER_BUDGET): with N readers at N batches, evicting what an
 * older batch is about to read makes its reader load it again, evicting
 * another's (4 readers of 8 MiB views read a store 7x over); readers of later
 * batches wait at their request's start instead (admit). Past that, and for
 * readers outside the views (no next use known), the farthest sheet goes,
 * whatever its use. Returns 0 or -EAGAIN (no room for a prefetch).
 */
#define OVER_BUDGET(c) ((c)->budget + (c)->budget / 4)
int sfs_cache_load(struct sfs *fs, struct sfs_cache *c, uint32_t i, int demand, int push,
		   uint64_t before)
{
	struct slot *s = &c->slots[i];
	if (demand) {
		before = next_use(c, i);
		make_room(fs, c, c->block, demand, before);
		if (before != NO_USE && c->resident + c->block > c->budget)
			SFS_ADD(fs, over_budget_loads, 1);
		if (before == NO_USE || c->resident + c->block > OVER_BUDGET(c))
			make_room(fs, c, c->block, ANY_USE, 0);
	} else {
		make_room(fs, c, c->block, demand, before);
	}
	if (!demand && c->resident + c->block > c->budget)
		return -EAGAIN;
	set_state(s, S_LOADING);
	s->err = 0;
	c->resident += c->block;
	c->loading++;
	s->unused = !demand;
	s->push = (uint8_t)(push && !demand);
	const struct sprite_sheet_entry *e = &fs->info->sheets[i];
	if (e->split < SPRITE_MAX_SPLITS)
		c->split_read[e->split] += e->stored_size;
	sfs_prefetch_submit(fs, i, demand);
	return 0;
}

int64_t sfs_sheet_get(struct sfs *fs, uint32_t i, const uint8_t **raw)
{
	struct sfs_cache *c = fs->cache;
	int64_t ret;
	int waited = 0, counted = 0;

	if (i >= c->n)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	struct slot *s = &c->slots[i];
	for (;;) {
		if (s->state == S_READY) {
			s->pins++;
			s->fresh = 0;
			s->tick = ++c->tick;
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
			sfs_cache_load(fs, c, i, 1, 0, 0);
		}
		if (s->state != S_LOADING)
			continue;
		waited = 1;
		s->waiters = 1;
		sfs_prefetch_submit(fs, i, 2); /* promote it if still queued */
		pthread_cond_wait(&c->sheet_cond[i % SHEET_CONDS], &c->lock);
	}
	pthread_mutex_unlock(&c->lock);
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

void sfs_sheet_prefetch(struct sfs *fs, const uint32_t *list, uint32_t n, int push)
{
	struct sfs_cache *c = fs->cache;
	if (!n)
		return;
	pthread_mutex_lock(&c->lock);
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = list[k];
		if (i >= c->n || c->slots[i].state != S_EMPTY)
			continue;
		if (sfs_cache_load(fs, c, i, 0, push, NO_USE - 2) < 0) {
			SFS_ADD(fs, prefetch_skipped, 1);
			break;
		}
		SFS_ADD(fs, prefetch_issued, 1);
	}
	pthread_mutex_unlock(&c->lock);
}

void sfs_sheet_prefetch_run(struct sfs *fs, uint32_t from, uint32_t n, uint32_t lo, uint32_t hi,
			    int push)
{
	uint32_t list[256];
	uint32_t k = 0;
	if (n > 256)
		n = 256;
	for (uint32_t i = from; i < hi && k < n; i++)
		if (i >= lo && !sfs_sheet_present(fs, i))
			list[k++] = i;
	sfs_sheet_prefetch(fs, list, k, push);
}

int sfs_cache_complete(struct sfs *fs, uint32_t i, uint8_t *raw, int err)
{
	int push = 0;
	struct sfs_cache *c = fs->cache;
	pthread_mutex_lock(&c->lock);
	struct slot *s = &c->slots[i];
	if (s->state != S_LOADING) {
		/* cannot happen (one read per load); never lose track of memory */
		if (raw)
			block_put(c, raw);
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	c->loading--;
	if (err < 0 || !raw) {
		if (raw)
			block_put(c, raw);
		c->resident -= c->block;
		if (err == -SPRITE_ECHECKSUM || err == -SPRITE_ECORRUPT) {
			set_state(s, S_FAILED);
		} else {
			set_state(s, S_EMPTY);
			s->err = -EIO;
		}
	} else {
		set_state(s, S_READY);
		s->raw = raw;
		s->fresh = s->waiters; /* kept for the sleeping reader until it pins it */
		s->tick = ++c->tick;
		res_add(c, i);
		if (s->push && s->unused && !s->waiters && fs->o.push) {
			/* pinned while the worker pushes it; sfs_sheet_put() unpins */
			s->pins++;
			push = 1;
		}
		SFS_ADD(fs, bytes_resident, c->block);
		SFS_ADD(fs, sheets_resident, 1);
	}
	s->push = 0;
	s->waiters = 0;
	pthread_cond_broadcast(&c->sheet_cond[i % SHEET_CONDS]);
	pthread_mutex_unlock(&c->lock);
	return push;
}
