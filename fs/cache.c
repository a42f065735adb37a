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
 * quarter more). A reader's batch is admitted when the sheets of the batches
 * from the stream's position to it, each counted once, fit in the budget
 * (the horizon); a reader of a later batch waits at its request's start
 * until older batches are done (admit), and the stream reads ahead only
 * within it: several readers at different batches of a view then take turns
 * instead of evicting what the others are about to read, which read a store
 * 7-22x over (1.5-5.5x with 10 readers when at most 24 could wait).
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

#include "fs/sfs.h"

enum { S_EMPTY = 0, S_LOADING, S_READY, S_FAILED };

/*
 * Readers waiting for a sheet to load sleep on the condition of its number
 * modulo SHEET_CONDS, and a load that ends wakes that one only: a reader of
 * whole epoch views has dozens of requests waiting on different sheets, and
 * one condition for all woke every one of them at each sheet (a cold pass:
 * a tenth of the daemon's CPU, docs/ARCHITECTURE.md, "CPU floor").
 */
#define SHEET_CONDS 64u

struct slot {
	uint8_t *raw;
	uint64_t tick; /* last use, for ties between sheets of no known use */
	uint32_t ridx; /* index in the resident list, when ready */
	uint32_t pins;
	uint8_t state;
	uint8_t unused;	 /* prefetched, not yet read */
	uint8_t waiters; /* a reader sleeps on it */
	uint8_t push;	 /* loaded ahead of a batch-file reader: push it to the kernel */
	uint8_t fresh;	 /* loaded for a sleeping reader that has not pinned it yet */
	int err;	 /* last error for S_EMPTY after a transient failure */
	uint32_t mark;	 /* admission's count of distinct sheets (cache.c, horizon) */
};

#define NSTREAMS 4u
#define NO_USE	 UINT64_MAX
#define FINWIN	 64u /* batches after the oldest unfinished one whose reads are tracked */

struct stream {
	void *handle; /* pinned epoch order; NULL: free */
	const struct sfs_plan *plan;
	uint32_t pos;	  /* oldest batch not yet read to its end: sheets used before are done */
	uint64_t fin;	  /* bit k: batch pos + k has been read to its end */
	uint64_t started; /* bit k: batch pos + k has had a request */
	uint32_t high;	  /* furthest batch read */
	uint32_t cursor;  /* batches before it have every sheet resident or loading */
	uint32_t horizon; /* batches before it are admitted (valid while horizon_ok) */
	uint64_t let;	  /* bit k: batch pos + k admitted out of turn (too many waiting) */
	uint8_t horizon_ok;
	uint64_t used;	      /* LRU tick */
	uint64_t start_bytes; /* split's store bytes read when the stream began */
	/* bytes served of batch b (pos <= b < pos + FINWIN), at b % FINWIN */
	uint64_t served[FINWIN];
	uint64_t *done; /* bit b: batch b served to its end in this pass (NULL: no memory) */
};

struct sfs_cache {
	pthread_mutex_t lock;
	pthread_cond_t cond;			/* readers waiting for admission (admit) */
	pthread_cond_t sheet_cond[SHEET_CONDS]; /* sfs_sheet_get's waiters, by sheet */
	struct slot *slots;
	uint32_t n;
	uint64_t budget;
	uint64_t resident; /* blocks of ready sheets + loading reservations */
	uint32_t *res;	   /* ready sheets, in no order */
	uint32_t nres;
	uint32_t loading;
	uint32_t room_waiters;	     /* readers waiting for older batches to free room */
	struct room_waiter *waiting; /* those readers, to let the nearest go first */
	uint32_t mark;		     /* the last slot mark handed out (horizon) */
	uint64_t tick;
	struct stream streams[NSTREAMS];
	uint32_t current;     /* the stream made last, for stats.json */
	uint64_t *split_read; /* store bytes loaded per split */
	/* most batches of one view read at once, per split: its readers (working set) */
	uint32_t readers[SPRITE_MAX_SPLITS];

