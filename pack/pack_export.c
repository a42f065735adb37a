/*
 * pack_export.c - spritefs-pack --export: write a store back out as an image
 * folder, DIR/<split>/<class>/<index>.<ext>. A tool for people and
 * benchmarks (it writes the many-small-files tree that PyTorch reads), not
 * something the library needs. Sheets are decoded on --jobs threads; indexes
 * are zero-padded so that packing the exported tree again keeps the sample
 * order within a class. DIR must be new or empty unless --force (a packer
 * would take leftovers for part of the set). A sheet that does not decode is
 * named and its samples left out; the rest is written and the exit status is
 * 1 (--strict stops at the first).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tiffio.h>

#include "common/batch.h"
#include "common/image.h"
#include "common/safe_open.h"
#include "common/store.h"
#include "common/util.h"
#include "pack/pack_export.h"

#define PROG "spritefs-pack"

enum fmt { FMT_TIFF, FMT_TIFF_LZW, FMT_PNG, FMT_PNM };

struct export
{
	const sprite_store *s;
	const struct sprite_store_info *in;
	const char *path, *dir;
	enum fmt fmt;
	int split; /* -1: all */
	uint64_t limit;
	char **class_dir; /* sanitized class folder names */
	int width[SPRITE_MAX_SPLITS];
	int split_fd[SPRITE_MAX_SPLITS]; /* DIR/<split>, opened without following a link */
	pthread_mutex_t mu;
	uint32_t next_sheet;
	uint64_t written;
	uint64_t left_out;   /* samples of bad sheets not written */
	uint32_t bad_sheets; /* sheets that did not decode */
	int strict;	     /* stop at the first bad sheet */
	int failed;
	char err[SPRITE_ERR_MAX];
};

/* A class name as a folder name: no '/', not hidden, not empty. */
static char *sanitize(const char *name)
{
	size_t n = strlen(name);
	char *d = malloc(n + 2);
	if (!d)
		return NULL;
	size_t k = 0;
	if (n == 0 || name[0] == '.')
		d[k++] = '_';
	for (size_t i = 0; i < n; i++)
		d[k++] = name[i] == '/' ? '_' : name[i];
	d[k] = 0;
	return d;
}

/* One tile into fd, an empty file that path names (for messages). */
static int write_tile_fd(struct export *E, int fd, const char *path, const uint8_t *px, char *err)
{
	uint32_t h = E->in->tile_h, w = E->in->tile_w, c = E->in->tile_c;
	switch (E->fmt) {
	case FMT_TIFF:
		return sprite_tiff_write_fd(fd, path, px, h, w, c, COMPRESSION_NONE, err);
	case FMT_TIFF_LZW:
		return sprite_tiff_write_fd(fd, path, px, h, w, c, COMPRESSION_LZW, err);
	case FMT_PNG:
		return sprite_png_write_fd(fd, path, px, h, w, c, err);
	case FMT_PNM: {
		char hdr[SPRITE_PNM_HEADER_MAX];
		int hl = sprite_pnm_header(hdr, sizeof hdr, h, w, c);
		if (hl < 0) {
			snprintf(err, SPRITE_ERR_MAX, "%ux%ux%u tiles have no PNM form", h, w, c);
			return hl;
		}
		int r = sprite_write_full(fd, hdr, (size_t)hl);
		if (r == 0)
			r = sprite_write_full(fd, px, (size_t)h * w * c);
		if (r < 0)
			snprintf(err, SPRITE_ERR_MAX, "cannot write %.180s: %s", path,
				 strerror(-r));
		return r;
	}
	}
	return -EINVAL;
}

/*
 * Tile px as name in the class folder cfd (path dir): a new temporary, never
 * through a link, renamed over name (safe_open.h), so that --force into a
 * tree someone else can write replaces a planted link instead of writing
 * through it. Not fsynced: an export is many small files, and is redone.
 */
