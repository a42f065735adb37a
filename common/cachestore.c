/*
 * cachestore.c - the policy of spritefs's cache folder (contract in
 * cachestore.h): which store belongs to which source, and when a store there
 * may go.
 *
 * A source folder is named by its canonical path (real path, bind mounts
 * taken back to the mount that shows the most of the folder, read from
 * /proc/self/mountinfo) and fingerprinted by the paths, sizes and mtimes of
 * every file under it, so a store is reused exactly while its source is
 * unchanged. Pruning removes only what is provably spritefs's own and of no
 * further use: temporary files of dead packers, and older stores of the same
 * source that no spritefs mount serves. It lives apart from pack.c because it
 * is about names and files in a folder, not about decoding a data set.
 */
#include "common/cachestore.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "common/folder.h"
#include "common/format.h"
#include "common/safe_open.h"
#include "common/store.h"
#include "common/util.h"

/* ---- fingerprint ------------------------------------------------------- */

/* Folders open on the way down, so that a symbolic link loop is hashed once. */
struct fp_chain {
	dev_t dev[33];
	ino_t ino[33];
};

static int fp_walk(XXH3_state_t *h, const char *dir, size_t skip, int depth, struct fp_chain *ch,
		   char *err)
{
	struct stat ds;
	if (depth > 32 || stat(dir, &ds) < 0)
		return 0;
	for (int k = 0; k < depth; k++)
		if (ch->dev[k] == ds.st_dev && ch->ino[k] == ds.st_ino)
			return 0;
	ch->dev[depth] = ds.st_dev;
	ch->ino[depth] = ds.st_ino;
	struct sprite_dirent **v;
	size_t n;
	int r = sprite_list_dir(dir, &v, &n);
	if (r < 0) {
		char shown[SPRITE_ERR_MAX];
		sprite_escape(dir, shown, sizeof shown);
		if (r == -ENOMEM)
			sprite_seterr(err, "out of memory listing %s", shown);
		else
			sprite_seterr(err, "%s: cannot open: %s", shown, strerror(-r));
		return r;
	}
	for (size_t i = 0; i < n && r == 0; i++) {
		char *p = sprite_path_join(dir, v[i]->name);
		struct stat st;
		if (!p) {
			r = -ENOMEM;
			break;
		}
		if (stat(p, &st) == 0) {
			uint64_t rec[4] = {(uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec,
					   (uint64_t)st.st_mtim.tv_nsec,
					   (uint64_t)(st.st_mode & S_IFMT)};
			XXH3_64bits_update(h, p + skip, strlen(p + skip) + 1);
			XXH3_64bits_update(h, rec, sizeof rec);
			if (S_ISDIR(st.st_mode))
				r = fp_walk(h, p, skip, depth + 1, ch, err);
		}
		free(p);
	}
	sprite_dirents_free(v, n);
	return r;
}

int sprite_pack_fingerprint(const char *source, uint32_t tile_h, uint32_t tile_w, uint32_t tile_c,
			    enum sprite_fit fit, uint32_t background, uint64_t *out, char *err)
{
	struct stat st;
	if (stat(source, &st) < 0) {
		int e = errno;
		sprite_seterr(err, "%s: %s", source, strerror(e));
		return -e;
	}
	if (!S_ISDIR(st.st_mode)) {
		sprite_seterr(err, "%s: not a folder", source);
		return -ENOTDIR;
	}
	XXH3_state_t *h = XXH3_createState();
	if (!h) {
		sprite_seterr(err, "out of memory");
		return -ENOMEM;
	}
	XXH3_64bits_reset(h);
	struct fp_chain ch;
	int r = fp_walk(h, source, strlen(source), 0, &ch, err);
	/*
	 * Then the pack's parameters. A store packed before they were hashed has
	 * another fingerprint and is packed again once (its tile was the first
	 * image's and its fit a stretch; the default now is a crop). "fit2":
	 * stores of "fit1" put alpha on black; now the background is hashed,
	 * as stored (the default) the same however it is spelled.
	 */
	uint32_t bg = (background >> 24) == 1 ? background : SPRITE_BG_STORED;
	uint32_t how[6] = {0x66697432 /* "fit2" */, tile_h, tile_w, tile_c, (uint32_t)fit, bg};
	XXH3_64bits_update(h, how, sizeof how);
	if (r == 0)
		*out = XXH3_64bits_digest(h);
	XXH3_freeState(h);
	return r;
}

/* ---- cache folder ------------------------------------------------------- */

int sprite_cache_remove_stale(const char *dir)
{
	/*
	 * safe_open.c's sweep: a writer in another pid namespace sharing this
	 * folder would look dead, which is why only cache folders, which
	 * spritefs owns, are swept of every store's temporaries.
	 */
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int n = sprite_outfile_sweep_suffix(fd, ".sprites");
	close(fd);
	return n;
}

uint64_t sprite_cache_source_id(const char *path)
{
	return XXH3_64bits(path, strlen(path));
}

/* The rest of path below dir ("" or "/..."), or NULL when path is not dir or under it. */
static const char *path_below(const char *path, const char *dir)
{
	if (!strcmp(dir, "/"))
		return path[0] != '/' ? NULL : path[1] ? path : path + 1;
	size_t n = strlen(dir);
	return !strncmp(path, dir, n) && (path[n] == '/' || !path[n]) ? path + n : NULL;
}

/* dir followed by rest (as path_below gives it) into out; 0, or -ENAMETOOLONG. */
static int path_join(char *out, const char *dir, const char *rest)
{
	int n = snprintf(out, PATH_MAX, "%s%s", strcmp(dir, "/") || !rest[0] ? dir : "", rest);
	return n < PATH_MAX ? 0 : -ENAMETOOLONG;
}

/* The ID of the mount that holds the open file fd (/proc/self/fdinfo), or 0. */
static unsigned long mount_id_of(int fd)
{
	char p[64], line[256];
	unsigned long id = 0;
	snprintf(p, sizeof p, "/proc/self/fdinfo/%d", fd);
	FILE *f = fopen(p, "re");
	while (f && fgets(line, sizeof line, f) && sscanf(line, "mnt_id: %lu", &id) != 1)
		;
	if (f)
		fclose(f);
	return id;
}

/*
 * The real path's folder seen through the mount of its filesystem that shows
 * the most of it (the shortest mounted root; of equals, the first mount
 * point in byte order, whatever order they were mounted in): a bind mount's
 * path is taken back to where its folder shows without it. real stays as it
 * is where /proc does not tell.
 */
static void unbind(const char *real, char *out)
{
	struct sprite_mount *v = malloc(3 * sizeof *v), *held, *best, *m;
	char fsp[PATH_MAX]; /* the folder's path within its filesystem */
	int fd = open(real, O_PATH | O_DIRECTORY | O_CLOEXEC);
	unsigned long id = fd >= 0 ? mount_id_of(fd) : 0;
	FILE *f = id && v ? fopen("/proc/self/mountinfo", "re") : NULL;
	const char *rest;
	int found = 0;
	snprintf(out, PATH_MAX, "%s", real);
	if (fd >= 0)
		close(fd);
	if (!f)
		goto out;
	held = v;
	best = v + 1;
	m = v + 2;
	while (!found && sprite_mountinfo_next(f, held))
		found = held->id == id;
	if (!found || !(rest = path_below(real, held->point)) ||
	    path_join(fsp, held->root, rest) < 0)
		goto out;
	*best = *held;
	rewind(f);
	while (sprite_mountinfo_next(f, m)) {
		size_t a = strlen(m->root), b = strlen(best->root);
		if (!strcmp(m->dev, held->dev) && path_below(fsp, m->root) &&
		    (a < b || (a == b && strcmp(m->point, best->point) < 0)))
			*best = *m;
	}
	/* (fsp is below held's root, so below best's) */
	if (path_join(out, best->point, path_below(fsp, best->root)) < 0)
		snprintf(out, PATH_MAX, "%s", real);
out:
	if (f)
		fclose(f);
	free(v);
}

int sprite_cache_source_path(const char *source, char *out)
{
	char real[PATH_MAX];
	if (!realpath(source, real))
		return -errno;
	unbind(real, out);
	return 0;
}

/*
 * Whether a spritefs mount (fstype fuse.spritefs) serves a store of this file
 * name. The mount's source is the store path as its daemon spelled it (maybe
 * relative to that daemon's folder), so file names are compared: they carry
 * both hashes, so an equal name elsewhere is the same source and content,
 * and keeping it is the safe side. Mounts in other mount namespaces are not
 * seen; their daemons hold the store open, so its removal only frees the
 * space once they unmount.
 */
static int served_by_a_mount(const char *name)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return 0;
	struct sprite_mount m;
	int found = 0;
	while (!found && sprite_mountinfo_next(f, &m)) {
		if (strcmp(m.type, "fuse.spritefs") != 0)
			continue;
		const char *base = strrchr(m.source, '/');
		found = strcmp(base ? base + 1 : m.source, name) == 0;
	}
	fclose(f);
	return found;
}

