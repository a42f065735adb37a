/*
 * source_folder.c - an ImageFolder tree as a data source (data.h: "images").
 *
 * The tree is listed by common/folder.c, as spritefs-pack lists it, and
 * every file is decoded once at open (on all cores) by the rule the packer
 * keeps or skips files by (common/sample.h): those that are not samples are
 * named once and left out, so that sample i here is sample i of a store
 * packed from the same tree, and the same seed gives the same weights from
 * either whatever the tree holds. Files are then decoded and fitted to the
 * tile on the loader threads when a batch asks for them; one that has
 * changed since and no longer decodes is named and skipped from then on,
 * or with --strict ends the run. The tile shape is given (--tile) or, as a
 * mount takes it, that of the first training image that decodes.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/folder.h"
#include "common/image.h"
#include "common/sample.h"
#include "common/store.h"
#include "common/util.h"
#include "trainer/source.h"

/* Without --tile, the largest side taken from the images themselves. */
#define HN_FOLDER_AUTO_SIDE 512u

/* An image file of the tree. */
struct img_file {
	char *path;
	uint16_t label;
};

struct folder_src {
	struct img_file *files[2];
	uint64_t nfiles[2];
	uint8_t *bad[2]; /* per file: did not decode, skipped from then on */
	int strict;
	uint32_t fit;	     /* enum sprite_fit */
	uint32_t background; /* SPRITE_BG_*: what alpha becomes */
	/* no --tile: every image must have the first one's size (that one's path) */
	char *first;
	void (*on_skip)(void *ctx, const char *why);
	void (*on_ignore)(void *ctx, const char *path, const char *why);
	void *skip_ctx;
	char *tree; /* the folder's real path: a file opened outside it is refused */
};

/*
 * An entry of the tree that is not an image of a class folder: named through
 * on_ignore and counted, or with --strict, when it is neither a file nor a
 * folder (a dangling link, a FIFO), the end of the open like a bad image.
 */
static int ignore_entry(hn_source *s, const char *path, int unreadable, const char *why, char *err)
{
	struct folder_src *fs = s->priv;
	if (unreadable && fs->strict) {
		char shown[HN_ERR_MAX];
		return sprite_fail(
			err, -EINVAL,
			"%s: %s (--strict stops at an entry that is neither a file nor a folder)",
			sprite_escape(path, shown, sizeof shown), why);
	}
	s->nignored++;
	if (fs->on_ignore)
		fs->on_ignore(fs->skip_ctx, path, why);
	return 0;
}

static int ignore_entries(hn_source *s, const struct sprite_folder_entries *l, char *err)
{
	int rc = 0;
	for (size_t i = 0; i < l->n && rc == 0; i++)
		rc = ignore_entry(s, l->v[i].path, l->v[i].unreadable, l->v[i].why, err);
	return rc;
}

struct file_list {
	struct img_file *v;
	size_t n, cap;
};

/* sprite_folder_walk's callbacks: the files of one split, in the order spritefs-pack packs them. */
struct walk_ctx {
	struct file_list *fl;
	hn_source *s;
	char *err;
};

static int walk_ignored(void *ctx, const char *path, int unreadable, const char *why)
{
	struct walk_ctx *c = ctx;
	return ignore_entry(c->s, path, unreadable, why, c->err);
}

static int walk_file(void *ctx, char *path, uint16_t label)
{
	struct walk_ctx *c = ctx;
	struct file_list *fl = c->fl;
	if (fl->n == fl->cap) {
		size_t nc = fl->cap ? fl->cap * 2 : 1024;
		struct img_file *nv = realloc(fl->v, nc * sizeof *nv);
		if (!nv) {
			free(path);
			return -ENOMEM;
		}
		fl->v = nv;
		fl->cap = nc;
	}
	fl->v[fl->n].path = path;
	fl->v[fl->n].label = label;
	fl->n++;
	return 0;
}

/*
 * Decode file i of split into tile by the rule spritefs-pack packs by
 * (common/sample.h). Every file was checked at open, so a failure here
 * means the file changed since: it is reported once and skipped from then
 * on (returns 1), or with --strict fails; 0 when the tile holds the sample.
 */
