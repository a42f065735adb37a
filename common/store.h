/*
 * store.h - read and write sprite stores (layout in format.h, prose in
 * docs/FORMAT.md).
 *
 * The reader is safe on malicious input: sprite_store_open() validates the
 * header (magic, version, sizes, checksum), the index (checksum, every
 * offset/size/count in range, sheets of a split contiguous and in sample
 * order, no overlap) and the class names before returning, so that callers
 * may then trust the metadata. Sheet contents are verified when decoded.
 *
 * All functions return >= 0 on success or a negative errno (or -SPRITE_E*,
 * error.h). Errors that a user must see are given a precise message through an
 * out-parameter: a char buffer of SPRITE_ERR_MAX bytes that names what is
 * wrong ("bad magic", "version 7 is newer than 1", "index entry 12: offset
 * past end of file", "sheet 3: checksum mismatch"). A bare code is named by
 * sprite_strerror().
 *
 * Library code never prints and never exits.
 */
#ifndef SPRITE_STORE_H
#define SPRITE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "common/format.h"

#include "common/error.h" /* SPRITE_E*, SPRITE_ERR_MAX, sprite_strerror */

typedef struct sprite_store sprite_store;

/* Metadata of an open store; every field has been validated. */
struct sprite_store_info {
	char name[SPRITE_NAME_MAX];
	uint32_t tile_h, tile_w, tile_c;
	uint32_t sheet_tiles;
	uint32_t nclasses;
	uint32_t nsplits;
	uint32_t nsheets;
	/*
	 * The data set's sample order (common/perm.h): sheets per window, 0 for
	 * the full order. From the header (version 2), or for a version-1 store
	 * sprite_order_window()'s default; version is the header's.
	 */
	uint32_t order_window;
	uint32_t version;
	uint32_t fit;	     /* enum sprite_fit: how images of another size became tiles */
	uint32_t background; /* SPRITE_BG_*: what alpha became; 0 not recorded */
	uint64_t file_size;
	const struct sprite_split_entry *splits; /* nsplits entries */
	const struct sprite_sheet_entry *sheets; /* nsheets entries */
	const char *const *class_names;		 /* nclasses strings */
};

/*
 * Open and validate a store. On failure returns -errno or -SPRITE_E* and
 * writes a message naming what is wrong into err (may be NULL).
 * The file descriptor is opened O_RDONLY|O_CLOEXEC.
 */
int sprite_store_open(const char *path, sprite_store **out, char *err);
void sprite_store_close(sprite_store *s); /* NULL is fine */

const struct sprite_store_info *sprite_store_info(const sprite_store *s);
int sprite_store_fd(const sprite_store *s);

/*
 * Version 3 tables (docs/FORMAT.md). The label table is read and checked at
 * open (a bad one fails the open): the labels of split's samples in sample
 * order, each < nclasses, the same as the sheets hold (sprite_sheet_decode
 * checks that too); NULL for a store without one (versions 1 and 2).
 */
const uint16_t *sprite_store_labels(const sprite_store *s, uint32_t split);

/*
 * The path table, each sample's source path relative to the packed folder
 * (IDX samples: "<images file>#<index>"), is read and checked on first use,
 * once, by whichever thread comes first. sprite_store_has_paths() says
 * whether the store has one; sprite_store_load_paths() loads it and returns
 * 0, -ENOENT (none), or the error of a bad table (err names what is wrong,
 * the same every call).
 */
int sprite_store_has_paths(const sprite_store *s);
int sprite_store_load_paths(const sprite_store *s, char *err);

/* Sample's path (may be ""), or NULL: no table, a bad one, out of range. */
const char *sprite_store_sample_path(const sprite_store *s, uint32_t split, uint64_t sample);

/*
 * The paths of split's samples, in sample order, each NUL-terminated, one
 * after another from *strings: returns their bytes, or a negative error as
 * sprite_store_load_paths().
 */
int64_t sprite_store_split_paths(const sprite_store *s, uint32_t split, const char **strings);

