/*
 * sfs.h - private contracts between the parts of the spritefs daemon.
 *
 * The daemon is split by concern: main.c (source resolution, startup and
 * staged shutdown), options.c (the command line, options.h), ll.c (the FUSE low-level operations),
 * tree.c (the virtual tree: inode numbers, names, sizes, listings, dataset.json), read.c (each
 * file's bytes, assembled from cached sheets), readahead.c (what to load ahead of a reader),
 * labels.c (the label table), cache.c (decoded sheets under a memory budget), stream.c (streams of
 * epoch views, admission), prefetch.c (io_uring reads + decode workers), epoch.c (seeded epoch
 * views), batch.c (the layout arithmetic sizes and bytes share), stats.c (counters, stats.json),
 * log.c (the log), watch.c (the store replaced at its path).
 *
 * Everything a request needs is reachable from one struct sfs. Functions
 * return >= 0 or a negative errno, like the rest of the project.
 */
#ifndef SFS_H
#define SFS_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/uio.h>
#include <time.h>

#include "common/format.h"
#include "common/store.h"

/* ---- options ---------------------------------------------------------- */

struct sfs_opts {
	uint64_t cache_bytes;	 /* sheet cache budget */
	uint64_t prealloc_bytes; /* sheet memory faulted in at mount (capped by the store) */
	uint32_t prefetch;	 /* sheets ahead of a reader */
	uint32_t epochs;	 /* epoch views listed per seed */
	uint64_t seed;		 /* seed listed under epochs/ */
	uint32_t window;	 /* views' window: SFS_WINDOW_DATASET, SFS_WINDOW_FULL or sheets */
	uint32_t batch;		 /* samples per epoch-view batch file */
	/*
	 * -o ranks=R[-R2]/N: this node serves data-parallel ranks [rank_lo,
	 * rank_hi] of nranks, which read view files b with b % nranks among
	 * them; prefetch follows only those (nranks 0: every view file).
	 */
	uint32_t rank_lo, rank_hi, nranks;
	uint32_t workers; /* decode threads */
	int direct;	  /* 1: O_DIRECT when the filesystem allows it; 0: buffered */
	int kernel_open;  /* 1: FUSE no_open when the kernel offers it */
	int push;	  /* 1: push sheets loaded ahead into the kernel's page cache */
	int splice;	  /* 1: answer reads through a pipe (vmsplice + splice) where allowed */
	int foreground, debug;
	uint64_t orders_bytes; /* -o orders=: epoch orders and plans (epoch.c) */
	int allow_other;       /* -o allow_other: attributes follow the store (main.c) */
};

#define SFS_WINDOW_DATASET  0u	       /* -o window= not given: the data set's order */
#define SFS_WINDOW_FULL	    UINT32_MAX /* -o window=full */
#define SFS_EPOCH_BITS	    11u	   /* of an epoch view inode's 21-bit field, the rest: seed slot */
#define SFS_MAX_SEEDS	    1024u  /* distinct seeds looked up under epochs/ (10 bits) */
#define SFS_SEEDS_PER_UID   128u   /* seed slots one uid (not root) may hold at once */
#define SFS_MAX_ORDERS	    64u	   /* epoch orders kept at once, whatever the budget */
#define SFS_ORDER_WAIT_S    30	   /* a reader waits this long for an order slot (then EBUSY) */
#define SFS_MAX_EPOCHS	    2047u  /* epochs 0..2046 can be opened (11 bits) */
#define SFS_MAX_BATCH	    65536u /* samples per epoch batch (SPRITE_MAX_SHEET_TILES) */
#define SFS_MAX_SPLIT_COUNT 0xffffffffull /* sample numbers fit 32 bits of an inode */
#define SFS_MAX_READ	    (1u << 20)	  /* largest FUSE read we negotiate */
#define SFS_MAX_BACKGROUND  256u	  /* async requests in flight (ll.c; stream.c waits) */
#define SFS_MAX_THREADS	    (SFS_MAX_BACKGROUND + 32u) /* FUSE threads: as many may wait, stream.c */
#define SFS_STATS_SIZE	    4096u /* stats.json: one page, padded with spaces */

/* ---- stats ------------------------------------------------------------- */