	/* sheet memory */
	size_t block;	  /* bytes per block */
	size_t chunk_len; /* bytes per chunk, a multiple of 2 MiB */
	uint8_t **chunks; /* chunk bases, for munmap at the end */
	uint32_t nchunks, chunk_cap;
	uint8_t *bump, *bump_end; /* never-used blocks of the newest chunk */
	uint8_t *free_list;	  /* freed blocks, linked through their first bytes */
};

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
	/* batches read to their end (some readers finish after later ones) need it no more */
	for (; lo < pl->soff[s + 1]; lo++) {
		uint32_t d = pl->suse[lo] - st->pos;
		if (d >= FINWIN || !(st->fin >> d & 1))
			return d;
	}
	return NO_USE;
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
static int start_load(struct sfs *fs, struct sfs_cache *c, uint32_t i, int demand, int push,
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

/* Wake the readers that wait for admission, when there are any. Locked. */
static void room_changed(struct sfs_cache *c)
{
	if (c->room_waiters)
		pthread_cond_broadcast(&c->cond);
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
			start_load(fs, c, i, 1, 0, 0);
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
		if (start_load(fs, c, i, 0, push, NO_USE - 2) < 0) {
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

static uint32_t horizon(struct sfs_cache *c, struct stream *st);

/*
 * Load the sheets of the batches ahead of a stream, in the order of first
 * use, while fewer than -o prefetch loads are in flight and the budget has
 * room (or holds a sheet used later than the one to load). Only admitted
 * batches' (horizon): a sheet loaded past it would take the room of one
 * that an older batch needs, and be evicted before its use. Locked.
 */
static void stream_prefetch(struct sfs *fs, struct sfs_cache *c, struct stream *st)
{
	const struct sfs_plan *pl = st->plan;
	uint32_t depth = fs->o.prefetch, walked = 0;
	if (!depth)
		return;
	if (st->cursor < st->pos)
		st->cursor = st->pos;
	uint32_t end = horizon(c, st);
	for (uint32_t b = st->cursor; b < end; b++) {
		for (uint32_t k = pl->boff[b]; k < pl->boff[b + 1]; k++) {
			uint32_t i = pl->first_sheet + pl->bsh[k];
			if (++walked > 65536)
				return;
			if (c->slots[i].state != S_EMPTY)
				continue;
			if (c->loading >= depth)
				return;
			if (start_load(fs, c, i, 0, 0, b - st->pos) < 0) {
				SFS_ADD(fs, prefetch_skipped, 1);
				return;
			}
			SFS_ADD(fs, prefetch_issued, 1);
		}
		st->cursor = b + 1;
	}
}

/*
 * The first batch of a stream that is not admitted: the sheets that the
 * batches from its position on still need (those not yet read to their
 * end), each counted once, outgrow the budget there. Within it, Belady's
 * rule keeps every one of those sheets once loaded (all others are needed
 * later), so each is read once; past it, a load would evict a sheet that an
 * older batch has yet to read. The position's batch is always admitted.
 * Kept until the position or a batch's end moves. Locked.
 */
static uint32_t horizon(struct sfs_cache *c, struct stream *st)
{
	if (st->horizon_ok)
		return st->horizon;
	const struct sfs_plan *pl = st->plan;
	uint64_t cap = c->budget / c->block, count = 0;
	uint32_t mark = ++c->mark, b = st->pos;
	if (!mark) {
		for (uint32_t i = 0; i < c->n; i++)
			c->slots[i].mark = 0;
		mark = c->mark = 1;
	}
	/* the batches let in out of turn hold their sheets first */
	for (uint64_t let = st->let & ~st->fin; let; let &= let - 1) {
		uint32_t x = st->pos + (uint32_t)__builtin_ctzll(let);
		if (x >= pl->nbatches)
			break;
		for (uint32_t k = pl->boff[x]; k < pl->boff[x + 1]; k++) {
			struct slot *s = &c->slots[pl->first_sheet + pl->bsh[k]];
			count += s->mark != mark;
			s->mark = mark;
		}
	}
	for (; b < pl->nbatches && b - st->pos < FINWIN; b++) {
		if (st->fin >> (b - st->pos) & 1)
			continue;
		for (uint32_t k = pl->boff[b]; k < pl->boff[b + 1]; k++) {
			struct slot *s = &c->slots[pl->first_sheet + pl->bsh[k]];
			count += s->mark != mark;
			s->mark = mark;
		}
		if (count > cap && b > st->pos)
			break;
	}
	st->horizon = b;
	st->horizon_ok = 1;
	return b;
}

/*
 * Admission at the start of a request for batch b of a stream: a reader of
 * a batch past the horizon, some of whose sheets are not in memory, waits
 * until older batches are done (the position moves on). Readers of a view
 * that outnumber what the budget holds then take turns instead of evicting
 * each other's sheets. The reader holds no sheet while it waits.
 *
 * Waiting holds a FUSE thread (SFS_MAX_THREADS), and the kernel keeps at most
 * SFS_MAX_BACKGROUND async requests in flight, in the order they came: when
 * every thread or every slot is taken by waiters, the oldest batch's
 * requests queue behind them and nothing moves. So at most ROOM_WAITERS
 * readers wait; when one more would, the nearest of them (the one whose
 * batch is the next to be admitted) goes instead, and its loads follow
 * Belady's rule (or the budget's margin, start_load) like any reader's. A
 * wait is also bounded (ROOM_WAIT_MS) in case the oldest batch's reader has
 * gone. Locked.
 */
#define ROOM_WAITERS (SFS_MAX_BACKGROUND - 1)
#define ROOM_WAIT_MS 2000
struct room_waiter {
	struct room_waiter *next;
	struct stream *st;
	void *handle; /* st's order when it began to wait */
	uint32_t b;
	int go; /* let go by a newer waiter (unlinked and uncounted by it) */
};

/* Batches between a waiter's and its stream's position. Locked. */
static uint32_t waiter_ahead(const struct room_waiter *w)
{
	return w->b > w->st->pos ? w->b - w->st->pos : 0;
}

/* The waiter nearest its stream's position. Locked. */
static struct room_waiter *nearest_waiter(struct sfs_cache *c)
{
	struct room_waiter *best = NULL;
	uint32_t best_d = UINT32_MAX;
	for (struct room_waiter *w = c->waiting; w; w = w->next) {
		uint32_t d = waiter_ahead(w);
		if (!best || d < best_d) {
			best = w;
			best_d = d;
		}
	}
	return best;
}

static void unlink_waiter(struct sfs_cache *c, struct room_waiter *w)
{
	for (struct room_waiter **p = &c->waiting; *p; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			c->room_waiters--;
			return;
		}
}

/*
 * Admit batch b of a stream out of turn (too many waiting, or waited too
 * long): its other requests then need not wait either, and its sheets count
 * first at the next horizon. Locked.
 */
static void let_in(struct sfs *fs, struct sfs_cache *c, struct stream *st, void *handle, uint32_t b)
{
	SFS_ADD(fs, room_releases, 1);
	if (st->handle != handle || b <= st->pos || b - st->pos >= FINWIN)
		return;
	st->let |= 1ull << (b - st->pos);
	st->horizon_ok = 0;
	room_changed(c);
}

/* Every sheet of batch b is loaded or loading: reading it evicts nothing. Locked. */
static int batch_present(const struct sfs_cache *c, const struct stream *st, uint32_t b)
{
	const struct sfs_plan *pl = st->plan;
	for (uint32_t k = pl->boff[b]; k < pl->boff[b + 1]; k++) {
		uint8_t state = c->slots[pl->first_sheet + pl->bsh[k]].state;
		if (state != S_READY && state != S_LOADING)
			return 0;
	}
	return 1;
}

static void admit(struct sfs *fs, struct sfs_cache *c, struct stream *st, void *handle, uint32_t b)
{
	struct timespec until = {0, 0};
	struct room_waiter w = {.st = st, .handle = handle, .b = b};
	while (st->handle == handle && b > st->pos && b >= horizon(c, st) &&
	       !(b - st->pos < FINWIN && st->let >> (b - st->pos) & 1) &&
	       !batch_present(c, st, b)) {
		if (c->room_waiters >= ROOM_WAITERS) {
			struct room_waiter *n = nearest_waiter(c);
			if (!n || waiter_ahead(n) >= b - st->pos) {
				let_in(fs, c, st, handle, b);
				return;
			}
			unlink_waiter(c, n);
			n->go = 1;
			let_in(fs, c, n->st, n->handle, n->b);
			pthread_cond_broadcast(&c->cond); /* n, uncounted: room_changed may not */
		}
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		if (!until.tv_sec && !until.tv_nsec) {
			long ns = now.tv_nsec + ROOM_WAIT_MS % 1000 * 1000000l;
			until.tv_sec = now.tv_sec + ROOM_WAIT_MS / 1000 + ns / 1000000000l;
			until.tv_nsec = ns % 1000000000l;
		} else if (now.tv_sec > until.tv_sec ||
			   (now.tv_sec == until.tv_sec && now.tv_nsec >= until.tv_nsec)) {
			let_in(fs, c, st, handle, b);
			return;
		}
		SFS_ADD(fs, room_waits, 1);
		w.next = c->waiting;
		c->waiting = &w;
		c->room_waiters++;
		pthread_cond_timedwait(&c->cond, &c->lock, &until);
		if (w.go)
			return;
		unlink_waiter(c, &w);
	}
}

void sfs_cache_stream(struct sfs *fs, void *handle, uint32_t batch, uint64_t served, uint64_t size)
{
	struct sfs_cache *c = fs->cache;
	const struct sfs_plan *pl = sfs_epoch_plan(handle);
	void *drop = NULL;
	if (!pl || batch >= pl->nbatches)
		return;
	pthread_mutex_lock(&c->lock);
	struct stream *st = NULL, *lru = NULL;
	for (uint32_t k = 0; k < NSTREAMS && !st; k++) {
		struct stream *q = &c->streams[k];
		if (q->handle == handle)
			st = q;
		else if (!lru || (lru->handle && (!q->handle || q->used < lru->used)))
			lru = q;
	}
	if (!st) {
		st = lru;
		drop = st->handle;
		free(st->done);
		sfs_epoch_pin(fs, handle); /* lock order: cache, then epochs */
		*st = (struct stream){.handle = handle,
				      .plan = pl,
				      .pos = batch,
				      .high = batch,
				      .cursor = batch,
				      .start_bytes = c->split_read[pl->split],
				      .done = calloc((pl->nbatches + 63) / 64, sizeof(uint64_t))};
		c->current = (uint32_t)(st - c->streams);
		if (drop)
			room_changed(c); /* the old order's sheets are needed no more */
	}
	st->used = ++c->tick;
	if (batch < st->pos && st->done && !(st->done[batch / 64] >> (batch % 64) & 1) &&
	    st->pos - batch < FINWIN && st->high - batch < FINWIN) {
		/*
		 * A batch not yet served to its end, just behind: readers on
		 * several threads start their first views together, and the
		 * stream began with whichever request came first. Follow it from
		 * there (the batches after it keep their counts). Those between
		 * it and the old position were passed because they were done,
		 * and stay done: their counts are gone, and without their bits
		 * the position would wait on them for FINWIN batches, keeping
		 * their sheets as if still needed (a reader that had finished
		 * view 1 before view 0 began read the store 11 times over).
		 */
		uint32_t old = st->pos;
		st->fin <<= old - batch;
		st->started <<= old - batch;
		st->let <<= old - batch;
		for (uint32_t b = batch + 1; b < old; b++)
			if (st->done[b / 64] >> (b % 64) & 1)
				st->fin |= 1ull << (b - batch);
		st->pos = st->cursor = batch;
		st->horizon_ok = 0;
	} else if (batch < st->pos) {
		/* read again from further back: a new pass over the same order */
		st->pos = st->high = st->cursor = batch;
		st->horizon_ok = 0;
		st->let = 0;
		st->fin = 0;
		st->started = 0;
		memset(st->served, 0, sizeof(st->served));
		if (st->done)
			memset(st->done, 0, (pl->nbatches + 63) / 64 * sizeof(uint64_t));
	}
	if (batch > st->high)
		st->high = batch;
	/*
	 * A batch is read to its end when as many bytes as it holds have been
	 * served, in whatever order its requests came. A reader that reads some
	 * bytes twice may end it early: that costs reads, never bytes.
	 */
	int ended = 0;
	if (served && batch - st->pos < FINWIN) {
		uint64_t *sv = &st->served[batch % FINWIN];
		*sv += served;
		if (*sv >= size) {
			ended = !(st->fin >> (batch - st->pos) & 1);
			st->fin |= 1ull << (batch - st->pos);
			if (st->done)
				st->done[batch / 64] |= 1ull << (batch % 64);
		}
	}
	/* the oldest batch not read to its end; a reader that skips batches moves it on */
	uint32_t was = st->pos;
	while ((st->fin & 1) || (st->high > st->pos && st->high - st->pos >= FINWIN)) {
		st->served[st->pos % FINWIN] = 0;
		st->fin >>= 1;
		st->started >>= 1;
		st->let >>= 1;
		st->pos++;
	}
	if (ended || st->pos != was) {
		/* a batch done, or the position moved: the horizon may move on */
		st->horizon_ok = 0;
		room_changed(c);
	}
	uint32_t more = 0;
	if (!served && batch - st->pos < FINWIN) {
		/* the batches begun and not read to their end: the view's readers now */
		st->started |= 1ull << (batch - st->pos);
		uint32_t now = (uint32_t)__builtin_popcountll(st->started & ~st->fin);
		if (now > c->readers[pl->split])
			more = c->readers[pl->split] = now;
	}
	if (!served)
		admit(fs, c, st, handle, batch);
	stream_prefetch(fs, c, st);
	pthread_mutex_unlock(&c->lock);
	if (more > 1) {
		const struct sfs_split *sp = &fs->splits[pl->split];
		uint64_t ws = sfs_working_set(fs, sp, more);
		if (ws > c->budget && ws > sfs_working_set(fs, sp, more - 1))
			sfs_log("spritefs: %u readers of split %s's epoch views at once: working set "
				"%.1f MiB, cache %.1f MiB: they take turns; give -o cache= at least "
				"the working set to read each sheet once with no waiting",
				more, sp->name, ws / 1048576.0, c->budget / 1048576.0);
	}
	if (drop)
		sfs_epoch_put(fs, drop);
}

int sfs_cache_release_stream(struct sfs *fs)
{
	struct sfs_cache *c = fs->cache;
	void *drop = NULL;
	pthread_mutex_lock(&c->lock);
	struct stream *lru = NULL;
	for (uint32_t k = 0; k < NSTREAMS; k++) {
		struct stream *q = &c->streams[k];
		/* lock order: cache, then epochs; 1 pin: the stream's own */
		if (q->handle && (!lru || q->used < lru->used) &&
		    sfs_epoch_pins(fs, q->handle) == 1)
			lru = q;
	}
	if (lru) {
		drop = lru->handle;
		free(lru->done);
		*lru = (struct stream){.handle = NULL};
		room_changed(c);
	}
	pthread_mutex_unlock(&c->lock);
	if (drop)
		sfs_epoch_put(fs, drop);
	return drop != NULL;
}

void sfs_cache_epoch_io(struct sfs *fs, struct sfs_epoch_io *io)
{
	struct sfs_cache *c = fs->cache;
	memset(io, 0, sizeof(*io));
	pthread_mutex_lock(&c->lock);
	const struct stream *st = &c->streams[c->current];
	if (st->handle) {
		io->active = 1;
		io->split = st->plan->split;
		io->read_bytes = c->split_read[st->plan->split] - st->start_bytes;
		io->batch = st->high;
		io->batches = st->plan->nbatches;
	}
	for (uint32_t k = 0; k < SPRITE_MAX_SPLITS; k++)
		io->total_read += c->split_read[k];
	pthread_mutex_unlock(&c->lock);
}

uint32_t sfs_cache_readers(struct sfs *fs, uint32_t split)
{
	struct sfs_cache *c = fs->cache;
	uint32_t r = 1;
	if (c && split < SPRITE_MAX_SPLITS) {
		pthread_mutex_lock(&c->lock);
		r = c->readers[split] > 1 ? c->readers[split] : 1;
		pthread_mutex_unlock(&c->lock);
	}
	return r;
}

uint64_t sfs_working_set(struct sfs *fs, const struct sfs_split *sp, uint32_t readers)
{
	uint64_t block = ((fs->max_raw + 4095) & ~4095ull) ? (fs->max_raw + 4095) & ~4095ull : 4096;
	uint64_t sheets = sp->nsheets;
	if (sp->window && sp->window < sp->nsheets) {
		/*
		 * The readers' batches in flight span readers x batch samples of the
		 * order: the windows those overlap (one more where they straddle a
		 * boundary, or to load the next), counted with the fewest samples a
		 * window has (ceil(S / window) windows share the S sheets).
		 */
		uint64_t nwin = (sp->nsheets + sp->window - 1) / sp->window;
		uint64_t per = sp->nsheets / nwin * fs->info->sheet_tiles;
		uint64_t span = (uint64_t)(readers ? readers : 1) * fs->o.batch;
		uint64_t wins = (span + per - 1) / (per ? per : 1) + 1;
		sheets = wins * sp->window;
	}
	if (sheets > sp->nsheets)
		sheets = sp->nsheets;
	return (sheets + 2) * block;
}