/*
 * The bytes sprite_store_split_paths() gives, without loading the table (two
 * of its offsets are read): for a listing's sizes. A table that turns out bad
 * on load fails there.
 */
int64_t sprite_store_split_paths_size(const sprite_store *s, uint32_t split);

/*
 * The samples of each class in split, from the label table, into counts
 * (nclasses entries): 0, -ENOENT for a store without a label table
 * (versions 1 and 2), -ERANGE for a split out of range.
 */
int sprite_store_class_counts(const sprite_store *s, uint32_t split, uint64_t *counts);

/*
 * The skipped-file list (docs/FORMAT.md): how many lines it has (0: none)
 * and its bytes, from the header; sprite_store_read_skipped() reads it into
 * *text (malloc'd, *len bytes, NUL-terminated), checks its checksum and
 * that it is count lines "PATH\tREASON\n"; 0 or a negative error with err.
 * A store without a list gives an empty text.
 */
uint64_t sprite_store_skipped_count(const sprite_store *s);
uint64_t sprite_store_skipped_size(const sprite_store *s);
int sprite_store_read_skipped(const sprite_store *s, char **text, size_t *len, char *err);

/* Split index by name ("train", "test"), or -ENOENT. */
int sprite_store_find_split(const sprite_store *s, const char *name);

/* Size of the decoded sheet i (a whole batch file), or -ERANGE. */
int64_t sprite_store_sheet_raw_size(const sprite_store *s, uint32_t i);

/*
 * Decode one sheet already read from disk: check the stored checksum,
 * decompress into raw (raw_cap >= entry->raw_size) and check that the batch
 * header matches the entry and the store. Safe on any input. The raw
 * checksum is left to sprite_store_verify_sheets(): with the stored bytes
 * checked, the deterministic decode can only give the writer's bytes.
 * Returns raw_size or a negative error (-SPRITE_ECHECKSUM, -SPRITE_ECORRUPT).
 */
int64_t sprite_sheet_decode(const sprite_store *s, uint32_t i, const void *stored,
			    size_t stored_len, void *raw, size_t raw_cap, char *err);

/* pread() sheet i and decode it (convenience for non-io_uring readers). */
int64_t sprite_store_read_sheet(const sprite_store *s, uint32_t i, void *raw, size_t raw_cap,
				char *err);

/* Map (split, sample index within split) to (sheet, slot in sheet). */
int sprite_store_locate(const sprite_store *s, uint32_t split, uint64_t sample, uint32_t *sheet,
			uint32_t *slot);

/*
 * Check every checksum and structural field of every sheet. Returns 0 when
 * all are good, else the error of the first bad sheet (err says which and
 * what); every sheet is read either way (sprite_store_verify_sheets below).
 */
int sprite_store_verify(const sprite_store *s, char *err);

/*
 * Check that every byte the format declares zero is zero: the header's
 * padding, the sheet index entries' reserved bytes, and every byte between
 * and after the sections (each padded to 4096). Nothing here is covered by a
 * checksum but the header's pad, so a store could carry anything there.
 * Returns 0, or -SPRITE_ECORRUPT naming the first bad byte's offset.
 */
int sprite_store_verify_padding(const sprite_store *s, char *err);

/*
 * The same over every sheet, going on past bad ones (spritefs-pack
 * --verify): on_bad (may be NULL) is called, in sheet order, once per bad
 * sheet with its number, its positive error code (errno or SPRITE_E*) and a
 * message ("sheet 3: checksum mismatch"). Returns the number of bad sheets
 * (err then holds the first one's message), or -ENOMEM.
 */
int64_t sprite_store_verify_sheets(const sprite_store *s,
				   void (*on_bad)(void *ctx, uint32_t sheet, int error,
						  const char *why),
				   void *ctx, char *err);

/* ---- writer ---------------------------------------------------------- */

typedef struct sprite_writer sprite_writer;