struct sfs_stats {
	/* updated with __atomic_*; read without locks for stats.json */
	uint64_t requests, reads, bytes_served, opens, lookups, eio;
	uint64_t cache_hits, cache_misses, evictions;
	uint64_t sheets_resident, bytes_resident;
	uint64_t bytes_mapped;		      /* sheet memory chunks, used or free */
	uint64_t sheets_pushed, bytes_pushed; /* into the kernel's page cache */
	uint64_t prefetch_issued, prefetch_hits, prefetch_skipped;
	uint64_t room_waits;	    /* stream.c: readers held back */
	uint64_t over_budget_loads; /* Belady's loads over budget */
	uint64_t room_releases;	    /* stream.c: batches let in out of turn (too many wait) */
	uint64_t uring_reads, uring_bytes, buffered_reads;
	uint64_t bytes_spliced, splice_fallbacks; /* ll.c: read replies through a pipe */
	uint64_t inflight;
	uint64_t checksum_failures, read_errors;
	uint64_t decode_ns, sheets_decoded, raw_bytes_decoded;
	uint64_t scratch_bytes;
	uint64_t orders_bytes;			/* epoch orders and plans held (epoch.c) */
	uint64_t order_waits, order_refusals;	/* readers that waited for an order slot; EBUSY */
	uint64_t seeds_recycled, seed_refusals; /* seed slots given to a new seed; ENOSPC */
	double started;
};

#define SFS_ADD(fs, field, n) __atomic_add_fetch(&(fs)->stats.field, (n), __ATOMIC_RELAXED)
#define SFS_SUB(fs, field, n) __atomic_sub_fetch(&(fs)->stats.field, (n), __ATOMIC_RELAXED)
#define SFS_GET(fs, field)    __atomic_load_n(&(fs)->stats.field, __ATOMIC_RELAXED)

/* ---- per split --------------------------------------------------------- */

struct sfs_split {
	uint32_t index;
	char name[SPRITE_SPLIT_NAME_MAX + 1];
	uint64_t count;
	uint32_t first_sheet, nsheets;
	uint64_t raw_bytes;   /* decoded size of all its sheets */
	char npy_images[128]; /* images.npy header, 64-byte multiple */
	uint32_t npy_images_len;
	char npy_labels[128];
	uint32_t npy_labels_len;
	uint32_t epoch_batches; /* batch files per epoch view */
	uint32_t window; /* of the views: 0 full order (sprite_perm), else sheets per window */
	uint32_t dataset_window; /* the data set's order for this split, the same way */
	int digits_batches, digits_samples, digits_epoch_batches, digits_sheets;

	/*
	 * Label table, built on first need: from the store's label table
	 * (version 3: no sheet is read), else by decoding every sheet of the
	 * split.
	 */
	pthread_mutex_t lab_lock;
	int lab_state;		 /* 0 not built, 1 built */
	const uint16_t *labels;	 /* count */
	uint16_t *labels_owned;	 /* labels when built from the sheets; NULL when the store's */
	uint8_t *sheet_bad;	 /* nsheets: 1 when the sheet could not be decoded */
	uint64_t *class_start;	 /* nclasses + 1 offsets into class_samples */
	uint32_t *class_samples; /* sample numbers, grouped by class, ascending */
	/* by-class/'s directories: the classes with samples in the split (tree.c) */
	uint32_t *class_listed; /* class numbers, ascending; set once, after the above */
	uint32_t nclass_listed;
};

struct sfs_cache;
struct sfs_prefetch;
struct sfs_epochs;

struct sfs {
	sprite_store *store;
	const struct sprite_store_info *info;
	char store_path[4096];
	struct sfs_opts o;
	uint64_t tile_bytes;	       /* h*w*c */
	uint32_t label_bytes;	       /* 1 when nclasses <= 256, else 2 (labels.npy dtype) */
	uint64_t max_raw;	       /* largest decoded sheet */
	uint64_t max_stored;	       /* largest stored sheet */
	struct timespec mtime;	       /* of the store file: every file's mtime */
	uint64_t store_dev, store_ino; /* the store file as opened (watch.c) */
	struct sfs_watch *watch;       /* watch.c; NULL when not watched */
	struct sfs_split splits[SPRITE_MAX_SPLITS];
	char **class_dir; /* directory name of each class under by-class/ */
	char *dataset_json;
	size_t dataset_json_len;
	int pnm_c_ok;	      /* by-class images exist (c is 1 or 3; else .pam) */
	int no_open;	      /* the kernel opens files without asking us (FUSE no_open) */
	int splice_write;     /* the kernel takes replies by splice and -o splice=1 (ll.c) */
	int paths_bad_logged; /* a bad path table was logged (once) */
	/* .spritefs/skipped.txt: the store's skipped list, read and checked on first read */
	char *skipped_txt;
	int skipped_bad;	 /* it failed its check: EIO, logged once */
	struct fuse_session *se; /* for notifications; NULL until the session exists */

