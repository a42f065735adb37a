/*
 * spritefs-pack.c - the spritefs-pack command: pack an image source into a
 * sprite store, verify or describe a store, or export a store back to an
 * image folder. A program of its own, not part of the daemon.
 *
 * Packing itself lives in common/pack.c (spritefs packs image folders on
 * mount with the same code); this file only parses arguments, prints skipped
 * files and the summary, and picks exit codes: 0 ok, 1 error (or a bad image
 * under --strict), 2 usage (an option that the chosen mode does not use
 * among them: refused, not ignored). --export is in pack_export.c.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/batch.h"
#include "common/image.h"
#include "common/pack.h"
#include "common/perm.h"
#include "common/store.h"
#include "common/util.h"
#include "pack/pack_export.h"

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
		"       " PROG " --info --skipped STORE   list the files the pack skipped\n"
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
		"  --background COLOUR what transparent pixels become: none (default: alpha\n"
		"                      dropped, the colours as stored, as PIL's convert and\n"
		"                      torchvision's loader), black, white or R,G,B (0-255)\n"
		"  --sheet N           tiles per sheet (default: as many as fill 4 MiB\n"
		"                      decoded, at most 1024)\n"
		"  --compress lz4|none sheet compression (default lz4: each sheet lz4 where it\n"
		"                      saves at least 10%%, else raw, which costs no decode)\n"
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

/* A warning for each class that has no sample in a split (a model would never see it there). */
static void warn_empty_classes(const sprite_store *s)
{
	const struct sprite_store_info *in = sprite_store_info(s);
	uint64_t *n = calloc(in->nclasses, sizeof *n);
	for (uint32_t k = 0; n && k < in->nsplits; k++) {
		if (sprite_store_class_counts(s, k, n) < 0)
			break;
		for (uint32_t c = 0; c < in->nclasses; c++)
			if (!n[c])
				fprintf(stderr,
					PROG ": warning: class %s has no sample in split %s\n",
					in->class_names[c], in->splits[k].name);
	}
	free(n);
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
	if (quiet) {
		/* warnings are for -q too: a class with no sample in a split */
		sprite_store *q = NULL;
		if (sprite_store_open(dst, &q, err) == 0)
			warn_empty_classes(q);
		sprite_store_close(q);
		return 0;
	}
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
		warn_empty_classes(s);
		if (rep.skipped)
			printf(PROG ": the %llu skipped files are listed in the store: " PROG
				    " --info --skipped %s\n",
			       (unsigned long long)rep.skipped, dst);
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
	/* and the bytes no checksum covers: what the format declares zero */
	pr = sprite_store_verify_padding(s, perr);
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

/* --info --skipped: the store's skipped-file list as it is kept, PATH<tab>REASON a line. */
static int print_skipped(const char *path, const sprite_store *s)
{
	char err[SPRITE_ERR_MAX] = "", *t;
	size_t n;
	int r = sprite_store_read_skipped(s, &t, &n, err);
	if (r < 0) {
		fprintf(stderr, PROG ": %s: %s\n", path, err[0] ? err : strerror(-r));
		return 1;
	}
	fwrite(t, 1, n, stdout);
	free(t);
	return 0;
}

/* --info's per-class counts: a line per class, its samples in each split. */
static void print_class_counts(const sprite_store *s)
{
	const struct sprite_store_info *in = sprite_store_info(s);
	uint64_t *n = calloc((size_t)in->nclasses * in->nsplits, sizeof *n);
	int ok = n != NULL;
	for (uint32_t k = 0; ok && k < in->nsplits; k++)
		ok = sprite_store_class_counts(s, k, n + (size_t)k * in->nclasses) == 0;
	if (!ok) {
		printf("per class:   not recorded (a store before version 3 has no label table)\n");
		free(n);
		return;
	}
	for (uint32_t c = 0; c < in->nclasses; c++) {
		printf("class:       %s:", in->class_names[c]);
		for (uint32_t k = 0; k < in->nsplits; k++)
			printf("%s %s %llu%s", k ? "," : "", in->splits[k].name,
			       (unsigned long long)n[(size_t)k * in->nclasses + c],
			       n[(size_t)k * in->nclasses + c] ? "" : " (none: warning)");
		printf("\n");
	}
	free(n);
}

static int do_info(const char *path, int skipped)
{
	char err[SPRITE_ERR_MAX] = "", a[32], b[32];
	sprite_store *s;
	int r = sprite_store_open(path, &s, err);
	if (r < 0) {
		fprintf(stderr, PROG ": %s: %s\n", path, err[0] ? err : strerror(-r));
		return 1;
	}
	if (skipped) {
		r = print_skipped(path, s);
		sprite_store_close(s);
		return r;
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
	char bg[32];
	printf("background:  %s\n", sprite_bg_name(in->background, bg, sizeof bg));
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
	print_class_counts(s);
	printf("skipped:     %llu source files not packed%s%s\n",
	       (unsigned long long)sprite_store_skipped_count(s),
	       sprite_store_skipped_count(s) ? ": " PROG " --info --skipped " : "",
	       sprite_store_skipped_count(s) ? path : "");
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

/* ---- main ------------------------------------------------------------ */

enum {
	OPT_TILE = 256,
	OPT_FIT,
	OPT_BACKGROUND,
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
	OPT_SKIPPED,
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
	{OPT_BACKGROUND, "--background", MODE_PACK},
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
	{OPT_SKIPPED, "--skipped", MODE_INFO},
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

static const struct option longopts[] = {
	{"tile", required_argument, NULL, OPT_TILE},
	{"fit", required_argument, NULL, OPT_FIT},
	{"background", required_argument, NULL, OPT_BACKGROUND},
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
	{"skipped", no_argument, NULL, OPT_SKIPPED},
	{"quiet", no_argument, NULL, 'q'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* The command line, as parsed. */
struct cli {
	struct sprite_pack_options o;
	int verify, info, quiet, force;
	const char *export_dir, *format, *split;
	uint64_t limit;
	char given[OPT_END]; /* options given, for check_mode_options() */
};

/* Take option opt (its argument in optarg): -1 to go on, else the exit status. */
static int take_opt(struct cli *c, int opt)
{
	uint32_t v;
	switch (opt) {
	case OPT_TILE:
		if (sprite_parse_tile(optarg, &c->o.tile_h, &c->o.tile_w, &c->o.tile_c) < 0) {
			fprintf(stderr,
				PROG ": bad --tile '%s' (HxW or HxWxC, sides 1..%u, "
				     "C 1, 3 or 4)\n",
				optarg, SPRITE_MAX_TILE_SIDE);
			return 2;
		}
		break;
	case OPT_FIT:
		if (sprite_fit_parse(optarg, &c->o.fit) < 0) {
			fprintf(stderr, PROG ": bad --fit '%s' (crop, pad or stretch)\n", optarg);
			return 2;
		}
		break;
	case OPT_BACKGROUND:
		if (sprite_bg_parse(optarg, &c->o.background) < 0) {
			fprintf(stderr,
				PROG ": bad --background '%s' (none, black, white or R,G,B with "
				     "each 0-255)\n",
				optarg);
			return 2;
		}
		break;
	case OPT_SHEET:
		if (parse_u32(optarg, SPRITE_MAX_SHEET_TILES, &c->o.sheet_tiles) < 0 ||
		    c->o.sheet_tiles == 0) {
			fprintf(stderr, PROG ": bad --sheet '%s' (1..%u)\n", optarg,
				SPRITE_MAX_SHEET_TILES);
			return 2;
		}
		break;
	case OPT_STORE_VERSION:
		if (parse_u32(optarg, SPRITE_VERSION, &c->o.store_version) < 0 ||
		    c->o.store_version < 2) {
			fprintf(stderr, PROG ": bad --store-version '%s' (2..%u)\n", optarg,
				SPRITE_VERSION);
			return 2;
		}
		break;
	case OPT_WINDOW:
		if (!strcmp(optarg, "full")) {
			c->o.order_window = SPRITE_ORDER_FULL;
		} else if (parse_u32(optarg, SPRITE_ORDER_WINDOW_MAX, &c->o.order_window) < 0 ||
			   c->o.order_window == 0) {
			fprintf(stderr, PROG ": bad --window '%s' (1..%u sheets, or full)\n",
				optarg, SPRITE_ORDER_WINDOW_MAX);
			return 2;
		}
		break;
	case OPT_COMPRESS:
		if (!strcmp(optarg, "lz4")) {
			c->o.codec = SPRITE_CODEC_LZ4;
		} else if (!strcmp(optarg, "none") || !strcmp(optarg, "raw")) {
			c->o.codec = SPRITE_CODEC_RAW;
		} else {
			fprintf(stderr, PROG ": bad --compress '%s' (lz4 or none)\n", optarg);
			return 2;
		}
		break;
	case OPT_JOBS:
		if (parse_u32(optarg, 256, &v) < 0 || v == 0) {
			fprintf(stderr, PROG ": bad --jobs '%s' (1..256)\n", optarg);
			return 2;
		}
		c->o.jobs = (int)v;
		break;
	case OPT_STRICT:
		c->o.strict = 1;
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
		c->o.name = optarg;
		break;
	case OPT_VERIFY:
		c->verify = 1;
		break;
	case OPT_INFO:
		c->info = 1;
		break;
	case OPT_EXPORT:
		c->export_dir = optarg;
		break;
	case OPT_FORMAT:
		c->format = optarg;
		break;
	case OPT_SPLIT:
		c->split = optarg;
		break;
	case OPT_LIMIT: {
		char *e;
		errno = 0;
		unsigned long long n = strtoull(optarg, &e, 10);
		if (errno || e == optarg || *e || optarg[0] == '-') {
			fprintf(stderr, PROG ": bad --limit '%s'\n", optarg);
			return 2;
		}
		c->limit = n;
		break;
	}
	case OPT_FORCE:
		c->force = 1;
		break;
	case OPT_SKIPPED:
		break; /* c->given[] holds it */
	case 'q':
		c->quiet = 1;
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
	return -1;
}

int main(int argc, char **argv)
{
	struct cli c = {.o = {.codec = SPRITE_CODEC_LZ4, .fit = SPRITE_FIT_CROP},
			.format = "tiff",
			.limit = UINT64_MAX};
	int opt;
	while ((opt = getopt_long(argc, argv, "qhV", longopts, NULL)) != -1) {
		if (opt > 0 && opt < OPT_END)
			c.given[opt] = 1;
		int r = take_opt(&c, opt);
		if (r >= 0)
			return r;
	}
	int nargs = argc - optind;
	if (c.verify + c.info + (c.export_dir != NULL) > 1) {
		fprintf(stderr, PROG ": --verify, --info and --export do not go together\n");
		return 2;
	}
	unsigned mode = c.verify       ? MODE_VERIFY
			: c.info       ? MODE_INFO
			: c.export_dir ? MODE_EXPORT
				       : MODE_PACK;
	if (check_mode_options(c.given, mode) < 0)
		return 2;
	if (mode != MODE_PACK) {
		if (nargs != 1) {
			fprintf(stderr, PROG ": expected one STORE argument\n");
			usage(stderr);
			return 2;
		}
		const char *store = argv[optind];
		if (mode == MODE_VERIFY)
			return do_verify(store, c.quiet);
		if (mode == MODE_INFO)
			return do_info(store, c.given[OPT_SKIPPED]);
		return spritefs_pack_export(store, c.export_dir, c.format, c.split, c.limit,
					    c.o.jobs, c.o.strict, c.force, c.quiet);
	}
	if (nargs != 2) {
		fprintf(stderr, PROG ": expected SOURCE and STORE\n");
		usage(stderr);
		return 2;
	}
	return do_pack(argv[optind], argv[optind + 1], &c.o, c.quiet);
}