static int write_tile(struct export *E, int cfd, const char *dir, const char *name,
		      const uint8_t *px, char *err)
{
	struct sprite_outfile o;
	int r = sprite_outfile_openat(&o, cfd, dir, name, 0644,
				      SPRITE_OUT_NOSYNC | SPRITE_OUT_NOSWEEP, err);
	if (r < 0)
		return r;
	r = write_tile_fd(E, o.fd, o.tmp_path, px, err);
	if (r < 0) {
		sprite_outfile_abort(&o);
		return r;
	}
	return sprite_outfile_commit(&o, err);
}

static void *export_worker(void *arg)
{
	struct export *E = arg;
	const struct sprite_store_info *in = E->in;
	static const char *const ext[] = {"tif", "tif", "png", NULL};
	const char *e = E->fmt == FMT_PNM ? sprite_pnm_ext(in->tile_c) + 1 : ext[E->fmt];
	void *raw = NULL;
	size_t cap = 0;
	char err[SPRITE_ERR_MAX], dir[4096], name[64];
	uint64_t done = 0;
	int cfd = -1, cfd_split = -1, cfd_label = -1; /* the class folder open last */
	for (;;) {
		pthread_mutex_lock(&E->mu);
		uint32_t i = E->next_sheet++;
		int stop = E->failed;
		pthread_mutex_unlock(&E->mu);
		if (stop || i >= in->nsheets)
			break;
		const struct sprite_sheet_entry *se = &in->sheets[i];
		if ((E->split >= 0 && se->split != E->split) || se->first >= E->limit)
			continue;
		if (se->raw_size > cap) {
			free(raw);
			cap = se->raw_size;
			raw = malloc(cap);
			if (!raw) {
				cap = 0;
				snprintf(err, sizeof err, "out of memory for sheet %u", i);
				goto fail;
			}
		}
		int64_t n = sprite_store_read_sheet(E->s, i, raw, cap, err);
		struct sprite_batch b;
		if (n >= 0 && sprite_batch_parse(raw, (size_t)n, &b, err) == 0) {
			for (uint32_t k = 0; k < b.count && n >= 0; k++)
				if (b.labels[k] >= in->nclasses) {
					snprintf(err, sizeof err, "sheet %u: label %u out of range",
						 i, b.labels[k]);
					n = -1;
				}
		} else {
			n = -1;
		}
		if (n < 0) {
			/* A bad sheet: its samples are left out, the others still go. */
			uint64_t lost =
				E->limit - se->first < se->count ? E->limit - se->first : se->count;
			pthread_mutex_lock(&E->mu);
			E->bad_sheets++;
			E->left_out += lost;
			if (!E->failed)
				fprintf(stderr,
					PROG ": %s: %s: %llu samples of split %s left out\n",
					E->path, err, (unsigned long long)lost,
					in->splits[se->split].name);
			if (E->strict && !E->failed) {
				E->failed = 1;
				snprintf(E->err, sizeof E->err, "stopped at sheet %u (--strict)",
					 i);
			}
			pthread_mutex_unlock(&E->mu);
			if (E->strict)
				break;
			continue;
		}
		size_t tb = (size_t)b.h * b.w * b.c;
		const char *sname = in->splits[se->split].name;
		for (uint32_t k = 0; k < b.count; k++) {
			uint64_t id = b.ids[k];
			if (id >= E->limit)
				break;
			snprintf(dir, sizeof dir, "%s/%s/%s", E->dir, sname,
				 E->class_dir[b.labels[k]]);
			snprintf(name, sizeof name, "%0*llu.%s", E->width[se->split],
				 (unsigned long long)id, e);
			if (cfd < 0 || cfd_split != (int)se->split || cfd_label != b.labels[k]) {
				if (cfd >= 0)
					close(cfd);
				cfd = openat(E->split_fd[se->split], E->class_dir[b.labels[k]],
					     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (cfd < 0) {
					snprintf(
						err, sizeof err, "%.200s: %s", dir,
						errno == ELOOP || errno == ENOTDIR
							? "not a folder (a link?): not written into"
							: strerror(errno));
					goto fail;
				}
				cfd_split = (int)se->split;
				cfd_label = b.labels[k];
			}
			if (write_tile(E, cfd, dir, name, b.tiles + k * tb, err) < 0)
				goto fail;
			done++;
		}
		continue;
	fail:
		pthread_mutex_lock(&E->mu);
		if (!E->failed) {
			E->failed = 1;
			memcpy(E->err, err, sizeof err);
		}
		pthread_mutex_unlock(&E->mu);
		break;
	}
	free(raw);
	if (cfd >= 0)
		close(cfd);
	pthread_mutex_lock(&E->mu);
	E->written += done;
	pthread_mutex_unlock(&E->mu);
	return NULL;
}

/*
 * DIR must be missing (it is created), or an empty folder: files left there
 * by an earlier export would read as part of this one (a packer or
 * ImageFolder takes every file). --force writes into a folder that is not
 * empty, e.g. one split at a time into one tree. Prints why and returns -1.
 */
static int check_export_dir(const char *dir, int force)
{
	struct stat st;
	if (stat(dir, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		fprintf(stderr, PROG ": --export %s: %s\n", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, PROG ": --export %s: not a folder\n", dir);
		return -1;
	}
	if (force)
		return 0;
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, PROG ": --export %s: cannot open: %s\n", dir, strerror(errno));
		return -1;
	}
	struct dirent *de;
	while ((de = readdir(d)) && (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")))
		;
	if (de)
		fprintf(stderr,
			PROG ": --export %s: the folder is not empty (it holds '%s'); give a new "
			     "or empty folder, or --force to write into it (files already there "
			     "stay)\n",
			dir, de->d_name);
	closedir(d);
	return de ? -1 : 0;
}

/*
 * The folder name inside parent (path pdir), created if missing, opened
 * without following a link: a link planted there by whoever can write the
 * tree (--force) is refused, not written through. Prints why and returns -1.
 */
static int open_subdir(int parent, const char *pdir, const char *name)
{
	if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..")) {
		fprintf(stderr, PROG ": --export: '%s' cannot be a folder name in %s\n", name,
			pdir);
		return -1;
	}
	if (mkdirat(parent, name, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, PROG ": cannot create %s/%s: %s\n", pdir, name, strerror(errno));
		return -1;
	}
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		fprintf(stderr, PROG ": --export: %s/%s: %s\n", pdir, name,
			errno == ELOOP || errno == ENOTDIR
				? "not a folder (a symbolic link?): not written into"
				: strerror(errno));
	return fd;
}

int spritefs_pack_export(const char *path, const char *dir, const char *format, const char *split,
			 uint64_t limit, int jobs, int strict, int force, int quiet)
{
	struct export E = {0};
	int dfd = -1;
	for (unsigned i = 0; i < SPRITE_MAX_SPLITS; i++)
		E.split_fd[i] = -1;
	char err[SPRITE_ERR_MAX] = "";
	sprite_store *s;
	int r = sprite_store_open(path, &s, err), rc = 1;
	if (r < 0) {
		fprintf(stderr, PROG ": %s: %s\n", path, err[0] ? err : strerror(-r));
		return 1;
	}
	E.s = s;
	E.in = sprite_store_info(s);
	E.path = path;
	E.dir = dir;
	E.limit = limit;
	E.strict = strict;
	E.split = -1;
	if (!strcmp(format, "tiff")) {
		E.fmt = FMT_TIFF;
	} else if (!strcmp(format, "tiff-lzw")) {
		E.fmt = FMT_TIFF_LZW;
	} else if (!strcmp(format, "png")) {
		E.fmt = FMT_PNG;
	} else if (!strcmp(format, "pgm") || !strcmp(format, "pnm")) {
		E.fmt = FMT_PNM;
		if (E.in->tile_c != 1 && E.in->tile_c != 3) {
			fprintf(stderr, PROG ": %s: %u-channel tiles have no PNM form\n", path,
				E.in->tile_c);
			goto out;
		}
	} else {
		fprintf(stderr, PROG ": unknown format '%s' (tiff, tiff-lzw, png, pgm)\n", format);
		rc = 2;
		goto out;
	}
	if (split) {
		E.split = sprite_store_find_split(s, split);
		if (E.split < 0) {
			fprintf(stderr, PROG ": %s: no split named '%s'\n", path, split);
			goto out;
		}
	}
	if (check_export_dir(dir, force) < 0)
		goto out;
	E.class_dir = calloc(E.in->nclasses ? E.in->nclasses : 1, sizeof *E.class_dir);
	if (!E.class_dir)
		goto oom;
	for (uint32_t i = 0; i < E.in->nclasses; i++)
		if (!(E.class_dir[i] = sanitize(E.in->class_names[i])))
			goto oom;
	char p[4096];
	if ((r = sprite_mkdir_p(dir)) < 0 ||
	    (dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		fprintf(stderr, PROG ": cannot create %s: %s\n", dir, strerror(r < 0 ? -r : errno));
		goto out;
	}
	for (uint32_t sp = 0; sp < E.in->nsplits; sp++) {
		if (E.split >= 0 && (uint32_t)E.split != sp)
			continue;
		uint64_t n = E.in->splits[sp].count;
		if (n > limit)
			n = limit;
		int wdt = 1;
		for (uint64_t v = n > 0 ? n - 1 : 0; v >= 10; v /= 10)
			wdt++;
		E.width[sp] = wdt;
		if ((E.split_fd[sp] = open_subdir(dfd, dir, E.in->splits[sp].name)) < 0)
			goto out;
		snprintf(p, sizeof p, "%s/%s", dir, E.in->splits[sp].name);
		for (uint32_t c = 0; c < E.in->nclasses; c++) {
			int cfd = open_subdir(E.split_fd[sp], p, E.class_dir[c]);
			if (cfd < 0)
				goto out;
			sprite_outfile_sweep(cfd, NULL); /* a killed export's temporaries */
			close(cfd);
		}
	}
	if (jobs <= 0) {
		long nc = sysconf(_SC_NPROCESSORS_ONLN);
		jobs = nc < 1 ? 1 : nc > 64 ? 64 : (int)nc;
	}
	pthread_mutex_init(&E.mu, NULL);
	double t0 = sprite_now();
	pthread_t tids[64];
	int nt = 0;
	for (; nt < jobs && nt < 64; nt++)
		if (pthread_create(&tids[nt], NULL, export_worker, &E) != 0)
			break;
	if (nt == 0)
		export_worker(&E);
	for (int i = 0; i < nt; i++)
		pthread_join(tids[i], NULL);
	double dt = sprite_now() - t0;
	pthread_mutex_destroy(&E.mu);
	if (E.failed)
		fprintf(stderr, PROG ": %s: %s\n", path, E.err);
	if (E.failed || E.bad_sheets) {
		fprintf(stderr,
			PROG ": %s: exported %llu images to %s; %llu samples of %u bad sheets "
			     "left out%s\n",
			path, (unsigned long long)E.written, dir, (unsigned long long)E.left_out,
			E.bad_sheets, E.failed ? ", and the export stopped" : "");
		goto out;
	}
	if (!quiet)
		printf(PROG ": exported %llu images to %s in %.2f s (%.0f images/s)\n",
		       (unsigned long long)E.written, dir, dt, dt > 0 ? E.written / dt : 0.0);
	rc = 0;
	goto out;
oom:
	fprintf(stderr, PROG ": out of memory\n");
out:
	if (E.class_dir)
		for (uint32_t i = 0; i < E.in->nclasses; i++)
			free(E.class_dir[i]);
	free(E.class_dir);
	for (unsigned i = 0; i < SPRITE_MAX_SPLITS; i++)
		if (E.split_fd[i] >= 0)
			close(E.split_fd[i]);
	if (dfd >= 0)
		close(dfd);
	sprite_store_close(s);
	return rc;
}