	pthread_mutex_t seed_lock;
	uint64_t seeds[SFS_MAX_SEEDS];
	uint64_t seed_refs[SFS_MAX_SEEDS]; /* the kernel's lookups of the slot's inodes */
	uint32_t seed_uid[SFS_MAX_SEEDS];  /* who looked the seed up first */
	uint8_t seed_live[SFS_MAX_SEEDS];  /* read without the lock (atomic) */
	uint32_t nseeds;		   /* slots ever used: the live ones are below */
	int seeds_full_logged;
	/* -o allow_other: the store's (or source folder's) owner and read bits; else ours */
	uint32_t owner, group;
	uint32_t file_mode, dir_mode;
	int path_private; /* others may not see store_path: name its file only */

	struct sfs_cache *cache;
	struct sfs_prefetch *pf;
	struct sfs_epochs *ep;
	/*
	 * What epoch.c calls when every order slot is pinned: main.c sets it to
	 * sfs_cache_release_stream, so that the orders, below the cache, never
	 * call up into it (the cache pins orders; the orders ask it to let go).
	 */
	int (*release_order)(struct sfs *fs);
	struct sfs_stats stats;
};

/*
 * Lock order. A thread holding a lock of this list takes only those below
 * it, never one above:
 *
 *   sfs_split.lab_lock  labels.c: the label table; held while its pass over
 *                       the split pins sheets, which may wait for a load
 *   cache lock          cache.c: sheet states, budget, sheet memory
 *   prefetch lock       prefetch.c: read queues and I/O buffers; taken by
 *                       sfs_prefetch_submit() under the cache lock
 *
 * So the prefetcher calls into the cache (sfs_cache_complete,
 * sfs_sheet_mem_get/put) only with its own lock dropped. The cache and the
 * prefetcher are the one circle of calls in fs/ (the cache submits a read,
 * the prefetcher completes it; tests/fs_ties.py keeps it the only one). Leaves, under
 * which no other lock is taken: the prefetcher's decode-queue lock,
 * epoch.c's lock of the epoch orders, and seed_lock. epoch.c's builder
 * threads take only its lock, and build with it dropped.
 */

/* ---- first_pack.c ------------------------------------------------------ */

struct sprite_pack_options;
/*
 * An image folder's cache store: packed at first use with how's tile and
 * fit (in cachedir, else $XDG_CACHE_HOME/spritefs, /var/cache/spritefs for
 * root, ~/.cache/spritefs), or the one packed before from the same contents;
 * its path in out. -1 after saying why on stderr.
 */
int sfs_first_pack(const char *source, const char *cachedir, const struct sprite_pack_options *how,
		   char *out, size_t cap);

/* ---- log.c (the floor: calls no other fs/ file) ------------------------ */

void sfs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sfs_log_to_syslog(int on);
/*
 * -o log=FILE: append every line to FILE too, with its time; 0 or -errno
 * with the reason in err (SPRITE_ERR_MAX bytes): FILE is opened as
 * sprite_open_append() does, never through a link.
 */
int sfs_log_open(const char *path, char *err);
void sfs_log_close(void);

/* ---- stats.c, watch.c -------------------------------------------------- */

/*
 * watch.c: a thread that says once, through sfs_log, when the store file is
 * replaced at its path, removed, or written to in place while mounted (the
 * mount keeps serving what it opened: unmount and mount again). Start after
 * the daemon detaches; a failure to watch is logged, never fatal.
 */
void sfs_watch_start(struct sfs *fs);
void sfs_watch_stop(struct sfs *fs);
/*
 * A malloc'd JSON snapshot of the counters, padded with spaces to
 * SFS_STATS_SIZE bytes and ending in a newline; *len set. NULL on ENOMEM.
 */
char *sfs_stats_json(struct sfs *fs, size_t *len);
/* Resident set size of this process, from /proc/self/statm. */
uint64_t sfs_rss_bytes(void);