/* Whether p starts with 16 lower-case hex digits, as "%016" PRIx64 writes them. */
static int is_hex16(const char *p)
{
	for (int i = 0; i < 16; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return 0;
	return 1;
}

#define CACHE_TAIL (1 + 16 + 1 + 16 + 8) /* "-<id>-<fingerprint>.sprites" */

/* Whether name is "<folder>-<id>-<16 hex digits>.sprites" (folder not empty). */
static int cache_name_of(const char *name, uint64_t id)
{
	char tag[24];
	size_t n = strlen(name);
	if (n <= CACHE_TAIL || strcmp(name + n - 8, ".sprites") != 0)
		return 0;
	snprintf(tag, sizeof tag, "-%016llx-", (unsigned long long)id);
	return memcmp(name + n - CACHE_TAIL, tag, 18) == 0 && is_hex16(name + n - CACHE_TAIL + 18);
}

/*
 * Whether name is "<folder>-<16 hex digits>.sprites", the cache store name of
 * earlier versions (folder, then the fingerprint, no source id).
 */
static int old_cache_name_of(const char *name, const char *folder, size_t folder_len)
{
	return strlen(name) == folder_len + 1 + 16 + 8 && !memcmp(name, folder, folder_len) &&
	       name[folder_len] == '-' && is_hex16(name + folder_len + 1) &&
	       !strcmp(name + folder_len + 17, ".sprites");
}

/*
 * Whether the regular file name in dirfd is a sprite store (its magic), and,
 * when folder is given, one whose data set name is folder's as the packer of
 * the old naming wrote it (cut to 63 bytes). The name check keeps the store
 * of another folder whose name happens to read as "<folder>-<hex>"
 * ("data-<id>-<fingerprint>.sprites" is also the old name of a folder called
 * "data-<id>").
 */
static int is_store_of(int dirfd, const char *name, const char *folder, size_t folder_len)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct sprite_header h;
	struct stat st;
	int yes = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		  sprite_pread_full(fd, &h, sizeof h, 0) == 0 &&
		  !memcmp(h.magic, SPRITE_MAGIC, sizeof h.magic);
	close(fd);
	if (yes && folder) {
		size_t nl = folder_len < SPRITE_NAME_MAX - 1 ? folder_len : SPRITE_NAME_MAX - 1;
		yes = !memcmp(h.name, folder, nl) && h.name[nl] == 0;
	}
	return yes;
}

