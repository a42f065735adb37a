/*
 * spritefs-pack.c - the spritefs-pack command: pack an image source into a
 * sprite store, verify or describe a store, or export a store back to an
 * image folder. A program of its own, not part of the daemon.
 *
 * Packing itself lives in common/pack.c (spritefs packs image folders on
 * mount with the same code); this file only parses arguments, prints skipped
 * files and the summary, and picks exit codes: 0 ok, 1 error (or a bad image
 * under --strict), 2 usage (an option that the chosen mode does not use
 * among them: refused, not ignored). --export is here because it is a tool
 * for people and benchmarks (it writes the many-small-files tree that
 * PyTorch reads), not something the library needs; it decodes sheets on
 * --jobs threads and writes each tile as DIR/<split>/<class>/<index>.<ext>
 * (DIR new or empty unless --force: a packer would take leftovers for part
 * of the set), with indexes zero-padded so that packing the exported tree
 * again keeps the sample order within a class. A sheet that does not decode
 * is named and its samples left out; the rest is written and the exit
 * status is 1 (--strict stops at the first).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
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
#include "common/pack.h"
#include "common/perm.h"
#include "common/store.h"
#include "common/util.h"

#ifndef SPRITEFS_VERSION
#define SPRITEFS_VERSION "unknown"
#endif

#define PROG "spritefs-pack"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [options] SOURCE STORE   pack an image folder or IDX folder\n"
		"       " PROG " --verify STORE           check every checksum and field; names\n"
		"                                          each bad sheet, then \"N of M sheets "
		"bad\"\n"
		"       " PROG " --info STORE             describe a store\n"
		"       " PROG " --export DIR [--format F] [--split S] [--limit N]\n"
		"                     [--force] STORE      write a store out as\n"
		"                                          DIR/<split>/<class>/<n>.<ext> (DIR new\n"
		"                                          or empty, unless --force); a sheet\n"
		"                                          that does not decode is named and its\n"
		"                                          samples left out, the rest is written,\n"
		"                                          exit status 1 (--strict: stop there)\n"
		"\n"
		"SOURCE is an ImageFolder tree (SOURCE/<split>/<class>/<image> or\n"
		"SOURCE/<class>/<image>) of TIFF, PNG, JPEG or PGM/PPM/PAM files, or a folder\n"
		"of IDX files (train-images-idx3-ubyte[.gz], ... as Fashion-MNIST ships).\n"
		"A JPEG is turned upright by its EXIF orientation, and a CMYK one converted\n"
		"to RGB (docs/FORMAT.md, \"The tile fit rule\"); an image larger than 2^28\n"
		"pixels or 65536 a side is skipped before it is decoded.\n"
		"Each image that does not decode is named (\"skipped PATH: REASON\") and left\n"
		"out; so is each entry that is not an image in a class folder (\"ignored PATH:\n"
		"REASON\": a file beside the class folders, a folder beside the split folders\n"
		"with no class folders in it, a dangling symbolic link, a FIFO, a link loop).\n"
		"Names starting with '.' are passed over silently. Control characters in\n"
		"names are shown escaped (\\n, \\xNN).\n"
		"\n"
		"pack options:\n"
		"  --tile HxW[xC]      tile shape (default: the images' size when they all have\n"
		"                      one, or the IDX dims; images of several sizes need it)\n"
		"  --fit MODE          how an image of another size becomes a tile: crop\n"
		"                      (default: shorter side to the tile, centre kept), pad\n"
		"                      (longer side to the tile, the rest filled with 0), or\n"
		"                      stretch (both sides to the tile, aspect not kept)\n"
		"  --sheet N           tiles per sheet (default: as many as fill 4 MiB\n"
		"                      decoded, at most 1024)\n"
		"  --compress lz4|none sheet compression (default lz4)\n"
		"  --window N|full     the data set's sample order: N sheets per shuffle window\n"
		"                      (default: as many as hold 128 MiB of tiles; a split of\n"
		"                      no more sheets than that gets the full shuffle)\n"
		"  --store-version N   write store format N (default 3); 2 has no label table\n"
		"                      nor source paths, for readers older than version 3\n"
		"  --name NAME         data set name, at most 63 bytes (default: SOURCE's folder\n"
		"                      name, cut to 63 bytes between UTF-8 characters)\n"
		"pack and --export options:\n"
		"  --jobs N            decode/encode threads (default: all cores)\n"
		"  --strict            stop at the first bad image, or entry that is neither a\n"
		"                      file nor a folder (no store is written); with --export,\n"
		"                      stop at the first bad sheet\n"
		"--export options:\n"
		"  --format F          export format: tiff, tiff-lzw, png, pgm (default tiff)\n"
		"  --split S           export only split S\n"
		"  --limit N           export at most N images per split\n"
		"  --force             export into a DIR that is not empty (one split at a time\n"
		"                      into one tree, say): files already there stay, those of\n"
		"                      the same name are replaced; without it such a DIR is\n"
		"                      refused\n"
		"other options:\n"
		"  -q, --quiet         print only errors, skipped files and ignored entries (not\n"
		"                      with --info)\n"
		"  -h, --help          this text\n"
		"  -V, --version       print the version\n"
		"An option given with a mode it does not apply to is refused (exit status 2).\n"
		"\n"
		"exit status: 0 ok, 1 error (a bad image with --strict, a bad sheet in --verify\n"
		"or --export), 2 usage\n");
}

static int parse_u32(const char *s, uint32_t max, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || v > max || s[0] == '-')
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static double mb(uint64_t b)
{
	return (double)b / 1e6;
}

/* ---- pack ------------------------------------------------------------ */

