/*
 * pack.h - turn an image source into a sprite store (used by spritefs-pack,
 * and by spritefs when it is given an image folder or no source at all).
 *
 * SOURCE is one of:
 *   - an ImageFolder tree: SOURCE/train/<class>/<file>, SOURCE/test/<class>/<file>
 *     (other split folder names are kept as splits too), or class folders
 *     directly under SOURCE (they become the split "train");
 *     files are TIFF, PNG or JPEG, found by magic bytes, listed in byte order
 *     of their names (classes sorted the same way) so the store is
 *     deterministic whatever the number of jobs;
 *   - a folder of IDX files (train-images-idx3-ubyte[.gz],
 *     train-labels-idx1-ubyte[.gz], t10k-* for "test"), as Fashion-MNIST ships.
 * Corrupt, truncated or unsupported images are passed to on_skip with the
 * reason and left out; when strict, the first one fails the pack instead
 * (-SPRITE_ECORRUPT, err "stopped at PATH: REASON (--strict)"; not passed to
 * on_skip).
 * Entries of an ImageFolder tree that are not images of a class folder are
 * passed to on_ignore, in listing order, before any image is decoded: files
 * outside the class folders (a README next to them), symbolic link loops
 * (not entered again), and entries that are neither a file nor a folder (a
 * dangling symbolic link, a FIFO, a socket, a device), which strict makes an
 * error like a bad image (err "stopped at PATH: REASON (--strict)").
 * Hidden names (".*") are neither. Paths in err are escaped (sprite_escape);
 * the callbacks get them as they are.
 */
#ifndef SPRITE_PACK_H
#define SPRITE_PACK_H

#include <stdint.h>

#include "common/format.h"
#include "common/progress.h"
#include "common/util.h"

#define SPRITE_FMNIST_DIR "/usr/share/datasets/fashion-mnist"

struct sprite_pack_options {
	/*
	 * 0: take from the data (IDX dims; an image folder's one size, which
	 * fails with both sizes named when its images differ in size and no
	 * tile_h/tile_w is given)
	 */
	uint32_t tile_h, tile_w, tile_c;
	enum sprite_fit fit;  /* how an image of another size becomes a tile */
	uint32_t background;  /* image folders: what alpha becomes, SPRITE_BG_*; 0 as stored */
	uint32_t sheet_tiles; /* 0: sprite_default_sheet_tiles() */
	enum sprite_codec codec;
	/* the data set's order: sheets per window; 0 the default, SPRITE_ORDER_FULL full */
	uint32_t order_window;
	uint32_t store_version; /* 0: SPRITE_VERSION; 2: no label or path table */
	int jobs;		/* decode threads; 0: all cores */
	int strict;		/* any bad image fails the pack */
	/*
	 * Data set name, at most SPRITE_NAME_MAX - 1 bytes (longer: -ENAMETOOLONG);
	 * NULL: the source folder's base name, cut to fit between UTF-8 characters.
	 */
	const char *name;
	struct sprite_progress *progress; /* drawn from the calling thread when not NULL */
	/* Called (from the calling thread) once per skipped image. */
	void (*on_skip)(void *ctx, const char *path, const char *why);
	/* Called (from the calling thread) once per ignored entry. */
	void (*on_ignore)(void *ctx, const char *path, const char *why);
	void *ctx;
};

struct sprite_pack_report {
	uint64_t found;	  /* image files seen */
	uint64_t packed;  /* samples written */
	uint64_t skipped; /* bad images left out */
	uint64_t ignored; /* entries passed to on_ignore */
	uint64_t split_count[SPRITE_MAX_SPLITS];
	double seconds;		      /* wall time of decode + write */
	uint64_t bytes_in, bytes_out; /* source bytes read, store bytes written */
};

/*
 * Pack source into store (written atomically). -errno / -SPRITE_E* with err
 * set. A store path that is a folder (-EISDIR), or whose folder is missing or
 * not writable, fails before the source is read.
 */
int sprite_pack(const char *source, const char *store, const struct sprite_pack_options *o,
		struct sprite_pack_report *rep, char *err);

#endif