int sprite_cache_prune(const char *dir, const char *keep, uint64_t source_id)
{
	if (!cache_name_of(keep, source_id) || strchr(keep, '/'))
		return -EINVAL;
	size_t folder_len = strlen(keep) - CACHE_TAIL; /* keep starts with the folder's name */
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	struct stat ks;
	if (fstatat(dirfd(d), keep, &ks, 0) < 0) {
		int e = errno;
		closedir(d);
		return -e;
	}
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		int old = old_cache_name_of(de->d_name, keep, folder_len);
		if (!strcmp(de->d_name, keep) || (!old && !cache_name_of(de->d_name, source_id)) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		/* Older only: a store packed meanwhile by another spritefs stays. */
		if (st.st_mtim.tv_sec > ks.st_mtim.tv_sec ||
		    (st.st_mtim.tv_sec == ks.st_mtim.tv_sec &&
		     st.st_mtim.tv_nsec >= ks.st_mtim.tv_nsec))
			continue;
		if (!is_store_of(dirfd(d), de->d_name, old ? keep : NULL, folder_len) ||
		    served_by_a_mount(de->d_name))
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) == 0)
			n++;
	}
	closedir(d);
	return n;
}

void sprite_mountinfo_unescape(char *s)
{
	size_t k = 0;
	for (const char *p = s; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
		    p[3] >= '0' && p[3] <= '7') {
			s[k++] = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		} else {
			s[k++] = *p;
		}
	}
	s[k] = 0;
}

int sprite_mountinfo_next(FILE *f, struct sprite_mount *m)
{
	char line[8192];
	while (fgets(line, sizeof line, f)) {
		/* ID PARENT DEV ROOT POINT OPTIONS [TAGS...] - TYPE SOURCE SUPEROPTIONS */
		const char *sep = strstr(line, " - ");
		if (sscanf(line, "%lu %*s %31s %4095s %4095s", &m->id, m->dev, m->root, m->point) !=
			    4 ||
		    !sep || sscanf(sep + 3, "%63s %4095s", m->type, m->source) != 2)
			continue;
		sprite_mountinfo_unescape(m->root);
		sprite_mountinfo_unescape(m->point);
		sprite_mountinfo_unescape(m->source);
		return 1;
	}
	return 0;
}
