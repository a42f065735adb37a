/*
 * cache_int.h - the cache's structures, shared by cache.c (sheets, memory,
 * eviction) and stream.c (streams of epoch views, read-ahead, admission).
 * Everything here is used under sfs_cache.lock.
 */
#ifndef SFS_CACHE_INT_H
#define SFS_CACHE_INT_H

#include <pthread.h>
#include <time.h>
#include <stdint.h>

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
	uint32_t pos;	   /* oldest batch not yet read to its end: sheets used before are done */
	uint64_t fin;	   /* bit k: batch pos + k has been read to its end */
	uint64_t started;  /* bit k: batch pos + k has had a request */
	uint32_t high;	   /* furthest batch read */
	uint32_t cursor;   /* batches before it have every sheet resident or loading */
	uint32_t horizon;  /* batches before it are admitted (valid while horizon_ok) */
	uint64_t admitted; /* bit k: batch pos + k admitted (its reader is reading it) */
	uint8_t horizon_ok;
	uint64_t used;		 /* LRU tick */
	uint64_t start_bytes;	 /* split's store bytes read when the stream began */
	struct timespec settled; /* CLOCK_REALTIME: readers starting together have all come */
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
 * Start loading sheet i (slot empty); a prefetch only evicts sheets used
 * after `before` (cache.c). Returns 0 or -EAGAIN (no room for a prefetch).
 */
int sfs_cache_load(struct sfs *fs, struct sfs_cache *c, uint32_t i, int demand, int push,
		   uint64_t before);

/* Wake the readers that wait for admission (stream.c), when there are any. */
static inline void sfs_cache_room_changed(struct sfs_cache *c)
{
	if (c->room_waiters)
		pthread_cond_broadcast(&c->cond);
}

#endif
