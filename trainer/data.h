/*
 * data.h - where hntrain's samples come from (private to trainer/).
 *
 * Five kinds of source sit behind one small interface (each a file of its
 * own behind struct hn_source_ops, source.h), so that the loader threads,
 * the sample order and therefore the trained weights do not depend on the
 * medium:
 *
 *   store   a sprite store file (*.sprites): sheets are read with pread and
 *           decoded (lz4 + checksums) by the loader threads themselves, then
 *           kept in a sheet cache (all sheets, or a few windows with --window);
 *   mount   a spritefs mount, read through plain POSIX calls only: epoch
 *           view batch files when the mount offers them for this (seed,
 *           epoch, batch size), else <split>/images.npy + labels.npy gathered
 *           with pread in permutation order;
 *   images  an ImageFolder tree of TIFF/PNG/JPEG files (ROOT/<split>/<class>/
 *           or class folders directly under ROOT, which form "train"),
 *           listed by common/folder.c exactly as spritefs-pack lists it,
 *           decoded and fitted to the tile on the loader threads (a file
 *           that does not decode is reported and left out);
 *   idx     a folder of IDX files (train-*, t10k-* for "test"), loaded whole;
 *   memory  what an IDX folder is once loaded, and any source after
 *           hn_source_preload().
 *
 * Sample i of a split is the same picture in every source (the store keeps
 * the pack order, the mount serves the store), so reading samples in the
 * order sprite_perm(seed, epoch, n) gives bit-identical training anywhere.
 *
 * All functions return >= 0 or a negative errno and write a message for the
 * user into err (HN_ERR_MAX bytes). hn_source_read() is thread-safe.
 */
#ifndef HN_DATA_H
#define HN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/backend.h"

#define HN_WINDOW_DATASET UINT32_MAX /* no --window: the data set's order */
#define HN_SPLIT_TRAIN	  0
#define HN_SPLIT_TEST	  1
#define HN_MAX_CLASSES	  65535
#define HN_NO_VIEW	  UINT64_MAX

struct hn_source_info {
	char kind[16]; /* "store", "mount", "images", "idx" (+ "+preload" when --preload) */
	char name[64]; /* data set name */
	uint32_t h, w, c;
	uint32_t nclasses;
	char **class_names;	/* nclasses strings */
	uint64_t count[2];	/* samples in train / test after --limit (test 0: none) */
	uint64_t full_count[2]; /* samples before --limit */
	uint32_t sheet_tiles; /* samples per sheet (a folder's or IDX file's: the packer's default)
			       */
	/*
	 * The data set's order (common/perm.h): sheets per window, 0 the full
	 * shuffle. A store's or mount's is recorded; a folder's or IDX file's is
	 * sprite_order_window()'s default, as spritefs-pack would record it.
	 */
	uint32_t order_window;
	int has_test;
};

struct hn_source_options {
	const char *train_split; /* "train" */
	const char *test_split;	 /* "test"; NULL or "" or "none": no evaluation */
	/*
	 * --limit, --test-limit: N samples of the split, drawn without
	 * replacement by seed (the same ids on every medium); 0 = all. The run
	 * then reads positions 0..N of them (hn_source_ids).
	 */
	uint64_t limit;
	uint64_t test_limit;
	uint32_t tile_h, tile_w, tile_c; /* images: fit to this tile; 0 = from the first image */
	uint32_t fit;			 /* images: enum sprite_fit, as spritefs-pack --fit */
	uint32_t background;		 /* images: what alpha becomes, SPRITE_BG_* (0 as stored) */
	uint32_t window; /* --window: sheets per window, 0 the full shuffle, HN_WINDOW_DATASET not
			    given */
	uint64_t seed;	 /* for a mount's epoch views */
	uint32_t batch;	 /* for a mount's epoch views */
	uint64_t cache_bytes; /* store: sheet cache budget (0 = whole split) */
	/*
	 * Image folders: a file that does not decode (or fit the tile) is
	 * skipped from then on and passed to on_skip (the message names the
	 * file; called once per file, from a loader thread), or with strict
	 * makes the read fail.
	 */
	int strict;
	/*
	 * Stores and mounts (--skip-bad-sheets): a sheet that cannot be read
	 * (its checksum fails, the mount answers EIO) has its samples skipped
	 * from then on, passed to on_skip once per sheet, instead of failing
	 * the read.
	 */
	int skip_bad_sheets;
	void (*on_skip)(void *ctx, const char *why);
	/*
	 * Image folders: each entry of the tree that is not an image of a
	 * class folder (read) is passed to on_ignore with what it is, once,
	 * from hn_source_open (ctx skip_ctx): files outside the class folders,
	 * symbolic link loops (not entered again), and entries that are neither
	 * a file nor a folder (a dangling link, a FIFO), which with strict fail
	 * the open instead. Hidden names (".*") are neither. May be NULL.
	 */
	void (*on_ignore)(void *ctx, const char *path, const char *why);
	void *skip_ctx;
	/*
	 * Something the user should know about how the data is read, said once
	 * (a mount's epoch views that cannot be used, so the training split is
	 * gathered): from hn_source_open or a loader thread. May be NULL.
	 */
	void (*on_note)(void *ctx, const char *note);
	void *note_ctx;
};

typedef struct hn_source hn_source;

