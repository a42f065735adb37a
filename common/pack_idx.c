/*
 * pack_idx.c - pack a folder of IDX files (Fashion-MNIST's and MNIST's
 * train-images-idx3-ubyte and friends, plain or gzipped) into a sprite store,
 * for sprite_pack() (pack.c). The samples keep the files' order; the class
 * names are Fashion-MNIST's when the folder is that data set.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/image.h"
#include "common/pack_int.h"
#include "common/store.h"
#include "common/util.h"

/* Fashion-MNIST's names; "T-shirt/top" loses its '/' since class names are
 * folder names on the mount (store.c refuses '/'). */
static const char *const fmnist_classes[10] = {
	"T-shirt_top", "Trouser", "Pullover", "Dress", "Coat",
	"Sandal",      "Shirt",	  "Sneaker",  "Bag",   "Ankle boot",
};

/* Path of an IDX file in dir, plain or .gz, or NULL when neither exists. */
static char *idx_path(const char *dir, const char *base)
{
	char name[64];
	struct stat st;
	for (int gz = 0; gz < 2; gz++) {
		snprintf(name, sizeof name, "%s%s", base, gz ? ".gz" : "");
		char *p = sprite_path_join(dir, name);
		if (p && stat(p, &st) == 0 && S_ISREG(st.st_mode))
			return p;
		free(p);
	}
	return NULL;
}

int sprite_pack_is_idx(const char *src)
{
	char *a = idx_path(src, "train-images-idx3-ubyte");
	char *b = idx_path(src, "t10k-images-idx3-ubyte");
	int yes = a || b;
	free(a);
	free(b);
	return yes;
}

static int is_fashion(const char *src)
{
	char real[PATH_MAX];
	if (realpath(src, real) && !strcmp(real, SPRITE_FMNIST_DIR))
		return 1;
	const char *base = strrchr(real, '/');
	base = base ? base + 1 : real;
	for (const char *p = base; *p; p++)
		if (!strncasecmp(p, "fashion", 7))
			return 1;
	return 0;
}

static uint64_t file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

struct idx_split {
	const char *name;
	const char *file; /* the images file's name without .gz, for the path table */
	int64_t n;
	uint32_t h, w;
	uint8_t *px, *labels;
};

/*
 * The train and test IDX pairs found in src loaded into sp (*nsp of them;
 * the caller frees them, also after an error), the largest label in
 * *maxlabel, what was found counted in rep.
 */