/* "skipped" (an image that did not decode) or "ignored" (an entry that is not an image) */
static void report(const struct sprite_progress *p, const char *what, const char *path,
		   const char *why)
{
	char shown[4 * PATH_MAX + 4];
	/* On a terminal, clear the progress bar's line first; it redraws. */
	fprintf(stderr, "%s" PROG ": %s %s: %s\n", p && p->tty ? "\r\033[K" : "", what,
		sprite_escape(path, shown, sizeof shown), why);
}

static void on_skip(void *ctx, const char *path, const char *why)
{
	report(ctx, "skipped", path, why);
}

static void on_ignore(void *ctx, const char *path, const char *why)
{
	report(ctx, "ignored", path, why);
}

static int do_pack(const char *src, const char *dst, struct sprite_pack_options *o, int quiet)
{
	struct sprite_pack_report rep;
	struct sprite_progress prog;
	char err[SPRITE_ERR_MAX] = "";
	memset(&prog, 0, sizeof prog);
	o->on_skip = on_skip;
	o->on_ignore = on_ignore;
	o->progress = quiet ? NULL : &prog;
	o->ctx = o->progress;
	/*
	 * A pack killed by SIGINT/SIGTERM/SIGHUP/SIGPIPE takes its temp file with
	 * it, and says so (but for SIGPIPE: stderr may be the broken pipe).
	 */
	sprite_writer_signal_note(PROG ": no store written: stopped by ");
	int r = sprite_writer_catch_signals();
	if (r < 0)
		fprintf(stderr, PROG ": warning: cannot catch signals: %s\n", strerror(-r));
	r = sprite_pack(src, dst, o, &rep, err);
	sprite_writer_restore_signals();
	if (r < 0) {
		fprintf(stderr, PROG ": %s\n", err[0] ? err : strerror(-r));
		/* No counts here: they would read like those of a finished pack. */
		fprintf(stderr, PROG ": no store written\n");
		return 1;
	}
	if (quiet)
		return 0;
	printf(PROG ": found %llu, packed %llu, skipped %llu, ignored %llu\n",
	       (unsigned long long)rep.found, (unsigned long long)rep.packed,
	       (unsigned long long)rep.skipped, (unsigned long long)rep.ignored);
	sprite_store *s = NULL;
	if (sprite_store_open(dst, &s, err) == 0) {
		const struct sprite_store_info *in = sprite_store_info(s);
		printf(PROG ": %s: %ux%ux%u tiles (fit %s), %u classes, %u sheets;", dst,
		       in->tile_h, in->tile_w, in->tile_c, sprite_fit_name(in->fit), in->nclasses,
		       in->nsheets);
		for (uint32_t i = 0; i < in->nsplits; i++)
			printf(" %s %llu", in->splits[i].name,
			       (unsigned long long)in->splits[i].count);
		printf("\n");
		sprite_store_close(s);
	}
	/* (Source files vs store file: not lz4's ratio, which --info gives per sheet.) */
	printf(PROG ": %.1f MB of source files in, %.1f MB store out (the store is %.2fx the "
		    "source's size)\n",
	       mb(rep.bytes_in), mb(rep.bytes_out),
	       rep.bytes_in ? (double)rep.bytes_out / rep.bytes_in : 0.0);
	printf(PROG ": %.2f s, %.0f images/s\n", rep.seconds,
	       rep.seconds > 0 ? (double)rep.found / rep.seconds : 0.0);
	return 0;
}