static int image_sample(hn_source *s, int split, uint64_t i, uint8_t *tile, char *err)
{
	struct folder_src *fs = s->priv;
	const struct img_file *f = &fs->files[split][i];
	if (__atomic_load_n(&fs->bad[split][i], __ATOMIC_RELAXED))
		return 1;
	char why[SPRITE_ERR_MAX], msg[2 * SPRITE_ERR_MAX];
	char shown[192]; /* the path in a message of SPRITE_ERR_MAX bytes, with room for why */
	struct sprite_sample_spec spec = {
		s->info.h,	   s->info.w, s->info.c,     (enum sprite_fit)fs->fit,
		fs->first != NULL, fs->tree,  fs->background};
	int rc = sprite_sample_load(f->path, &spec, NULL, tile, NULL, why);
	if (rc == 0)
		return 0;
	sprite_escape(f->path, shown, sizeof shown);
	if (rc == -ENOMEM)
		return sprite_fail(err, rc, "%s: %s", shown, why);
	if (fs->strict)
		return sprite_fail(err, rc,
				   "%s: %s (--strict stops at a file that does not decode)", shown,
				   why);
	if (!__atomic_exchange_n(&fs->bad[split][i], 1, __ATOMIC_RELAXED)) {
		__atomic_add_fetch(&s->nskipped, 1, __ATOMIC_RELAXED);
		snprintf(msg, sizeof msg, "%s: %s (changed since the run started)", shown, why);
		if (fs->on_skip)
			fs->on_skip(fs->skip_ctx, msg);
	}
	return 1;
}

/* ---- the check at open: which files are samples ------------------------- */

struct check {
	hn_source *s;
	int split;
	uint64_t next; /* atomic: next file to check */
	char **why;    /* per file: NULL a sample, else why not (malloc'd) */
	uint32_t *hw;  /* per file: decoded h, w (whole decodes: compared) */
	int oom;
};

static void *check_worker(void *arg)
{
	struct check *c = arg;
	hn_source *s = c->s;
	struct folder_src *fs = s->priv;
	struct sprite_sample_spec spec = {
		s->info.h,	   s->info.w, s->info.c,     (enum sprite_fit)fs->fit,
		fs->first != NULL, fs->tree,  fs->background};
	struct sprite_sample_buf buf = {0};
	uint8_t *tile = malloc(s->info.h * (size_t)s->info.w * s->info.c);
	char why[SPRITE_ERR_MAX];
	uint64_t n = fs->nfiles[c->split];
	for (uint64_t i; tile && (i = __atomic_fetch_add(&c->next, 1, __ATOMIC_RELAXED)) < n;) {
		struct sprite_sample_got got;
		int rc = sprite_sample_load(fs->files[c->split][i].path, &spec, &buf, tile, &got,
					    why);
		c->hw[2 * i] = got.h;
		c->hw[2 * i + 1] = got.w;
		if (rc == -ENOMEM || (rc < 0 && !(c->why[i] = strdup(why))))
			__atomic_store_n(&c->oom, 1, __ATOMIC_RELAXED);
	}
	if (!tile)
		__atomic_store_n(&c->oom, 1, __ATOMIC_RELAXED);
	free(tile);
	free(buf.data);
	return NULL;
}

/*
 * Decode every file of split once, on all cores, as spritefs-pack would:
 * those that are not samples are named through on_skip (in file order) and
 * left out of the split, so that sample i here is sample i of the store
 * packed from the same folder. --strict stops at the first; without --tile,
 * the first image whose size differs from the first one's stops the open.
 */