/* ---- cache.c ----------------------------------------------------------- */

int sfs_cache_create(struct sfs *fs);
void sfs_cache_destroy(struct sfs *fs);
/*
 * Pin decoded sheet i (a whole batch file) and return a pointer to its bytes,
 * loading it through the prefetcher when absent (the caller sleeps). Returns
 * raw size, or -EIO when the sheet fails its checksums (permanently) or could
 * not be read. Every successful get is paired with sfs_sheet_put().
 */
int64_t sfs_sheet_get(struct sfs *fs, uint32_t i, const uint8_t **raw);
void sfs_sheet_put(struct sfs *fs, uint32_t i);
/*
 * Hint: load sheets list[0..n) ahead of need, within the budget. Never blocks.
 * Called from sfs_readahead() (readahead.c), where what to load ahead is decided.
 * push: a reader goes through the batch files in order, so each sheet is
 * pushed into the kernel's page cache of its batch file once decoded.
 */
void sfs_sheet_prefetch(struct sfs *fs, const uint32_t *list, uint32_t n, int push);
/* Prefetch sheets [from, from+n) clipped to [lo, hi). */
void sfs_sheet_prefetch_run(struct sfs *fs, uint32_t from, uint32_t n, uint32_t lo, uint32_t hi,
			    int push);
/*
 * A reader is reading batch `batch` of the epoch view whose pinned order is
 * handle, of `size` bytes, and has just been served `served` bytes of it (0
 * before a request): follow the position (the cache pins the order while it
 * follows it; sheets used only by batches whose every byte has been served
 * are done) and load the sheets of the batches ahead in their order of first
 * use, within the budget. Never blocks on I/O; at a request's start
 * (served 0) a reader of a later batch may wait, up to 2 s, for the
 * older batches' sheets to be done when the budget cannot hold them and its
 * own (stream.c, admit).
 */
void sfs_cache_stream(struct sfs *fs, void *handle, uint32_t batch, uint64_t served, uint64_t size);
/* Store bytes read for the epoch view read last (stats.json). */
struct sfs_epoch_io {
	int active;
	uint32_t split, batch, batches;
	uint64_t read_bytes; /* stored bytes of the sheets loaded for its split since it began */
	uint64_t total_read; /* stored bytes of every sheet loaded since mounting */
};
void sfs_cache_epoch_io(struct sfs *fs, struct sfs_epoch_io *io);
/*
 * A reader waits for an epoch order slot: the least recently used stream
 * whose order nobody else pins lets go of it. 1 when one did, else 0. Called
 * with no lock held.
 */
int sfs_cache_release_stream(struct sfs *fs);
/*
 * Budget the split's epoch views need to read each stored byte once when
 * `readers` of them read a batch file each at once: the windows of sheets
 * that readers x -o batch samples of the order overlap, one more (a
 * boundary straddled, or the next window loading), and two sheets for
 * requests in flight; for one reader of small batches two windows; the whole
 * split for a full order. Below it, readers of later batches wait for the
 * older ones' sheets to be done (stream.c) rather than evict them.
 */
uint64_t sfs_working_set(struct sfs *fs, const struct sfs_split *sp, uint32_t readers);
/* The most batch files of the split's views read at once so far (at least 1). */
uint32_t sfs_cache_readers(struct sfs *fs, uint32_t split);
/* Nonzero when sheet i is resident or on its way. */
int sfs_sheet_present(struct sfs *fs, uint32_t i);
/*
 * Sheet memory: a block of sfs_sheet_mem_block() bytes for one decoded sheet,
 * or NULL when no memory can be mapped. Decode workers take one per sheet;
 * sfs_cache_complete() keeps it (err 0) or gives it back (err < 0).
 */
uint8_t *sfs_sheet_mem_get(struct sfs *fs);
void sfs_sheet_mem_put(struct sfs *fs, uint8_t *p);
size_t sfs_sheet_mem_block(struct sfs *fs);
/*
 * Called by decode workers when sheet i is done: its bytes in raw, or err < 0.
 * Returns 1 when the worker should push the sheet to the kernel (it is then
 * pinned: it pushes, then calls sfs_sheet_put()).
 */
int sfs_cache_complete(struct sfs *fs, uint32_t i, uint8_t *raw, int err);