/* ---- verify / info ---------------------------------------------------- */

struct verify_ctx {
	const char *path;
	const struct sprite_store_info *in;
};

static void on_bad_sheet(void *ctx, uint32_t sheet, int error, const char *why)
{
	const struct verify_ctx *v = ctx;
	const struct sprite_sheet_entry *e = &v->in->sheets[sheet];
	(void)error;
	fprintf(stderr, PROG ": %s: %s (split %s, samples %llu..%llu)\n", v->path, why,
		v->in->splits[e->split].name, (unsigned long long)e->first,
		(unsigned long long)(e->first + e->count - 1));
}

static int do_verify(const char *path, int quiet)
{
	char err[SPRITE_ERR_MAX] = "";
	sprite_store *s;
	int r = sprite_store_open(path, &s, err);
	if (r < 0) {
		fprintf(stderr, PROG ": %s: %s\n", path, err[0] ? err : strerror(-r));
		return 1;
	}
	const struct sprite_store_info *in = sprite_store_info(s);
	struct verify_ctx v = {path, in};
	int64_t bad = sprite_store_verify_sheets(s, on_bad_sheet, &v, err);
	/* the path table is checked on first use only: here, that is now */
	char perr[SPRITE_ERR_MAX] = "";
	int pr = sprite_store_has_paths(s) ? sprite_store_load_paths(s, perr) : 0;
	if (pr < 0) {
		fprintf(stderr, PROG ": %s: %s\n", path, perr[0] ? perr : strerror(-pr));
		if (bad == 0) {
			sprite_store_close(s);
			return 1;
		}
	}
	if (bad != 0) {
		if (bad < 0)
			fprintf(stderr, PROG ": %s: %s\n", path,
				err[0] ? err : strerror((int)-bad));
		else
			fprintf(stderr, PROG ": %s: %lld of %u sheets bad\n", path, (long long)bad,
				in->nsheets);
		sprite_store_close(s);
		return 1;
	}
	uint64_t n = 0;
	for (uint32_t i = 0; i < in->nsplits; i++)
		n += in->splits[i].count;
	if (!quiet)
		printf(PROG ": %s: ok (%u sheets, %llu samples)\n", path, in->nsheets,
		       (unsigned long long)n);
	sprite_store_close(s);
	return 0;
}