static int load_splits(const char *src, struct idx_split sp[2], int *nsp, unsigned *maxlabel,
		       struct sprite_pack_report *rep, char *err)
{
	static const char *const bases[2][3] = {
		{"train", "train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
		{"test", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"},
	};
	for (int i = 0; i < 2; i++) {
		char *ip = idx_path(src, bases[i][1]);
		if (!ip)
			continue;
		char *lp = idx_path(src, bases[i][2]);
		if (!lp) {
			sprite_seterr(err, "%s: no matching %s[.gz] for %s", src, bases[i][2], ip);
			free(ip);
			return -ENOENT;
		}
		struct idx_split *s = &sp[(*nsp)++];
		s->name = bases[i][0];
		/* without .gz: the same samples give the same store either way */
		s->file = bases[i][1];
		s->n = sprite_idx_load_images(ip, &s->h, &s->w, &s->px, err);
		int64_t nl = s->n < 0 ? 0 : sprite_idx_load_labels(lp, &s->labels, err);
		rep->bytes_in += file_size(ip) + file_size(lp);
		if (s->n >= 0 && nl >= 0 && nl != s->n) {
			sprite_seterr(err, "%s holds %lld images but %s holds %lld labels", ip,
				      (long long)s->n, lp, (long long)nl);
			nl = -SPRITE_ECORRUPT;
		}
		free(ip);
		free(lp);
		if (s->n < 0 || nl < 0)
			return s->n < 0 ? (int)s->n : (int)nl;
		if (*nsp > 1 && (s->h != sp[0].h || s->w != sp[0].w))
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "%s: %s images are %ux%u but %s images are %ux%u", src,
					   s->name, s->h, s->w, sp[0].name, sp[0].h, sp[0].w);
		for (int64_t k = 0; k < s->n; k++)
			if (s->labels[k] > *maxlabel)
				*maxlabel = s->labels[k];
		rep->found += (uint64_t)s->n;
	}
	return 0;
}

int sprite_pack_idx(const char *src, const char *store, const struct sprite_pack_options *o,
		    const char *dsname, struct sprite_pack_report *rep, char *err)
{
	struct idx_split sp[2] = {{0}};
	char *names_buf = NULL;
	const char **names = NULL;
	uint8_t *tile = NULL;
	sprite_writer *w = NULL;
	int nsp = 0, r = 0;
	unsigned maxlabel = 0;

	r = load_splits(src, sp, &nsp, &maxlabel, rep, err);
	if (r < 0)
		goto out;
	if (rep->found == 0) {
		sprite_seterr(err, "%s: the IDX files hold no images", src);
		r = -ENODATA;
		goto out;
	}

	uint32_t nclasses;
	if (is_fashion(src)) {
		if (maxlabel >= 10) {
			sprite_seterr(err, "%s: label %u out of range for Fashion-MNIST", src,
				      maxlabel);
			r = -SPRITE_ECORRUPT;
			goto out;
		}
		nclasses = 10;
		names = malloc(nclasses * sizeof *names);
		if (!names)
			goto nomem;
		for (uint32_t i = 0; i < nclasses; i++)
			names[i] = fmnist_classes[i];
	} else {
		nclasses = maxlabel + 1;
		names = malloc(nclasses * sizeof *names);
		names_buf = malloc(nclasses * 12);
		if (!names || !names_buf)
			goto nomem;
		for (uint32_t i = 0; i < nclasses; i++) {
			snprintf(names_buf + 12 * i, 12, "%u", i);
			names[i] = names_buf + 12 * i;
		}
	}

	uint32_t th = o->tile_h ? o->tile_h : sp[0].h;
	uint32_t tw = o->tile_w ? o->tile_w : sp[0].w;
	uint32_t tc = o->tile_c ? o->tile_c : 1;
	struct sprite_writer_params wp = {
		.name = dsname,
		.tile_h = th,
		.tile_w = tw,
		.tile_c = tc,
		.sheet_tiles = o->sheet_tiles,
		.order_window = o->order_window,
		.version = o->store_version,
		.fit = o->fit,
		.codec = o->codec,
		.nclasses = nclasses,
		.class_names = names,
	};
	r = sprite_writer_open(store, &wp, &w, err);
	if (r < 0)
		prefix_err(err, store);
	if (r < 0)
		goto out;
	tile = malloc((size_t)th * tw * tc);
	if (!tile)
		goto nomem;
	if (o->progress)
		sprite_progress_start(o->progress, "pack", rep->found);
	for (int i = 0; i < nsp && r == 0; i++) {
		struct idx_split *s = &sp[i];
		if ((r = sprite_writer_begin_split(w, s->name)) < 0)
			break;
		size_t isz = (size_t)s->h * s->w;
		for (int64_t k = 0; k < s->n; k++) {
			struct sprite_image im = {s->h, s->w, 1, s->px + (size_t)k * isz};
			const uint8_t *t = im.px;
			if (th != s->h || tw != s->w || tc != 1) {
				if ((r = sprite_image_fit(&im, th, tw, tc, o->fit, tile)) < 0)
					break;
				t = tile;
			}
			/* path table: "<images file>#<index in it>" */
			char where[96];
			snprintf(where, sizeof where, "%s#%lld", s->file, (long long)k);
			if ((r = sprite_writer_add_path(w, t, s->labels[k], where)) < 0)
				break;
			rep->packed++;
			rep->split_count[i]++;
			if (o->progress && (k & 1023) == 1023) {
				sprite_progress_add(o->progress, 1024);
				sprite_progress_draw(o->progress);
			}
		}
	}
	if (r < 0) {
		sprite_seterr(err, "%s: write error: %s", store, strerror(-r));
		goto out;
	}
	r = sprite_writer_finish(w, err);
	if (r < 0)
		prefix_err(err, store);
	w = NULL;
	if (o->progress)
		sprite_progress_end(o->progress);
	goto out;
nomem:
	sprite_seterr(err, "out of memory");
	r = -ENOMEM;
out:
	sprite_writer_abort(w);
	for (int i = 0; i < 2; i++) {
		free(sp[i].px);
		free(sp[i].labels);
	}
	free(names);
	free(names_buf);
	free(tile);
	return r;
}