static int check_split(hn_source *s, int split, char *err)
{
	struct folder_src *fs = s->priv;
	uint64_t n = fs->nfiles[split];
	struct check c = {s,
			  split,
			  0,
			  calloc(n ? n : 1, sizeof(char *)),
			  calloc(2 * (n ? n : 1), sizeof(uint32_t)),
			  0};
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int nt = ncpu < 1 ? 1 : ncpu > 64 ? 64 : (int)ncpu, started = 0, rc = 0;
	/* a tile each: at most 256 MiB of them, as spritefs-pack's decode ring */
	size_t tb = (size_t)s->info.h * s->info.w * s->info.c;
	while (nt > 1 && (size_t)nt * tb > (256u << 20))
		nt--;
	pthread_t tid[64];
	if (!c.why || !c.hw) {
		free(c.why);
		free(c.hw);
		return sprite_fail(err, -ENOMEM, "out of memory checking the files of %s", s->root);
	}
	for (; !c.oom && started < nt && (uint64_t)started < n; started++)
		if (pthread_create(&tid[started], NULL, check_worker, &c) != 0)
			break;
	if (!c.oom && started == 0 && n)
		check_worker(&c);
	for (int t = 0; t < started; t++)
		pthread_join(tid[t], NULL);
	if (c.oom)
		rc = sprite_fail(err, -ENOMEM, "out of memory checking the files of %s", s->root);
	char shown[192], msg[2 * SPRITE_ERR_MAX];
	uint64_t kept = 0;
	for (uint64_t i = 0; i < n; i++) {
		struct img_file *f = &fs->files[split][i];
		if (rc == 0 && !c.why[i] && fs->first &&
		    (c.hw[2 * i] != s->info.h || c.hw[2 * i + 1] != s->info.w)) {
			/* As spritefs-pack: stretching or cropping to whichever sorts first is a
			 * guess. */
			char first[96];
			sprite_escape(fs->first, first, sizeof first);
			sprite_escape(f->path, shown, sizeof shown);
			rc = sprite_fail(err, -EINVAL,
					 "images differ in size, %ux%u and %ux%u, and no --tile is "
					 "given (e.g. --tile 64x64x%u): %s is %ux%u, %s is %ux%u",
					 s->info.h, s->info.w, c.hw[2 * i], c.hw[2 * i + 1],
					 s->info.c, first, s->info.h, s->info.w, shown, c.hw[2 * i],
					 c.hw[2 * i + 1]);
		}
		if (rc == 0 && c.why[i] && fs->strict) {
			sprite_escape(f->path, shown, sizeof shown);
			rc = sprite_fail(err, -SPRITE_ECORRUPT,
					 "%s: %s (--strict stops at a file that does not decode)",
					 shown, c.why[i]);
		}
		/* kept unless skipped: images_close frees what is kept, also on an error */
		if (rc == 0 && c.why[i]) {
			s->nskipped++;
			if (fs->on_skip) {
				snprintf(msg, sizeof msg, "%s: %s",
					 sprite_escape(f->path, shown, sizeof shown), c.why[i]);
				fs->on_skip(fs->skip_ctx, msg);
			}
			free(f->path);
		} else {
			fs->files[split][kept++] = *f;
		}
		free(c.why[i]);
	}
	free(c.why);
	free(c.hw);
	fs->nfiles[split] = kept;
	s->info.full_count[split] = kept;
	return rc;
}

/*
 * Tile shape: given, or as a mount or spritefs-pack without a tile takes
 * it: that of the first training image that decodes, every image then
 * having to be that size (checked by check_split). A side over
 * HN_FOLDER_AUTO_SIDE is refused with the --tile to give: a model on whole
 * photographs would not fit.
 */