/* ---- prefetch.c -------------------------------------------------------- */

int sfs_prefetch_start(struct sfs *fs, char *err);
void sfs_prefetch_stop(struct sfs *fs);
/*
 * Queue a read of sheet i (already marked loading by the cache). urgent 1: a
 * reader waits; 2: only move it to the urgent queue if it still waits ahead.
 */
void sfs_prefetch_submit(struct sfs *fs, uint32_t i, int urgent);
/* Bytes held by the prefetcher (I/O buffers). */
uint64_t sfs_prefetch_mem(struct sfs *fs);
/*
 * 1 while store reads bypass the page cache (O_DIRECT), else 0. It turns 0
 * for good when the filesystem refuses an O_DIRECT read. Any thread.
 */
int sfs_prefetch_direct(struct sfs *fs);
/* I/O buffers registered with the ring (read_fixed); *nbufs: all of them. Any thread. */
uint32_t sfs_prefetch_registered(struct sfs *fs, uint32_t *nbufs);

/* ---- epoch.c ----------------------------------------------------------- */

/*
 * The access plan of an epoch order, immutable once built (sheet numbers are
 * split-local): batch b of the view needs sheets bsh[boff[b] .. boff[b+1]),
 * in the order of their first use; sheet s is used by batches
 * suse[soff[s] .. soff[s+1]), ascending.
 */
struct sfs_plan {
	uint32_t split, first_sheet, nsheets, nbatches;
	const uint32_t *boff, *bsh, *soff, *suse;
};

int sfs_epochs_create(struct sfs *fs);
void sfs_epochs_destroy(struct sfs *fs);
/*
 * Start the threads that build orders (after fuse_daemonize), and join them
 * (after the FUSE loop; destroy does too). Without them a request builds
 * the order it needs itself.
 */
int sfs_epochs_start(struct sfs *fs);
void sfs_epochs_stop(struct sfs *fs);
/*
 * Pin the sample order of (seed slot, epoch, split); *perm points at count
 * sample numbers. Pair with sfs_epoch_put(). Waits while a builder thread
 * builds it (never for another order's build).
 */
int sfs_epoch_get(struct sfs *fs, uint32_t seed_slot, uint32_t epoch, uint32_t split,
		  const uint32_t **perm, void **handle);
void sfs_epoch_put(struct sfs *fs, void *handle);
/* An epoch view's file was looked up: queue its order if a builder is idle. */
void sfs_epoch_prepare(struct sfs *fs, uint32_t seed_slot, uint32_t epoch, uint32_t split);
/* The plan of a pinned order, or NULL when there was no memory for it. */
const struct sfs_plan *sfs_epoch_plan(void *handle);
/* One more pin on a pinned order (for the cache's streams); sfs_epoch_put() drops it. */
void sfs_epoch_pin(struct sfs *fs, void *handle);
/*
 * Whether the cache has followed a reader of a pinned order's (seed, epoch,
 * split) before, even in an earlier build of it; marks it so.
 */
int sfs_epoch_streamed(struct sfs *fs, void *handle);
/* The pins on a pinned order (the cache's streams drop an order only they pin). */
uint32_t sfs_epoch_pins(struct sfs *fs, void *handle);
/*
 * Bytes an order and its plan of split sp take (about 12 a sample), and the
 * order slots -o orders= gives the largest split's (0: not even one, and
 * main.c refuses the store).
 */
uint64_t sfs_order_bytes(const struct sfs *fs, const struct sfs_split *sp);
uint32_t sfs_order_slots(const struct sfs *fs);
/* Seed slot of seed (registering it), or -ENOSPC when the table is full. */
/*
 * Seed slot of seed, registering it for uid (at most SFS_SEEDS_PER_UID per
 * uid but root's; a slot the kernel holds no inode of is recycled), with one
 * lookup counted on it; -ENOSPC when there is no slot.
 */
int sfs_seed_slot(struct sfs *fs, uint64_t seed, uint32_t uid);
/*
 * The kernel's lookups of a slot's inodes (ll.c): ref adds one when the slot
 * is live (and holds *seed, when seed is not NULL), else -ENOENT; unref
 * takes n (FUSE forget). A slot back at 0 may be given to another seed.
 */
