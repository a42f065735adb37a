/*
 * first_pack.c - the daemon's first use of an image folder: pack it into a
 * cache store (once per content fingerprint), or take the store packed
 * before, and prune the folder's older stores. main.c then mounts the store
 * like any other. The cache folder's policy (canonical source path, names,
 * pruning) is common/cachestore.c's; this file says what the daemon tells
 * the user while it packs.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cachestore.h"
#include "common/pack.h"
#include "common/util.h"
#include "fs/sfs.h"

/*
 * Every image a first-use pack skips is named (escaped), as the store's
 * skipped list names it for later; of the entries it ignores (a README beside
 * the class folders), the first 10.
 */
static void report(const char *what, const char *path, const char *why)
{
	char shown[4 * PATH_MAX + 4];
	fprintf(stderr, "spritefs: %s %s: %s\n", what, sprite_escape(path, shown, sizeof shown),
		why);
}

static void on_skip(void *ctx, const char *path, const char *why)
{
	(void)ctx;
	report("skipping", path, why);
}

static void on_ignore(void *ctx, const char *path, const char *why)
{
	unsigned long *n = ctx;
	if ((*n)++ < 10)
		report("ignoring", path, why);
}

/*
 * The folder's other stores in the cache (older contents, or the earlier
 * naming) are of no more use once one of its stores is packed or taken from
 * the cache; those that a mount served at the last pack go at the next use.
 */
static void prune_cache(const char *dir, const char *store, uint64_t id, const char *source)
{
	int r = sprite_cache_prune(dir, strrchr(store, '/') + 1, id);
	if (r > 0)
		fprintf(stderr, "spritefs: removed %d older cache store(s) of %s\n", r, source);
}

/*
 * Pack an image folder into the cache (once per content fingerprint) and
 * put the store's path in out. The name carries a hash of the folder's
 * canonical path (sprite_cache_source_path), so that the folder has one
 * store whatever path it is given by, and a new one replaces its older ones.
 */
int sfs_first_pack(const char *source, const char *cachedir, const struct sprite_pack_options *how,
		   char *out, size_t cap)
{
	char err[SPRITE_ERR_MAX] = "";
	char dir[PATH_MAX];
	uint64_t fp;
	int r = sprite_pack_fingerprint(source, how->tile_h, how->tile_w, how->tile_c, how->fit,
					how->background, &fp, err);
	if (r < 0) {
		fprintf(stderr, "spritefs: %s: %s\n", source, err[0] ? err : sprite_strerror(-r));
		return -1;
	}
	if (cachedir) {
		snprintf(dir, sizeof(dir), "%s", cachedir);
	} else if (getenv("XDG_CACHE_HOME") && getenv("XDG_CACHE_HOME")[0]) {
		snprintf(dir, sizeof(dir), "%s/spritefs", getenv("XDG_CACHE_HOME"));
	} else if (geteuid() == 0 || !getenv("HOME")) {
		snprintf(dir, sizeof(dir), "/var/cache/spritefs");
	} else {
		snprintf(dir, sizeof(dir), "%s/.cache/spritefs", getenv("HOME"));
	}
	r = sprite_mkdir_p(dir);
	if (r < 0) {
		fprintf(stderr, "spritefs: cannot create cache directory %s: %s\n", dir,
			strerror(-r));
		return -1;
	}
	/* One folder, one name, whether reached by a link, "..", or a bind mount. */
	char canon[PATH_MAX], name[SPRITE_NAME_MAX];
	r = sprite_cache_source_path(source, canon);
	if (r < 0) {
		fprintf(stderr, "spritefs: %s: %s\n", source, strerror(-r));
		return -1;
	}
	uint64_t id = sprite_cache_source_id(canon);
	const char *base = strrchr(canon, '/');
	base = base && base[1] ? base + 1 : "dataset";
	size_t nl = sprite_utf8_cut(base, sizeof(name) - 1);
	memcpy(name, base, nl);
	name[nl] = 0;
	/* The file name's folder part is the data set name, cut to fit (NAME_MAX). */
	if (snprintf(out, cap, "%s/%s-%016" PRIx64 "-%016" PRIx64 ".sprites", dir, name, id, fp) >=
	    (int)cap) {
		fprintf(stderr, "spritefs: cache path too long\n");
		return -1;
	}
	sprite_store *s = NULL;
	if (access(out, F_OK) == 0) {
		if (sprite_store_open(out, &s, err) == 0) {
			sprite_store_close(s);
			prune_cache(dir, out, id, source);
			return 0; /* packed before, source unchanged */
		}
		fprintf(stderr, "spritefs: %s: %s; packing again\n", out, err);
	}
	r = sprite_cache_remove_stale(dir);
	if (r > 0)
		fprintf(stderr, "spritefs: removed %d temp file(s) of killed packs from %s\n", r,
			dir);
	fprintf(stderr, "spritefs: packing %s into %s (first use)\n", source, out);
	struct sprite_progress prog;
	unsigned long named = 0;
	/* The data set name too is the folder's, not that of the path it was reached by. */
	struct sprite_pack_options o = {.codec = SPRITE_CODEC_LZ4,
					.tile_h = how->tile_h,
					.tile_w = how->tile_w,
					.tile_c = how->tile_c,
					.fit = how->fit,
					.background = how->background,
					.name = name,
					.progress = &prog,
					.on_skip = on_skip,
					.on_ignore = on_ignore,
					.ctx = &named};
	struct sprite_pack_report rep;
	memset(&rep, 0, sizeof(rep));
	memset(&prog, 0, sizeof(prog));
	/*
	 * Killed while packing, we take the temp file with us and say why we
	 * stop. The handlers go before fuse_set_signal_handlers(), which only
	 * takes signals left at their default.
	 */
	static char note[PATH_MAX + 64];
	snprintf(note, sizeof(note), "spritefs: cannot pack %s: stopped by ", source);
	sprite_writer_signal_note(note);
	sprite_writer_catch_signals();
	r = sprite_pack(source, out, &o, &rep, err);
	sprite_writer_restore_signals();
	if (r < 0) {
		fprintf(stderr, "spritefs: cannot pack %s: %s\n", source,
			err[0] ? err : sprite_strerror(-r));
		return -1;
	}
	fprintf(stderr,
		"spritefs: packed %" PRIu64 " samples (%" PRIu64 " skipped, %" PRIu64
		" ignored%s) in %.1f s\n",
		rep.packed, rep.skipped, rep.ignored,
		named > 10 ? "; the first 10 ignored named" : "", rep.seconds);
	prune_cache(dir, out, id, source);
	return 0;
}