static int folder_tile(hn_source *s, const char *path, const struct hn_source_options *o, char *err)
{
	struct folder_src *fs = s->priv;
	int rc = 0;
	s->info.h = o->tile_h;
	s->info.w = o->tile_w;
	s->info.c = o->tile_c;
	if (!s->info.h || !s->info.w || !s->info.c) {
		struct sprite_image im = {0};
		uint64_t i = 0;
		while (i < s->info.full_count[0] &&
		       (rc = sprite_image_load(fs->files[0][i].path, &im, NULL)) < 0 &&
		       rc != -ENOMEM)
			i++;
		if (rc == -ENOMEM)
			return sprite_fail(err, rc, "%s: out of memory", path);
		if (i == s->info.full_count[0]) {
			/* every file named with why, as the check below would name them */
			for (uint64_t k = 0; fs->on_skip && k < s->info.full_count[0]; k++) {
				char why[SPRITE_ERR_MAX], shown[192], msg[2 * SPRITE_ERR_MAX];
				struct sprite_sample_spec one = {
					1, 1, 1, SPRITE_FIT_STRETCH, 1, fs->tree, fs->background};
				uint8_t px;
				if (sprite_sample_load(fs->files[0][k].path, &one, NULL, &px, NULL,
						       why) == 0)
					continue;
				snprintf(msg, sizeof msg, "%s: %s",
					 sprite_escape(fs->files[0][k].path, shown, sizeof shown),
					 why);
				s->nskipped++;
				fs->on_skip(fs->skip_ctx, msg);
			}
			return sprite_fail(err, -EINVAL,
					   "%s: no file of the training split decodes", path);
		}
		if (!s->info.c)
			s->info.c = im.c;
		if (!s->info.h || !s->info.w) {
			char shown[192];
			sprite_escape(fs->files[0][i].path, shown, sizeof shown);
			if (im.h > HN_FOLDER_AUTO_SIDE || im.w > HN_FOLDER_AUTO_SIDE) {
				sprite_image_free(&im);
				return sprite_fail(
					err, -EINVAL,
					"%s: no --tile given, and the first image (%s) is "
					"%ux%u: too large a tile to train on; give --tile "
					"64x64x%u (any HxWxC; --fit says how images become it)",
					path, shown, im.h, im.w, s->info.c);
			}
			s->info.h = im.h;
			s->info.w = im.w;
			fs->first = strdup(fs->files[0][i].path);
			if (!fs->first) {
				sprite_image_free(&im);
				return sprite_fail(err, -ENOMEM, "out of memory");
			}
		}
		sprite_image_free(&im);
	}
	return 0;
}