static int do_info(const char *path)
{
	char err[SPRITE_ERR_MAX] = "", a[32], b[32];
	sprite_store *s;
	int r = sprite_store_open(path, &s, err);
	if (r < 0) {
		fprintf(stderr, PROG ": %s: %s\n", path, err[0] ? err : strerror(-r));
		return 1;
	}
	const struct sprite_store_info *in = sprite_store_info(s);
	uint64_t raw = 0, stored = 0, tiles = 0;
	uint32_t nlz4 = 0;
	for (uint32_t i = 0; i < in->nsheets; i++) {
		raw += in->sheets[i].raw_size;
		stored += in->sheets[i].stored_size;
		nlz4 += in->sheets[i].codec == SPRITE_CODEC_LZ4;
	}
	printf("store:       %s\n", path);
	printf("name:        %s\n", in->name);
	printf("tile:        %ux%ux%u (%u bytes)\n", in->tile_h, in->tile_w, in->tile_c,
	       in->tile_h * in->tile_w * in->tile_c);
	printf("format:      version %u, %s\n", in->version,
	       in->version < 3		    ? "labels in the sheets only"
	       : !sprite_store_labels(s, 0) ? "no label table"
	       : sprite_store_has_paths(s)  ? "label table, source-path table"
					    : "label table, no source paths");
	printf("fit:         %s%s\n", sprite_fit_name(in->fit),
	       in->fit == SPRITE_FIT_PAD ? " (filled with 0)" : "");
	printf("sheet tiles: %u\n", in->sheet_tiles);
	printf("sheets:      %u\n", in->nsheets);
	if (in->order_window)
		printf("order:       windowed, %u sheets per window, where a split has more%s\n",
		       in->order_window, in->version < 2 ? " (version-1 store: the default)" : "");
	else
		printf("order:       full shuffle\n");
	for (uint32_t i = 0; i < in->nsplits; i++) {
		const struct sprite_split_entry *sp = &in->splits[i];
		tiles += sp->count;
		printf("split:       %s %llu samples, sheets %u..%u\n", sp->name,
		       (unsigned long long)sp->count, sp->first_sheet,
		       sp->first_sheet + sp->nsheets - (sp->nsheets ? 1 : 0));
	}
	printf("samples:     %llu\n", (unsigned long long)tiles);
	printf("classes:     %u:", in->nclasses);
	for (uint32_t i = 0; i < in->nclasses; i++)
		printf("%s %s", i ? "," : "", in->class_names[i]);
	printf("\n");
	printf("file size:   %s (%llu bytes)\n", sprite_fmt_size(in->file_size, a, sizeof a),
	       (unsigned long long)in->file_size);
	printf("sheet bytes: %s raw, %s stored\n", sprite_fmt_size(raw, a, sizeof a),
	       sprite_fmt_size(stored, b, sizeof b));
	printf("compression: %s, decoded sheets are %.2fx their stored size\n",
	       nlz4 == in->nsheets ? "lz4"
	       : nlz4		   ? "lz4 (some sheets raw)"
				   : "none",
	       stored ? (double)raw / stored : 0.0);
	sprite_store_close(s);
	return 0;
}

/* ---- export ----------------------------------------------------------- */

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

static int write_tile(struct export *E, const char *path, const uint8_t *px, char *err)
{
	uint32_t h = E->in->tile_h, w = E->in->tile_w, c = E->in->tile_c;
	switch (E->fmt) {
	case FMT_TIFF:
		return sprite_tiff_write(path, px, h, w, c, COMPRESSION_NONE, err);
	case FMT_TIFF_LZW:
		return sprite_tiff_write(path, px, h, w, c, COMPRESSION_LZW, err);
	case FMT_PNG:
		return sprite_png_write(path, px, h, w, c, err);
	case FMT_PNM: {
		char hdr[SPRITE_PNM_HEADER_MAX];
		int hl = sprite_pnm_header(hdr, sizeof hdr, h, w, c);
		if (hl < 0) {
			snprintf(err, SPRITE_ERR_MAX, "%ux%ux%u tiles have no PNM form", h, w, c);
			return hl;
		}
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			int e = errno;
			snprintf(err, SPRITE_ERR_MAX, "cannot create %.180s: %s", path,
				 strerror(e));
			return -e;
		}
		size_t n = (size_t)h * w * c;
		int ok = write(fd, hdr, (size_t)hl) == hl && write(fd, px, n) == (ssize_t)n;
		int e = errno;
		if (close(fd) < 0 || !ok) {
			snprintf(err, SPRITE_ERR_MAX, "cannot write %.180s: %s", path, strerror(e));
			return -EIO;
		}
		return 0;
	}
	}
	return -EINVAL;
}

