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
#include "common/util.h"

#define SPRITE_FMNIST_DIR "/usr/share/datasets/fashion-mnist"

struct sprite_pack_options {
	uint32_t tile_h, tile_w, tile_c; /* 0: take from the data (first image / IDX dims) */
	uint32_t sheet_tiles;		 /* 0: sprite_default_sheet_tiles() */
	enum sprite_codec codec;
	/* the data set's order: sheets per window; 0 the default, SPRITE_ORDER_FULL full */
	uint32_t order_window;
	int jobs;   /* decode threads; 0: all cores */
	int strict; /* any bad image fails the pack */
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

/*
 * A cheap fingerprint of a source (paths, sizes, mtimes of every file) so a
 * cache store can be reused while the source is unchanged.
 */
int sprite_pack_fingerprint(const char *source, uint64_t *out, char *err);

/*
 * Remove the "<name>.sprites.tmp.<pid>" files in a cache folder whose writer
 * process no longer exists (a pack killed by SIGKILL or a power loss); only
 * names of exactly that form are touched. Returns the number removed, or
 * -errno when dir cannot be read.
 */
int sprite_cache_remove_stale(const char *dir);

/*
 * Cache stores are named "<folder>-<source id>-<fingerprint>.sprites", both
 * 16 hex digits: the fingerprint is sprite_pack_fingerprint()'s, the source
 * id an XXH3 of the source folder's canonical path (sprite_cache_source_id
 * of sprite_cache_source_path), and folder that path's last part.
 *
 * The canonical path is the same whichever way the folder is reached: its
 * real path (symbolic links, "." and ".." resolved), and, for a folder
 * reached through a bind mount, its path under the mount of the same
 * filesystem that shows the most of it (mountinfo: the shortest mounted
 * root, then the first mount point in byte order). A path, rather than the
 * folder's st_dev/st_ino: device numbers of NFS, FUSE, overlay, btrfs
 * subvolumes and device-mapper volumes are handed out at mount time and
 * can change at the next boot, and a changed id would pack the folder again
 * and leave the old store behind for good (it is no longer the same
 * source); a path also survives a copy that keeps the folder where it was
 * (restored from a backup). Returns 0 with out (PATH_MAX bytes) set, or
 * -errno when source has no real path.
 */
int sprite_cache_source_path(const char *source, char *out);
uint64_t sprite_cache_source_id(const char *path);

/*
 * With keep, the cache store of a source just packed or taken from the cache
 * (a file name in dir, "<folder>-<source id>-<fingerprint>.sprites"): remove
 * the other stores in dir of that source that are older than keep and not
 * the store of a spritefs mount (/proc/self/mountinfo). They are the stores
 * named with the same source id, and those of the earlier naming,
 * "<folder>-<fingerprint>.sprites" with the same folder name, whose data
 * set name is that folder's too: that naming carries no source id, and no
 * version that reads the cache now looks such a name up, so they are of no
 * use to any folder of that name. Only regular files that begin as a sprite
 * store are removed; stores of other sources, and names of any other form,
 * are never touched. Returns the number removed, -EINVAL when keep is not
 * such a name, or -errno when dir or keep cannot be read.
 */
int sprite_cache_prune(const char *dir, const char *keep, uint64_t source_id);

#endif