enum hn_source_kind {
	HN_SOURCE_STORE,
	HN_SOURCE_MOUNT,
	HN_SOURCE_IDX,
	HN_SOURCE_IMAGES,
	HN_SOURCE_IN_MOUNT, /* a folder inside a spritefs mount: no kind reads it */
};

/*
 * The kind of source path is, decided as hn_source_open() decides it, from
 * the file type and the names in the folder only (no data is read), so
 * that options can be checked against it first: a regular file is a store,
 * a folder with dataset.json a mount, one with train-images-idx3-ubyte[.gz]
 * an IDX folder, any other an image folder; except a folder below a
 * spritefs mount's root other than <split>/by-class (a split folder, its
 * batches/ ...), HN_SOURCE_IN_MOUNT with err naming the mount's root, which
 * hn_source_open refuses. -errno with err when path cannot be looked at or
 * is neither a file nor a folder.
 */
int hn_source_kind(const char *path, char *err);

/*
 * The evaluation split of path when --test-split is not given: "val",
 * "valid", "validation" or "test", the first present in that order, else
 * the one split other than train_split; "" (no evaluation) when there is no
 * other split. Two or more others and none of those names: -EINVAL with err
 * listing them. Reads only names (a store's header, a folder's listing);
 * data that cannot be listed gives "test", and opening it says why.
 */
int hn_source_pick_test_split(const char *path, const char *train_split, char *out, size_t cap,
			      char *err);

/* Whether a --test-split value means no evaluation (NULL, "", "none"). */
int hn_source_no_test(const char *split);
/* Detect the kind of path and open it. */
int hn_source_open(const char *path, const struct hn_source_options *o, hn_source **out, char *err);
void hn_source_close(hn_source *s); /* NULL is fine */
const struct hn_source_info *hn_source_info(const hn_source *s);

/*
 * A batch of samples: what hn_source_read() fills and the loader delivers.
 * idx lists the sample indices of the split; for the training split they are
 * batch number `index` of epoch `epoch` in permutation order, which lets a
 * mount serve the batch from an epoch view file (the ids in it are checked
 * against idx).
 */
struct hn_batch {
	uint64_t epoch;
	int split;	/* HN_SPLIT_TRAIN or HN_SPLIT_TEST */
	uint64_t index; /* batch number within the split's pass */
	/*
	 * Training: the epoch view file that holds exactly these samples
	 * (index, or with N ranks index * N + rank when the batch is a whole
	 * view file), HN_NO_VIEW when none does (a rank's share of a short
	 * last global batch): a mount then reads it from the parts of the views
	 * it spans (order_pos).
	 */
	uint64_t view;
	/*
	 * Training batches of the loader: idx holds the samples at positions
	 * [order_pos, order_pos + n) of the epoch's order, and in_order is 1
	 * (a mount reads a share that no view holds whole from the views it
	 * spans). 0 elsewhere: idx is any list of samples.
	 */
	uint64_t order_pos;
	int in_order;
	int n;		  /* samples */
	uint32_t *idx;	  /* n sample indices */
	uint8_t *tiles;	  /* n * h*w*c */
	uint16_t *labels; /* n */
	double augment_s; /* loader thread CPU time spent on --augment (the loader sets it) */
	/*
	 * Loader thread CPU time on this batch, the read (system time of the
	 * reads included), decode and --augment together (the loader sets it).
	 */
	double loader_cpu_s;
};

/*
 * Read the b->n samples b->idx[] of b->split into b->tiles and b->labels.
 * Returns the samples read: n, or fewer (0 too) from an image folder whose
 * files did not all decode or a store or mount with unreadable sheets under
 * --skip-bad-sheets, the good ones packed first in idx order (b->n is left
 * for the caller to update). Thread-safe.
 */
int hn_source_read(hn_source *s, const struct hn_batch *b, char *err);
/*
 * Who has not answered when a read hangs, for the loader's data watchdog:
 * "the spritefs daemon serving MNT (pid N)" and what to do, or the source's
 * path. Never blocks (a mount is not read). Thread-safe.
 */
void hn_source_stalled(hn_source *s, char *out, size_t cap);

/* Image files skipped so far because they did not decode (0 for other sources). */
uint64_t hn_source_skipped(const hn_source *s);
/* Unreadable sheets skipped so far (--skip-bad-sheets), and the samples they held. */
uint64_t hn_source_bad_sheets(const hn_source *s, uint64_t *samples);
/* Entries of an image folder passed to on_ignore (0 for other sources). */
uint64_t hn_source_ignored(const hn_source *s);

/*
 * The ids (sample numbers of the split) of the run's positions 0..count[k]
 * after --limit or --test-limit, ascending; NULL when the run uses the
 * whole split (position i is sample i).
 */
const uint32_t *hn_source_ids(const hn_source *s, int split);

/* A line describing how the source is read ("mount /mnt/x: epoch views (batch 64)"). */
const char *hn_source_describe(const hn_source *s);

/* A folder's or IDX file's sheet_tiles and order_window: what spritefs-pack records. */
void hn_source_default_order(hn_source *s);
/* The training order of one epoch: full shuffle or windowed. 0, or -ENOMEM with err set. */
int hn_source_perm(const hn_source *s, uint64_t seed, uint64_t epoch, uint32_t window,
		   uint32_t *perm, char *err);

#endif