static void *export_worker(void *arg)
{
	struct export *E = arg;
	const struct sprite_store_info *in = E->in;
	static const char *const ext[] = {"tif", "tif", "png", NULL};
	const char *e = E->fmt == FMT_PNM ? sprite_pnm_ext(in->tile_c) + 1 : ext[E->fmt];
	void *raw = NULL;
	size_t cap = 0;
	char err[SPRITE_ERR_MAX], path[4096];
	uint64_t done = 0;
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
			snprintf(path, sizeof path, "%s/%s/%s/%0*llu.%s", E->dir, sname,
				 E->class_dir[b.labels[k]], E->width[se->split],
				 (unsigned long long)id, e);
			if (write_tile(E, path, b.tiles + k * tb, err) < 0)
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

static int do_export(const char *path, const char *dir, const char *format, const char *split,
		     uint64_t limit, int jobs, int strict, int force, int quiet)
{
	struct export E = {0};
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
		for (uint32_t c = 0; c < E.in->nclasses; c++) {
			snprintf(p, sizeof p, "%s/%s/%s", dir, E.in->splits[sp].name,
				 E.class_dir[c]);
			if ((r = sprite_mkdir_p(p)) < 0) {
				fprintf(stderr, PROG ": cannot create %s: %s\n", p, strerror(-r));
				goto out;
			}
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
	sprite_store_close(s);
	return rc;
}

/* ---- main ------------------------------------------------------------ */

enum {
	OPT_TILE = 256,
	OPT_FIT,
	OPT_SHEET,
	OPT_COMPRESS,
	OPT_WINDOW,
	OPT_STORE_VERSION,
	OPT_JOBS,
	OPT_STRICT,
	OPT_NAME,
	OPT_VERIFY,
	OPT_INFO,
	OPT_EXPORT,
	OPT_FORMAT,
	OPT_SPLIT,
	OPT_LIMIT,
	OPT_FORCE,
	OPT_END
};

enum { MODE_PACK = 1, MODE_VERIFY = 2, MODE_INFO = 4, MODE_EXPORT = 8 };

/*
 * The modes each option applies to. An option given to another mode is
 * refused rather than ignored: `--verify --jobs 8` or `--export D --tile ...`
 * would otherwise look as if it had done something.
 */
static const struct {
	int opt;
	const char *name;
	unsigned modes;
} mode_opts[] = {
	{OPT_TILE, "--tile", MODE_PACK},
	{OPT_FIT, "--fit", MODE_PACK},
	{OPT_SHEET, "--sheet", MODE_PACK},
	{OPT_COMPRESS, "--compress", MODE_PACK},
	{OPT_WINDOW, "--window", MODE_PACK},
	{OPT_STORE_VERSION, "--store-version", MODE_PACK},
	{OPT_NAME, "--name", MODE_PACK},
	{OPT_JOBS, "--jobs", MODE_PACK | MODE_EXPORT},
	{OPT_STRICT, "--strict", MODE_PACK | MODE_EXPORT},
	{OPT_FORMAT, "--format", MODE_EXPORT},
	{OPT_SPLIT, "--split", MODE_EXPORT},
	{OPT_LIMIT, "--limit", MODE_EXPORT},
	{OPT_FORCE, "--force", MODE_EXPORT},
	{'q', "-q/--quiet", MODE_PACK | MODE_VERIFY | MODE_EXPORT},
};

static const char *mode_name(unsigned m)
{
	return m == MODE_PACK	  ? "packing"
	       : m == MODE_VERIFY ? "--verify"
	       : m == MODE_INFO	  ? "--info"
				  : "--export";
}

/*
 * Refuse the first option in given[] that does not apply to mode, naming the
 * modes it does apply to: -1, or 0 when every option given applies.
 */
static int check_mode_options(const char *given, unsigned mode)
{
	for (size_t i = 0; i < sizeof mode_opts / sizeof mode_opts[0]; i++) {
		unsigned modes = mode_opts[i].modes;
		if (!given[mode_opts[i].opt] || (modes & mode))
			continue;
		fprintf(stderr, PROG ": %s does not apply to %s (only to", mode_opts[i].name,
			mode_name(mode));
		int n = __builtin_popcount(modes), k = 0;
		for (unsigned m = MODE_PACK; m <= MODE_EXPORT; m <<= 1) {
			if (!(modes & m))
				continue;
			k++;
			fprintf(stderr, "%s%s",
				k == 1	 ? " "
				: k == n ? " and "
					 : ", ",
				mode_name(m));
		}
		fprintf(stderr, ")\n");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"tile", required_argument, NULL, OPT_TILE},
		{"fit", required_argument, NULL, OPT_FIT},
		{"sheet", required_argument, NULL, OPT_SHEET},
		{"compress", required_argument, NULL, OPT_COMPRESS},
		{"window", required_argument, NULL, OPT_WINDOW},
		{"store-version", required_argument, NULL, OPT_STORE_VERSION},
		{"jobs", required_argument, NULL, OPT_JOBS},
		{"strict", no_argument, NULL, OPT_STRICT},
		{"name", required_argument, NULL, OPT_NAME},
		{"verify", no_argument, NULL, OPT_VERIFY},
		{"info", no_argument, NULL, OPT_INFO},
		{"export", required_argument, NULL, OPT_EXPORT},
		{"format", required_argument, NULL, OPT_FORMAT},
		{"split", required_argument, NULL, OPT_SPLIT},
		{"limit", required_argument, NULL, OPT_LIMIT},
		{"force", no_argument, NULL, OPT_FORCE},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct sprite_pack_options o = {.codec = SPRITE_CODEC_LZ4, .fit = SPRITE_FIT_CROP};
	int mode_verify = 0, mode_info = 0, quiet = 0, force = 0, opt;
	const char *export_dir = NULL, *format = "tiff", *split = NULL;
	uint64_t limit = UINT64_MAX;
	uint32_t v;

	char given[OPT_END] = {0};

	while ((opt = getopt_long(argc, argv, "qhV", longopts, NULL)) != -1) {
		if (opt > 0 && opt < OPT_END)
			given[opt] = 1;
		switch (opt) {
		case OPT_TILE:
			if (sprite_parse_tile(optarg, &o.tile_h, &o.tile_w, &o.tile_c) < 0) {
				fprintf(stderr,
					PROG ": bad --tile '%s' (HxW or HxWxC, sides 1..%u, "
					     "C 1, 3 or 4)\n",
					optarg, SPRITE_MAX_TILE_SIDE);
				return 2;
			}
			break;
		case OPT_FIT:
			if (sprite_fit_parse(optarg, &o.fit) < 0) {
				fprintf(stderr, PROG ": bad --fit '%s' (crop, pad or stretch)\n",
					optarg);
				return 2;
			}
			break;
		case OPT_SHEET:
			if (parse_u32(optarg, SPRITE_MAX_SHEET_TILES, &o.sheet_tiles) < 0 ||
			    o.sheet_tiles == 0) {
				fprintf(stderr, PROG ": bad --sheet '%s' (1..%u)\n", optarg,
					SPRITE_MAX_SHEET_TILES);
				return 2;
			}
			break;
		case OPT_STORE_VERSION:
			if (parse_u32(optarg, SPRITE_VERSION, &o.store_version) < 0 ||
			    o.store_version < 2) {
				fprintf(stderr, PROG ": bad --store-version '%s' (2..%u)\n", optarg,
					SPRITE_VERSION);
				return 2;
			}
			break;
		case OPT_WINDOW:
			if (!strcmp(optarg, "full")) {
				o.order_window = SPRITE_ORDER_FULL;
			} else if (parse_u32(optarg, SPRITE_ORDER_WINDOW_MAX, &o.order_window) <
					   0 ||
				   o.order_window == 0) {
				fprintf(stderr,
					PROG ": bad --window '%s' (1..%u sheets, or full)\n",
					optarg, SPRITE_ORDER_WINDOW_MAX);
				return 2;
			}
			break;
		case OPT_COMPRESS:
			if (!strcmp(optarg, "lz4")) {
				o.codec = SPRITE_CODEC_LZ4;
			} else if (!strcmp(optarg, "none") || !strcmp(optarg, "raw")) {
				o.codec = SPRITE_CODEC_RAW;
			} else {
				fprintf(stderr, PROG ": bad --compress '%s' (lz4 or none)\n",
					optarg);
				return 2;
			}
			break;
		case OPT_JOBS:
			if (parse_u32(optarg, 256, &v) < 0 || v == 0) {
				fprintf(stderr, PROG ": bad --jobs '%s' (1..256)\n", optarg);
				return 2;
			}
			o.jobs = (int)v;
			break;
		case OPT_STRICT:
			o.strict = 1;
			break;
		case OPT_NAME:
			/* Refused rather than cut: a cut name would not be the one asked for. */
			if (strlen(optarg) >= SPRITE_NAME_MAX) {
				fprintf(stderr,
					PROG ": --name is %zu bytes long; a store's name holds at "
					     "most %u bytes\n",
					strlen(optarg), SPRITE_NAME_MAX - 1);
				return 2;
			}
			o.name = optarg;
			break;
		case OPT_VERIFY:
			mode_verify = 1;
			break;
		case OPT_INFO:
			mode_info = 1;
			break;
		case OPT_EXPORT:
			export_dir = optarg;
			break;
		case OPT_FORMAT:
			format = optarg;
			break;
		case OPT_SPLIT:
			split = optarg;
			break;
		case OPT_LIMIT: {
			char *e;
			errno = 0;
			unsigned long long n = strtoull(optarg, &e, 10);
			if (errno || e == optarg || *e || optarg[0] == '-') {
				fprintf(stderr, PROG ": bad --limit '%s'\n", optarg);
				return 2;
			}
			limit = n;
			break;
		}
		case OPT_FORCE:
			force = 1;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf(PROG " " SPRITEFS_VERSION "\n");
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	int nargs = argc - optind;
	if (mode_verify + mode_info + (export_dir != NULL) > 1) {
		fprintf(stderr, PROG ": --verify, --info and --export do not go together\n");
		return 2;
	}
	unsigned mode = mode_verify  ? MODE_VERIFY
			: mode_info  ? MODE_INFO
			: export_dir ? MODE_EXPORT
				     : MODE_PACK;
	if (check_mode_options(given, mode) < 0)
		return 2;
	if (mode != MODE_PACK) {
		if (nargs != 1) {
			fprintf(stderr, PROG ": expected one STORE argument\n");
			usage(stderr);
			return 2;
		}
		const char *store = argv[optind];
		if (mode_verify)
			return do_verify(store, quiet);
		if (mode_info)
			return do_info(store);
		return do_export(store, export_dir, format, split, limit, o.jobs, o.strict, force,
				 quiet);
	}
	if (nargs != 2) {
		fprintf(stderr, PROG ": expected SOURCE and STORE\n");
		usage(stderr);
		return 2;
	}
	return do_pack(argv[optind], argv[optind + 1], &o, quiet);
}
