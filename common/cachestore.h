/*
 * cachestore.h - spritefs's cache folder: how a cache store is named after
 * its source (canonical path and fingerprint), and which files in the folder
 * may be removed (temporary files of dead packers, superseded stores).
 *
 * spritefs packs an image folder it is given into a store in its cache folder
 * (sprite_pack, pack.h) and reuses that store while the source is unchanged;
 * these functions hold that policy so the daemon and the tests share it.
 * The reader of /proc/self/mountinfo that finds the mount holding a folder
 * is here too (the daemon also uses it to find mounts of spritefs).
 * None of them prints; each returns >= 0 or -errno.
 */
#ifndef SPRITE_CACHESTORE_H
#define SPRITE_CACHESTORE_H

#include <stdint.h>
#include <stdio.h>

#include "common/format.h"

/*
 * A cheap fingerprint of a source (paths, sizes, mtimes of every file) and
 * of what the pack makes of it (the tile shape asked for, 0 for the images'
 * own, the fit mode and the background, SPRITE_BG_*, 0 as stored), so a cache
 * store can be reused while the source is unchanged, and a folder packed two
 * ways has two stores.
 */
int sprite_pack_fingerprint(const char *source, uint32_t tile_h, uint32_t tile_w, uint32_t tile_c,
			    enum sprite_fit fit, uint32_t background, uint64_t *out, char *err);

/*
 * Remove the "<name>.sprites.tmp.<pid>" files in a cache folder whose writer
 * process no longer exists (a pack killed by SIGKILL or a power loss); only
 * names of exactly that form (or safe_open.c's "<pid>.<16 hex>" one), and
 * only regular files of our own user, are touched: in a shared folder
 * another user's file or link stays. Returns the number removed, or
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

/* ---- /proc/self/mountinfo, for finding the mount that holds a folder ---- */

/*
 * Undo /proc/self/mountinfo's escapes in place: space, tab, newline and
 * backslash are written there as \ooo (three octal digits).
 */
void sprite_mountinfo_unescape(char *s);

/* One line of /proc/self/mountinfo, the fields spritefs uses, unescaped. */
struct sprite_mount {
	unsigned long id;  /* the mount's ID (as /proc/PID/fdinfo's mnt_id names it) */
	char dev[32];	   /* "major:minor" */
	char root[4096];   /* the folder of its filesystem that is mounted ("/": all) */
	char point[4096];  /* where it is mounted */
	char type[64];	   /* "ext4", "fuse.spritefs" */
	char source[4096]; /* what is mounted: a device, or spritefs's store path */
};

/*
 * The next entry of a mountinfo file f (fopen'd by the caller): 1, or 0 at
 * its end. Lines that do not parse are passed over.
 */
int sprite_mountinfo_next(FILE *f, struct sprite_mount *m);

#endif
