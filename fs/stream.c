/*
 * stream.c - readers of epoch views as streams: read-ahead in the order of
 * first use, and the admission of readers of later batches.
 *
 * A reader of a view makes a stream (up to NSTREAMS at a time) that
 * remembers how far it has read (its position: the oldest batch not yet read
 * to its end), so the cache (cache.c) evicts by each sheet's next use. A
 * reader's batch is admitted when the sheets of the batches from the
 * stream's position to it, each counted once, fit in the budget (the
 * horizon); a reader of a later batch waits at its request's start until
 * older batches are done (admit), and the stream reads ahead only within it:
 * several readers at different batches of a view then take turns instead of
 * evicting what the others are about to read, which read a store 7-22x over
 * (1.5-5.5x with 10 readers when at most 24 could wait).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/cache_int.h"
#include "fs/sfs.h"

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
		/* a batch already read to its end (read before older ones) needs nothing */
		if (b - st->pos < FINWIN && st->fin >> (b - st->pos) & 1) {
			st->cursor = b + 1;
			continue;
		}
		for (uint32_t k = pl->boff[b]; k < pl->boff[b + 1]; k++) {
			uint32_t i = pl->first_sheet + pl->bsh[k];
			if (++walked > 65536)
				return;
			if (c->slots[i].state != S_EMPTY)
				continue;
			if (c->loading >= depth)
				return;
			if (sfs_cache_load(fs, c, i, 0, 0, b - st->pos) < 0) {
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
 * older batch has yet to read. The position's batch is admitted whenever
 * no later batch is being read; else it waits for those to end when they
 * and it outgrow the budget (readers that start together may begin with
 * later batches than the position's, which moves back to the first).
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
	/*
	 * The batches already admitted (being read) hold their sheets first:
	 * those let in out of turn, and those admitted before the position
	 * moved back to a batch whose first request came later.
	 */
	for (uint64_t in = st->admitted & ~st->fin; in; in &= in - 1) {
		uint32_t x = st->pos + (uint32_t)__builtin_ctzll(in);
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
		if (count > cap && (b > st->pos || (st->admitted & ~st->fin & ~1ull)))
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
	st->admitted |= 1ull << (b - st->pos);
	st->horizon_ok = 0;
	sfs_cache_room_changed(c);
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

/*
 * A stream begins with whichever request comes first, and readers that start
 * together (ranks after their barrier, loaders of one process) send their
 * first batches' requests within milliseconds, in no fixed order: one
 * admitted at a later batch, before the position moved back to the first,
 * loads sheets that the older batches then evict (10 readers at once read a
 * store up to 1.3x over). So for its first SETTLE_MS, the first stream of an
 * order that has not seen batch 0 admits nothing: readers wait until the
 * earliest of them has come (a reader that starts alone at a later batch,
 * as a resumed run does, waits once). A stream made again for an order
 * whose stream was taken by others' does not wait. Locked.
 */
#define SETTLE_MS 200
static void settle(struct sfs_cache *c, struct stream *st, void *handle)
{
	while (st->handle == handle && st->pos > 0) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		if (now.tv_sec > st->settled.tv_sec ||
		    (now.tv_sec == st->settled.tv_sec && now.tv_nsec >= st->settled.tv_nsec))
			return;
		struct timespec until = st->settled;
		pthread_cond_timedwait(&c->cond, &c->lock, &until);
	}
}

static void admit(struct sfs *fs, struct sfs_cache *c, struct stream *st, void *handle, uint32_t b)
{
	struct timespec until = {0, 0};
	struct room_waiter w = {.st = st, .handle = handle, .b = b};
	settle(c, st, handle);
	while (st->handle == handle && b >= st->pos && b >= horizon(c, st) &&
	       !(b - st->pos < FINWIN && st->admitted >> (b - st->pos) & 1) &&
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
		if (!sfs_epoch_streamed(fs, handle)) { /* lock order: cache, then epochs */
			clock_gettime(CLOCK_REALTIME, &st->settled);
			st->settled.tv_nsec += SETTLE_MS * 1000000l;
			if (st->settled.tv_nsec >= 1000000000l) {
				st->settled.tv_sec++;
				st->settled.tv_nsec -= 1000000000l;
			}
		}
		c->current = (uint32_t)(st - c->streams);
		if (drop)
			sfs_cache_room_changed(c); /* the old order's sheets are needed no more */
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
		st->admitted <<= old - batch;
		for (uint32_t b = batch + 1; b < old; b++)
			if (st->done[b / 64] >> (b % 64) & 1)
				st->fin |= 1ull << (b - batch);
		st->pos = st->cursor = batch;
		st->horizon_ok = 0;
		pthread_cond_broadcast(&c->cond); /* readers waiting to settle */
	} else if (batch < st->pos) {
		/* read again from further back: a new pass over the same order */
		st->pos = st->high = st->cursor = batch;
		st->horizon_ok = 0;
		st->admitted = 0;
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
		st->admitted >>= 1;
		st->pos++;
	}
	if (ended || st->pos != was) {
		/* a batch done, or the position moved: the horizon may move on */
		st->horizon_ok = 0;
		sfs_cache_room_changed(c);
	}
	uint32_t more = 0;
	if (!served && batch - st->pos < FINWIN) {
		/* the batches begun and not read to their end: the view's readers now */
		st->started |= 1ull << (batch - st->pos);
		uint32_t now = (uint32_t)__builtin_popcountll(st->started & ~st->fin);
		if (now > c->readers[pl->split])
			more = c->readers[pl->split] = now;
	}
	if (!served) {
		admit(fs, c, st, handle, batch);
		/* its reader now reads it: its sheets are in use (stream_next_use) */
		if (st->handle == handle && batch >= st->pos && batch - st->pos < FINWIN &&
		    !(st->fin >> (batch - st->pos) & 1))
			st->admitted |= 1ull << (batch - st->pos);
	}
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
		sfs_cache_room_changed(c);
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
