/*
 * source.h - the interface between data.c and the data sources behind it
 * (private to trainer/; the public side is data.h).
 *
 * Each kind of source is one file that fills a `struct hn_source_ops`, as
 * each backend fills `struct hn_backend_ops`: source_store.c (a store
 * file), source_mount.c (a spritefs mount), source_folder.c (an image
 * folder), source_idx.c (an IDX folder) and source_mem.c (samples in
 * memory: an IDX folder once loaded, and any source after --preload).
 * data.c decides the kind, opens it, checks and limits what it found, and
 * dispatches reads; what is common to every source (its info, counters and
 * description) lives in struct hn_source, what is a source's own in priv.
 */
#ifndef HN_SOURCE_H
#define HN_SOURCE_H

#include "common/util.h"
#include "trainer/data.h"

struct hn_source_ops {
	const char *name;
	/*
	 * Open path: set s->priv (also on failure, for close), s->info (kind,
	 * name, tile shape, classes, full_count, sheet_tiles) and s->describe.
	 */
	int (*open)(hn_source *s, const char *path, const struct hn_source_options *o, char *err);
	/*
	 * Optional: called once s->info.count holds the counts after --limit
	 * and s->tile_bytes is set, before any read (a mount loads its labels).
	 */
	int (*start)(hn_source *s, const struct hn_source_options *o, char *err);
	/*
	 * Read b->n samples b->idx[] of b->split into b->tiles and b->labels;
	 * returns the samples read (see hn_source_read). Thread-safe.
	 */
	int (*read)(hn_source *s, const struct hn_batch *b, char *err);
	/*
	 * Optional: as read, but never from epoch views, whatever the batch
	 * (--preload reads in index order through it).
	 */
	int (*gather)(hn_source *s, const struct hn_batch *b, char *err);
	/* Optional: what hn_source_stalled() says; must not touch the data. */
	void (*stalled)(hn_source *s, char *out, size_t cap);
	void (*close)(hn_source *s); /* frees s->priv */
};

extern const struct hn_source_ops hn_source_store_ops;
extern const struct hn_source_ops hn_source_mount_ops;
extern const struct hn_source_ops hn_source_folder_ops;
extern const struct hn_source_ops hn_source_idx_ops;
extern const struct hn_source_ops hn_source_mem_ops;

struct hn_source {
	const struct hn_source_ops *ops;
	void *priv;
	struct hn_source_info info;
	char describe[512];
	char root[4096]; /* the --data path, for messages */
	size_t tile_bytes;
	uint64_t nskipped; /* image files that did not decode (atomic) */
	/*
	 * --skip-bad-sheets (stores and mounts): per split, one byte per sheet
	 * of info.sheet_tiles samples, set once the sheet is found unreadable
	 * (NULL without the option); the sheets and their samples so far.
	 */
	uint8_t *bad_sheet[2];
	uint64_t nbad_sheets, nbad_samples;
	void (*on_skip)(void *ctx, const char *why);
	void *skip_ctx;
	uint64_t nignored; /* entries of an image folder passed to on_ignore */
	/*
	 * --limit / --test-limit below the split's size: per split, the ids of
	 * the samples the run uses (a seeded sample, ascending; NULL: all,
	 * 0..count). Positions 0..count[k] of the run read through it: data.c
	 * maps them to ids before a source's read, so that a source sees only
	 * ids; ids_resolved once --preload holds the samples by position.
	 */
	uint32_t *pick[2];
	int ids_resolved;
};

/* The samples of a source in memory (source_mem.c): px[k] and lab[k] per split. */
struct hn_mem {
	uint8_t *px[2];
	uint16_t *lab[2];
};

/* ---- helpers of data.c for the sources ---- */

/* Messages: sprite_fail (common/error.h), HN_ERR_MAX == SPRITE_ERR_MAX bytes. */
/* s->info.class_names from n names (NULL names, or a NULL name: its index). */
int hn_source_set_classes(hn_source *s, uint32_t n, const char *const *names);
/*
 * --skip-bad-sheets: whether sample i of split lies on a sheet known to be
 * unreadable; and mark that sheet so (why names it and what is wrong), which
 * tells on_skip once per sheet. Both 0 / nothing without the option.
 */
int hn_source_on_bad_sheet(const hn_source *s, int split, uint64_t i);
void hn_source_mark_bad_sheet(hn_source *s, int split, uint64_t i, const char *why);
/*
 * The id of position i of split k in the samples the run uses (i itself
 * unless --limit picked, and the memory holds them by position after
 * --preload): for a source that reads by position, the memory source.
 */
uint64_t hn_source_id(const hn_source *s, int k, uint64_t i);
/*
 * One past the highest id of split k the run reads (count[k] without a
 * pick): how far a source must load what it holds per sample (a mount's
 * labels).
 */
uint64_t hn_source_span(const hn_source *s, int k);
/*
 * Read positions b->idx[] of the run's samples (hn_source_read's contract):
 * mapped to the source's ids through the --limit pick first. gather: the
 * source's gather where it has one (index order, never a mount's epoch
 * views), for the passes over a whole split (preload.c, chanstats.c).
 */
int hn_source_fetch(hn_source *s, const struct hn_batch *b, int gather, char *err);
/* An IDX folder reads as memory: source_mem.c's read and close. */
int hn_source_mem_read(hn_source *s, const struct hn_batch *b, char *err);
void hn_source_mem_close(hn_source *s);
/* Whether dir holds train-images-idx3-ubyte[.gz] (source_idx.c). */
int hn_source_idx_has(const char *dir);

#endif