static int images_open(hn_source *s, const char *path, const struct hn_source_options *o, char *err)
{
	struct folder_src *fs = calloc(1, sizeof *fs);
	if (!fs)
		return sprite_fail(err, -ENOMEM, "out of memory");
	s->priv = fs;
	fs->tree = realpath(path, NULL); /* NULL: the listing's check alone */
	fs->strict = o->strict;
	fs->fit = o->fit;
	fs->background = o->background;
	fs->on_skip = o->on_skip;
	fs->on_ignore = o->on_ignore;
	fs->skip_ctx = o->skip_ctx;
	snprintf(s->info.kind, sizeof s->info.kind, "images");
	const char *base = strrchr(path, '/');
	snprintf(s->info.name, sizeof s->info.name, "%s", base && base[1] ? base + 1 : path);

	/*
	 * The tree as spritefs-pack lists it (common/folder.c). Entries outside
	 * the class folders are told for the top, then for each split this run
	 * reads, before its files.
	 */
	struct sprite_folder f;
	int rc = sprite_folder_list(path, &f, err);
	if (rc == 0)
		rc = ignore_entries(s, &f.outside, err);
	if (rc == 0 && f.nclasses == 0)
		rc = sprite_fail(err, -ENOENT,
				 "%s: no class folders (expected %s/<class>/<images> or "
				 "%s/train/<class>/<images>)",
				 path, path, path);
	else if (rc == 0 && f.nclasses > HN_MAX_CLASSES)
		rc = sprite_fail(err, -EINVAL, "%s: too many classes", path);
	else if (rc == 0)
		rc = hn_source_set_classes(s, (uint32_t)f.nclasses, (const char *const *)f.classes);

	/* The two splits this run uses. */
	int want_test = !hn_source_no_test(o->test_split);
	for (int k = 0; rc == 0 && k < 1 + want_test; k++) {
		const char *name = k == 0 ? o->train_split : o->test_split;
		size_t j = 0;
		while (j < f.nsplits && strcmp(f.splits[j].name, name))
			j++;
		if (j == f.nsplits) {
			if (k == 1 && !f.split_layout)
				break; /* class folders directly: no test split, train only */
			rc = sprite_fail(err, -ENOENT, "%s: no split folder \"%s\"%s", path, name,
					 k ? " (--test-split none trains without evaluation)" : "");
			break;
		}
		struct file_list fl = {0};
		struct walk_ctx wc = {&fl, s, err};
		rc = ignore_entries(s, &f.splits[j].outside, err);
		if (rc == 0)
			rc = sprite_folder_walk(&f, j, walk_file, walk_ignored, &wc, err);
		fs->files[k] = fl.v;
		fs->nfiles[k] = fl.n;
		s->info.full_count[k] = fl.n;
		if (rc == 0 && !(fs->bad[k] = calloc(fl.n ? fl.n : 1, 1)))
			rc = -ENOMEM;
	}
	sprite_folder_free(&f);
	if (rc < 0)
		return rc;
	if (s->info.full_count[0] == 0)
		return sprite_fail(err, -ENOENT, "%s: no image files in the training split", path);

	rc = folder_tile(s, path, o, err);
	if (rc < 0)
		return rc;
	/* Which files are samples, decided as spritefs-pack decides it. */
	double t0 = sprite_now();
	for (int k = 0; k < 2 && rc == 0; k++)
		rc = fs->files[k] ? check_split(s, k, err) : 0;
	if (rc < 0)
		return rc;
	if (s->info.full_count[0] == 0)
		return sprite_fail(err, -ENOENT, "%s: no file of the training split decodes", path);
	double checked = sprite_now() - t0;
	/* As spritefs-pack and a mount warn: a class with no sample in a split read. */
	uint64_t *per = o->on_note ? calloc(s->info.nclasses, sizeof *per) : NULL;
	for (int k = 0; per && k < 2 && fs->files[k]; k++) {
		memset(per, 0, s->info.nclasses * sizeof *per);
		for (uint64_t i = 0; i < fs->nfiles[k]; i++)
			per[fs->files[k][i].label]++;
		for (uint32_t c = 0; c < s->info.nclasses; c++) {
			char note[2 * HN_ERR_MAX];
			if (per[c])
				continue;
			snprintf(note, sizeof note, "class %s has no sample in split %s",
				 s->info.class_names[c], k ? o->test_split : o->train_split);
			o->on_note(o->note_ctx, note);
		}
	}
	free(per);
	hn_source_default_order(s);
	snprintf(s->describe, sizeof s->describe,
		 "image folder %s: %" PRIu64 " + %" PRIu64 " files decoded on the loader threads "
		 "(each checked once at open, %.1f s; %" PRIu64 " not samples)",
		 path, s->info.full_count[0], s->info.full_count[1], checked, s->nskipped);
	return 0;
}

/* The samples that decode, packed in idx order; returns how many. */
static int images_read(hn_source *s, const struct hn_batch *b, char *err)
{
	struct folder_src *fs = s->priv;
	int split = b->split, n = b->n, m = 0;
	const uint32_t *idx = b->idx;
	uint8_t *tiles = b->tiles;
	uint16_t *labels = b->labels;
	for (int k = 0; k < n; k++) {
		if (idx[k] >= s->info.full_count[split])
			return sprite_fail(err, -ERANGE, "%s: sample %u out of range", s->root,
					   idx[k]);
		int rc = image_sample(s, split, idx[k], tiles + (size_t)m * s->tile_bytes, err);
		if (rc < 0)
			return rc;
		if (rc == 0)
			labels[m++] = fs->files[split][idx[k]].label;
	}
	return m;
}

static void images_close(hn_source *s)
{
	struct folder_src *fs = s->priv;
	if (!fs)
		return;
	for (int k = 0; k < 2; k++) {
		for (uint64_t i = 0; fs->files[k] && i < fs->nfiles[k]; i++)
			free(fs->files[k][i].path);
		free(fs->files[k]);
		free(fs->bad[k]);
	}
	free(fs->first);
	free(fs->tree);
	free(fs);
	s->priv = NULL;
}

const struct hn_source_ops hn_source_folder_ops = {
	.name = "images",
	.open = images_open,
	.read = images_read,
	.close = images_close,
};