/*
 * Tiles per sheet when the writer is given 0: as many as fill
 * SPRITE_SHEET_BYTES decoded, at least 1 and at most 1024. Small tiles get
 * 1024 (Fashion-MNIST: 784 KiB sheets); 224x224x3 gets 27 (4 MiB), so that a
 * sheet, the unit of reads, decodes and eviction, stays small beside any
 * cache budget.
 */
#define SPRITE_SHEET_BYTES (4u << 20)
#define SPRITE_ORDER_FULL  UINT32_MAX
#define SPRITE_SKIPPED_MAX (64u << 20) /* bytes of a store's skipped-file list */
uint32_t sprite_default_sheet_tiles(uint32_t tile_h, uint32_t tile_w, uint32_t tile_c);

struct sprite_writer_params {
	const char *name; /* data set name */
	uint32_t tile_h, tile_w, tile_c;
	uint32_t sheet_tiles; /* sprite_default_sheet_tiles() when 0 */
	enum sprite_codec codec;
	uint32_t nclasses;
	const char *const *class_names;
	/* order window in sheets: 0 sprite_order_window()'s default, SPRITE_ORDER_FULL full */
	uint32_t order_window;
	/*
	 * Format version to write: 0 for SPRITE_VERSION. 1 and 2 write an older
	 * store (no tables; version 1 no order window either), for tests of
	 * readers of those.
	 */
	uint32_t version;
	enum sprite_fit fit; /* recorded in the header */
	uint32_t background; /* SPRITE_BG_* recorded in the header; 0 none recorded */
};

/*
 * Create a writer. The store is written to "<path>.tmp.<pid>" and renamed to
 * path only by sprite_writer_finish(); abort or a crash never leaves a
 * half-written store under the final name.
 */
int sprite_writer_open(const char *path, const struct sprite_writer_params *p, sprite_writer **out,
		       char *err);

/*
 * Start a split; splits are written one after another (all of "train", then
 * all of "test"). Samples are added in order with sprite_writer_add().
 */
int sprite_writer_begin_split(sprite_writer *w, const char *split_name);
int sprite_writer_add(sprite_writer *w, const uint8_t *tile, uint16_t label);

/*
 * The same, with the sample's source path (NULL: none) for the path table.
 * The table is written when any sample was given a path; samples without
 * one get "". Control bytes of a path are stored as '?'.
 */
int sprite_writer_add_path(sprite_writer *w, const uint8_t *tile, uint16_t label, const char *path);

/* Flush the last sheet, write index, names and header, fsync, rename. */
int sprite_writer_finish(sprite_writer *w, char *err);

/*
 * Name a source file that was not packed, and why (version 3 stores; a
 * version-2 writer drops the list). Each becomes a line "PATH\tREASON" of
 * the store's skipped list, control bytes as '?'. The list holds at most
 * SPRITE_SKIPPED_MAX bytes; past that, its last line counts the rest.
 * 0, or -ENOMEM / -EINVAL.
 */
int sprite_writer_add_skipped(sprite_writer *w, const char *path, const char *why);
void sprite_writer_abort(sprite_writer *w); /* removes the temp file; NULL is fine */

/*
 * For main, around a pack: make SIGINT, SIGTERM, SIGHUP and SIGPIPE remove
 * the temp file of every open writer, then kill the process with that signal
 * as before (the exit status still says killed by signal). Only signals left
 * at their default disposition are taken; an ignored one stays ignored. The
 * library never calls this itself: handlers belong to main.
 * sprite_writer_restore_signals() puts back what was there before.
 * Returns 0 or -errno (sigaction failed; some handlers may be in place).
 */
int sprite_writer_catch_signals(void);
void sprite_writer_restore_signals(void);

/*
 * For main, with sprite_writer_catch_signals(): the handlers write note, the
 * signal's name and a newline to stderr after removing the temp files
 * ("spritefs: cannot pack DIR: stopped by " gives "... stopped by SIGTERM"),
 * except for SIGPIPE (stderr may be the broken pipe). note is main's text,
 * kept (not copied) until sprite_writer_restore_signals(); NULL: no line.
 */
void sprite_writer_signal_note(const char *note);

#endif