int sfs_seed_ref(struct sfs *fs, uint32_t slot, const uint64_t *seed);
void sfs_seed_unref(struct sfs *fs, uint32_t slot, uint64_t n);
/* 1 when slot holds a seed (no lock; tree.c validates inode numbers with it). */
int sfs_seed_live(struct sfs *fs, uint32_t slot);
uint64_t sfs_seed_of(struct sfs *fs, uint32_t slot);

/* ---- tree.c ------------------------------------------------------------ */

enum sfs_kind {
	SFS_K_ROOT = 0,
	SFS_K_DATASET_JSON = 1,
	SFS_K_META_DIR,	  /* /.spritefs */
	SFS_K_STATS_JSON, /* /.spritefs/stats.json */
	SFS_K_SPLIT_DIR,  /* /<split> */
	SFS_K_IMAGES_NPY,
	SFS_K_LABELS_NPY,
	SFS_K_BATCH_DIR,   /* /<split>/batches */
	SFS_K_BATCH,	   /* /<split>/batches/<n>.sprite */
	SFS_K_EPOCHS_DIR,  /* /<split>/epochs */
	SFS_K_SEED_DIR,	   /* /<split>/epochs/<seed> */
	SFS_K_EPOCH_DIR,   /* /<split>/epochs/<seed>/<epoch> */
	SFS_K_EPOCH_BATCH, /* /<split>/epochs/<seed>/<epoch>/<n>.sprite */
	SFS_K_BYCLASS_DIR, /* /<split>/by-class */
	SFS_K_CLASS_DIR,   /* /<split>/by-class/<class> */
	SFS_K_CLASS_IMG,   /* /<split>/by-class/<class>/<n>.pgm|ppm|pam */
	SFS_K_SHEETS_DIR,  /* /<split>/sheets */
	SFS_K_SHEET_IMG,   /* /<split>/sheets/<n>.pgm|ppm|pam */
	SFS_K_PATHS_TXT,   /* /<split>/paths.txt (a store with a path table) */
	SFS_K_SKIPPED_TXT, /* /.spritefs/skipped.txt (a store with a skipped list) */
	SFS_K_COUNT
};

/* Inode = kind:8 | split:3 | a:21 | n:32; the root is FUSE's 1. */
static inline uint64_t sfs_ino(unsigned kind, unsigned split, uint32_t a, uint32_t n)
{
	if (kind == SFS_K_ROOT)
		return 1;
	return ((uint64_t)kind << 56) | ((uint64_t)split << 53) | ((uint64_t)(a & 0x1fffff) << 32) |
	       n;
}
static inline unsigned sfs_ino_kind(uint64_t ino)
{
	return ino == 1 ? SFS_K_ROOT : (unsigned)(ino >> 56);
}
static inline unsigned sfs_ino_split(uint64_t ino)
{
	return (unsigned)(ino >> 53) & 7;
}
static inline uint32_t sfs_ino_a(uint64_t ino)
{
	return (uint32_t)(ino >> 32) & 0x1fffff;
}
static inline uint32_t sfs_ino_n(uint64_t ino)
{
	return (uint32_t)ino;
}
/*
 * Epoch-dir "a" field (21 bits): seed slot (10 bits) and epoch (11 bits).
 * More seeds and fewer epochs than an even split: a long-lived mount serves
 * seed sweeps, and a run longer than the mount's epochs reads samples
 * through images.npy anyway.
 */
static inline uint32_t sfs_ep_a(uint32_t slot, uint32_t epoch)
{
	return (slot << SFS_EPOCH_BITS) | epoch;
}
static inline uint32_t sfs_ep_slot(uint32_t a)
{
	return a >> SFS_EPOCH_BITS;
}
static inline uint32_t sfs_ep_epoch(uint32_t a)
{
	return a & ((1u << SFS_EPOCH_BITS) - 1);
}

struct sfs_attr {
	uint64_t ino;
	int dir;
	uint64_t size;
	uint32_t nlink;
};

int sfs_tree_init(struct sfs *fs, char *err);
void sfs_tree_free(struct sfs *fs);
/* The store as every reader may see it: its path, or its file name (path_private). */
const char *sfs_store_shown(const struct sfs *fs);
/* Validate an inode number; fill its attributes. -ENOENT when it names nothing. */
int sfs_tree_attr(struct sfs *fs, uint64_t ino, struct sfs_attr *a);
/*
 * The entry name of directory parent, for the request of uid (a seed looked
 * up under epochs/ is registered for it: sfs_seed_slot()).
 */
int sfs_tree_lookup(struct sfs *fs, uint64_t parent, const char *name, uint32_t uid,
		    struct sfs_attr *a);
/*
 * Directory entry number i (0 and 1 are "." and "..") of dir; writes its name
 * into name (256 bytes) and its attributes. Returns 1 when it exists, 2 when
 * it is a hole (a seed slot free again: skip it), 0 past the end, <0 on error.
 */
int sfs_tree_dirent(struct sfs *fs, uint64_t dir, uint64_t i, char *name, struct sfs_attr *a);

/* ---- batch.c ----------------------------------------------------------- */

/*
 * Layout facts that sizes (tree.c) and bytes (read.c) must agree on: the grid
 * of tiles of a sheet image of count tiles, and the samples in batch n of an
 * epoch view of split sp.
 */
void sfs_sheet_grid(uint32_t count, uint32_t *rows, uint32_t *cols);
uint64_t sfs_epoch_batch_count(const struct sfs *fs, const struct sfs_split *sp, uint32_t n);

/* ---- read.c ------------------------------------------------------------ */

/*
 * A read reply under construction: iovecs into pinned sheets or into the
 * generated-bytes area, switched to one flat copy when it outgrows them.
 */
#define SFS_RB_IOV  256
#define SFS_RB_PINS 64
struct sfs_rbuf {
	struct iovec iov[SFS_RB_IOV];
	int niov;
	uint32_t pins[SFS_RB_PINS];
	int npins;
	int flat;     /* bytes are in out[] */
	uint8_t *out; /* flat copy, cap >= request */
	size_t out_cap;
	uint8_t *gen; /* generated bytes (headers, labels...) */
	size_t gen_cap, gen_used;
	size_t total;
	int direct;	   /* an O_DIRECT reader: it has no page cache to push sheets to */
	struct sfs *fs;	   /* whose scratch_bytes counts out and gen */
	int pipe_fd[2];	   /* ll.c's splice pipe of this thread, when pipe_state is 1 */
	int pipe_state;	   /* 0 not made yet, 1 made, -1 not possible (spliced replies off) */
	size_t pipe_bytes; /* its size */
};
/* Assemble bytes [off, off+size) of file ino (clipped at its end) into rb. */
int sfs_read_file(struct sfs *fs, uint64_t ino, uint64_t off, size_t size, struct sfs_rbuf *rb);
/* Release the sheets pinned by rb (after the reply was sent). */
void sfs_rbuf_release(struct sfs *fs, struct sfs_rbuf *rb);
/* Per-thread reply buffer sized for at least size bytes. */
struct sfs_rbuf *sfs_rbuf_get(struct sfs *fs, size_t size);

/* ---- labels.c ---------------------------------------------------------- */

/* Build the label table of a split (decoding its sheets) when not yet built. */
int sfs_labels_ensure(struct sfs *fs, struct sfs_split *sp);

/* ---- readahead.c ------------------------------------------------------- */

/*
 * Readahead: where a reader is, and the one function that decides which
 * sheets to load ahead of it (through sfs_sheet_prefetch*, so it never
 * blocks). Readers of batch files, images.npy, by-class images and epoch
 * views, and the label table's pass over a split, call it before they pin
 * the sheet they need; sheet images are not read ahead.
 */
struct sfs_reader {
	unsigned kind;		    /* the file read: SFS_K_BATCH, IMAGES_NPY, CLASS_IMG,
				       EPOCH_BATCH; LABELS_NPY: building the label table */
	const struct sfs_split *sp; /* its split */
	uint32_t sheet;		    /* the sheet the request starts in (not epoch views) */
	uint64_t off, len;	    /* the request: offset in the file, bytes left to serve */
	const uint32_t *perm;	    /* epoch views: the epoch's sample order, */
	void *handle;		    /* its pinned handle (for the cache's stream)... */
	uint32_t n;		    /* ...and the batch file's number */
	int direct;		    /* an O_DIRECT reader: no page cache to push sheets to */
};
void sfs_readahead(struct sfs *fs, const struct sfs_reader *r);

/* ---- ll.c -------------------------------------------------------------- */

struct fuse_lowlevel_ops;
extern const struct fuse_lowlevel_ops sfs_ll_ops;

#endif
