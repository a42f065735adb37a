/*
 * pack.c - turn an ImageFolder tree or a folder of IDX files into a sprite
 * store (contract in pack.h); the IDX files' path is in pack_idx.c.
 *
 * The source is listed first (names sorted bytewise at every level, hidden
 * entries ignored, other entries that are not images of a class folder kept
 * for on_ignore), so the sample order is fixed before any decoding starts.
 * Decoding then runs on `jobs` worker threads over a ring of tile slots:
 * workers claim small chunks of items in order and decode each into its
 * slot; the calling thread consumes slots strictly in item order, hands good
 * tiles to the store writer and bad ones to on_skip. The store bytes are thus
 * the same whatever the number of jobs, the memory held is bounded by the ring
 * (not the data set), and the writer (lz4, I/O) overlaps with decoding.
 */
#include "common/pack.h"
#include "common/safe_open.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/folder.h"
#include "common/image.h"
#include "common/pack_int.h"
#include "common/sample.h"
#include "common/store.h"
#include "common/util.h"

#define PACK_RING_BYTES (256u << 20) /* tile memory of the decode ring */
#define PACK_RING_MAX	2048u

/* ---- listing ----------------------------------------------------------- */

struct item {
	char *path;
	uint32_t split; /* index into the source's split list */
	uint16_t label;
};

struct items {
	struct item *v;
	size_t n, cap;
};

static int items_push(struct items *it, char *path, uint32_t split, uint16_t label)
{
	if (it->n == it->cap) {
		size_t ncap = it->cap ? it->cap * 2 : 1024;
		struct item *nv = realloc(it->v, ncap * sizeof *nv);
		if (!nv)
			return -ENOMEM;
		it->v = nv;
		it->cap = ncap;
	}
	it->v[it->n++] = (struct item){path, split, label};
	return 0;
}

/*
 * The tree as common/folder.c lists it, its files in store order, and the
 * entries that are not packed, in the order on_ignore is told them before
 * decoding starts: files outside the class folders, the folders beside the
 * splits that hold none, then what the walk of each split passed over.
 */
struct source {
	struct sprite_folder f;
	struct items items;
	struct sprite_folder_entries ignored;
};

/* sprite_folder_walk's callbacks: files become items of one split. */
struct walk_ctx {
	struct source *s;
	uint32_t split;
};

static int walk_item(void *ctx, char *path, uint16_t label)
{
	struct walk_ctx *c = ctx;
	int r = items_push(&c->s->items, path, c->split, label);
	if (r < 0)
		free(path);
	return r;
}

static int walk_ignored(void *ctx, const char *path, int unreadable, const char *why)
{
	struct walk_ctx *c = ctx;
	return sprite_folder_entries_push(&c->s->ignored, path, unreadable, why);
}

static void source_free(struct source *s)
{
	sprite_folder_free(&s->f);
	sprite_folder_entries_free(&s->ignored);
	for (size_t i = 0; i < s->items.n; i++)
		free(s->items.v[i].path);
	free(s->items.v);
}

/* Append the entries of l to the ignored list. */
static int pass_over(struct source *s, const struct sprite_folder_entries *l)
{
	int r = 0;
	for (size_t i = 0; i < l->n && r == 0; i++)
		r = sprite_folder_entries_push(&s->ignored, l->v[i].path, l->v[i].unreadable,
					       l->v[i].why);
	return r;
}

static int list_folder(const char *src, struct source *s, char *err)
{
	const struct sprite_folder *f = &s->f;
	int r = sprite_folder_list(src, &s->f, err);
	/* What a store can hold: split names and splits. */
	for (size_t k = 0; k < f->nsplits && r == 0; k++) {
		char shown[SPRITE_ERR_MAX];
		if (strlen(f->splits[k].name) >= SPRITE_SPLIT_NAME_MAX) {
			sprite_seterr(err, "%s: split name longer than %u bytes",
				      sprite_escape(f->splits[k].dir, shown, sizeof shown),
				      SPRITE_SPLIT_NAME_MAX - 1);
			r = -ENAMETOOLONG;
		} else if (k == SPRITE_MAX_SPLITS) {
			sprite_seterr(err, "%s: more than %u splits", src, SPRITE_MAX_SPLITS);
			r = -E2BIG;
		}
	}
	if (r == 0 && f->nclasses > SPRITE_MAX_CLASSES) {
		sprite_seterr(err, "%s: %zu classes, more than %u", src, f->nclasses,
			      SPRITE_MAX_CLASSES);
		r = -E2BIG;
	}
	if (r == 0)
		r = pass_over(s, &f->outside);
	for (size_t i = 0; i < f->nbare && r == 0; i++)
		r = sprite_folder_entries_push(&s->ignored, f->bare[i], 0,
					       SPRITE_FOLDER_NO_CLASSES);
	for (size_t k = 0; k < f->nsplits && r == 0; k++)
		r = pass_over(s, &f->splits[k].outside);
	if (r == -ENOMEM)
		sprite_seterr(err, "out of memory");
	for (size_t k = 0; k < f->nsplits && r == 0; k++) {
		struct walk_ctx wc = {s, (uint32_t)k};
		r = sprite_folder_walk(f, k, walk_item, walk_ignored, &wc, err);
	}
	return r;
}

/* ---- the decode ring ------------------------------------------------- */

struct slot {
	int ready;     /* decoded (or failed) and not yet consumed */
	int bad;       /* why says what is wrong; tile is garbage */
	int oom;       /* out of memory: the pack fails (whether a file is a sample never
			  depends on the memory free) */
	uint64_t size; /* source bytes */
	uint32_t h, w; /* the decoded image's size */
	char why[SPRITE_ERR_MAX];
};

struct ring {
	pthread_mutex_t mu;
	pthread_cond_t cv_ready, cv_space;
	const struct items *items;
	uint32_t th, tw, tc;
	enum sprite_fit fit;
	uint32_t background;
	int one_size; /* no tile size given: images are decoded whole, to be compared */
	char *tree;   /* the source's real path: files opened outside it are refused */
	size_t tile_bytes;
	size_t nslots, chunk;
	uint8_t *tiles;
	struct slot *slots;
	size_t next;	 /* first unclaimed item */
	size_t consumed; /* items the writer has taken */
	int stop;
};

/* Decode item i into its slot, by the rule packer and hntrain share (common/sample.h). */
static void decode_item(struct ring *R, struct sprite_sample_buf *wb, size_t i)
{
	struct slot *sl = &R->slots[i % R->nslots];
	uint8_t *tile = R->tiles + (i % R->nslots) * R->tile_bytes;
	/* A scaled decode could make a larger JPEG look the size of the others. */
	struct sprite_sample_spec spec = {R->th,       R->tw,	R->tc,	      R->fit,
					  R->one_size, R->tree, R->background};
	struct sprite_sample_got got;
	int r = sprite_sample_load(R->items->v[i].path, &spec, wb, tile, &got, sl->why);
	sl->bad = r < 0;
	sl->oom = r == -ENOMEM;
	sl->size = got.bytes;
	sl->h = got.h;
	sl->w = got.w;
}

static void *worker(void *arg)
{
	struct ring *R = arg;
	struct sprite_sample_buf wb = {0};
	size_t n = R->items->n;
	pthread_mutex_lock(&R->mu);
	for (;;) {
		while (!R->stop && R->next < n && R->next >= R->consumed + R->nslots)
			pthread_cond_wait(&R->cv_space, &R->mu);
		if (R->stop || R->next >= n)
			break;
		size_t j = R->next, k = R->chunk;
		if (k > n - j)
			k = n - j;
		if (k > R->consumed + R->nslots - j)
			k = R->consumed + R->nslots - j;
		R->next = j + k;
		pthread_mutex_unlock(&R->mu);
		for (size_t i = j; i < j + k; i++)
			decode_item(R, &wb, i);
		pthread_mutex_lock(&R->mu);
		for (size_t i = j; i < j + k; i++)
			R->slots[i % R->nslots].ready = 1;
		pthread_cond_signal(&R->cv_ready);
	}
	pthread_mutex_unlock(&R->mu);
	free(wb.data);
	return NULL;
}

static int online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

/* Shape of the first image that decodes (its index in *at), or 0 when none does. */
static int probe_shape(const struct items *it, uint32_t *h, uint32_t *w, uint32_t *c, size_t *at)
{
	for (size_t i = 0; i < it->n; i++) {
		struct sprite_image im;
		if (sprite_image_load(it->v[i].path, &im, NULL) == 0) {
			*h = im.h;
			*w = im.w;
			*c = im.c;
			*at = i;
			sprite_image_free(&im);
			return 1;
		}
	}
	return 0;
}

/* path below src, as the path table keeps it (common/folder.c joins with '/') */
static const char *rel_path(const char *src, const char *path)
{
	size_t n = strlen(src);
	if (strncmp(path, src, n) != 0)
		return path;
	path += n;
	while (*path == '/')
		path++;
	return path;
}

/* One pack of a folder: what its steps share. */
struct packing {
	const char *src, *store;
	const struct sprite_pack_options *o;
	struct sprite_pack_report *rep;
	char *err;
	struct source s;
	struct ring R;
	sprite_writer *w;
	size_t first;			/* the item whose size the others must have (R.one_size) */
	int64_t cur_split, store_split; /* the source's split being written, the store's */
};

/* The entries of the tree that are not samples: counted and told, or the end with --strict. */
static int take_ignored(struct packing *p)
{
	for (size_t i = 0; i < p->s.ignored.n; i++) {
		const struct sprite_folder_entry *e = &p->s.ignored.v[i];
		if (e->unreadable && p->o->strict) {
			char shown[SPRITE_ERR_MAX];
			return sprite_fail(p->err, -SPRITE_ECORRUPT, "stopped at %s: %s (--strict)",
					   sprite_escape(e->path, shown, sizeof shown), e->why);
		}
		p->rep->ignored++;
		if (p->o->on_ignore)
			p->o->on_ignore(p->o->ctx, e->path, e->why);
	}
	return 0;
}

/* The tile shape (given, or the first image's) and the store's writer opened for it. */
static int open_store(struct packing *p, const char *dsname)
{
	const struct sprite_pack_options *o = p->o;
	struct ring *R = &p->R;
	uint32_t h = 0, wd = 0, c = 0;
	/* No tile size given: every image must have the first one's (checked as they come). */
	int one_size = !o->tile_h || !o->tile_w;
	if (!o->tile_h || !o->tile_w || !o->tile_c) {
		if (!probe_shape(&p->s.items, &h, &wd, &c, &p->first)) {
			h = wd = c = 1; /* nothing decodes: the loop reports every file */
			one_size = 0;
		}
	}
	R->th = o->tile_h ? o->tile_h : h;
	R->tw = o->tile_w ? o->tile_w : wd;
	R->tc = o->tile_c ? o->tile_c : c;
	R->fit = o->fit;
	R->background = o->background;
	R->one_size = one_size;
	R->tree = realpath(p->src, NULL); /* NULL (out of memory): the listing's check alone */
	R->tile_bytes = (size_t)R->th * R->tw * R->tc;

	const struct sprite_folder *f = &p->s.f;
	const char **cn = malloc((f->nclasses ? f->nclasses : 1) * sizeof *cn);
	if (!cn)
		return sprite_fail(p->err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < f->nclasses; i++)
		cn[i] = f->classes[i];
	struct sprite_writer_params wp = {
		.name = dsname,
		.tile_h = R->th,
		.tile_w = R->tw,
		.tile_c = R->tc,
		.sheet_tiles = o->sheet_tiles,
		.order_window = o->order_window,
		.version = o->store_version,
		.fit = o->fit,
		.background = (o->background >> 24) == 1 ? o->background : SPRITE_BG_STORED,
		.codec = o->codec,
		.nclasses = (uint32_t)f->nclasses,
		.class_names = cn,
	};
	int r = sprite_writer_open(p->store, &wp, &p->w, p->err);
	/* EINVAL: a class name or shape from the source, which is what to name. */
	if (r < 0)
		prefix_err(p->err, r == -EINVAL ? p->src : p->store);
	free(cn);
	return r;
}

/* The ring's slots and lock for jobs decoders (threads not started yet). */
static int make_ring(struct packing *p, int jobs)
{
	struct ring *R = &p->R;
	size_t slots = PACK_RING_BYTES / (R->tile_bytes ? R->tile_bytes : 1);
	if (slots > PACK_RING_MAX)
		slots = PACK_RING_MAX;
	if (slots < (size_t)jobs * 2)
		slots = (size_t)jobs * 2;
	R->nslots = slots;
	R->chunk = slots / (4 * (size_t)jobs);
	if (R->chunk < 1)
		R->chunk = 1;
	if (R->chunk > 16)
		R->chunk = 16;
	R->items = &p->s.items;
	R->tiles = malloc(slots * R->tile_bytes);
	R->slots = calloc(slots, sizeof *R->slots);
	if (!R->tiles || !R->slots)
		return sprite_fail(p->err, -ENOMEM, "out of memory for %zu tiles of %zu bytes",
				   slots, R->tile_bytes);
	return 0;
}

/*
 * Item i, decoded in slot sl, into the store (or the skipped list, or the
 * end of the pack); r is the pack's state so far: after an error only the
 * counting goes on. Returns the new state.
 */
static int store_item(struct packing *p, size_t i, const struct slot *sl, int r)
{
	const struct sprite_pack_options *o = p->o;
	struct sprite_pack_report *rep = p->rep;
	const struct ring *R = &p->R;
	const struct item *it = &p->s.items.v[i];
	char shown[SPRITE_ERR_MAX];
	rep->bytes_in += sl->size;
	if (sl->oom)
		return sprite_fail(p->err, -ENOMEM, "%s: %s",
				   sprite_escape(it->path, shown, sizeof shown), sl->why);
	if (sl->bad && o->strict) /* Not skipped: the pack ends here, and err says so. */
		return sprite_fail(p->err, -SPRITE_ECORRUPT, "stopped at %s: %s (--strict)",
				   sprite_escape(it->path, shown, sizeof shown), sl->why);
	if (sl->bad) {
		rep->skipped++;
		if (o->on_skip)
			o->on_skip(o->ctx, it->path, sl->why);
		/* the store names it too (its skipped list) */
		if (r == 0 &&
		    sprite_writer_add_skipped(p->w, rel_path(p->src, it->path), sl->why) < 0)
			return sprite_fail(p->err, -ENOMEM, "out of memory for the skipped list");
		return r;
	}
	if (r < 0)
		return r;
	if (R->one_size && (sl->h != R->th || sl->w != R->tw)) {
		/*
		 * Stretching or cropping every image to whichever sorts
		 * first would be a guess: say what differs and what to pass.
		 */
		char a[SPRITE_ERR_MAX];
		sprite_escape(p->s.items.v[p->first].path, a, sizeof a);
		sprite_escape(it->path, shown, sizeof shown);
		return sprite_fail(p->err, -EINVAL,
				   "images differ in size, %ux%u and %ux%u, and no tile size is "
				   "given (spritefs-pack --tile HxWxC, spritefs -o tile=HxWxC; "
				   "e.g. 64x64x3): %s is %ux%u, %s is %ux%u",
				   R->th, R->tw, sl->h, sl->w, a, R->th, R->tw, shown, sl->h,
				   sl->w);
	}
	if ((int64_t)it->split != p->cur_split) {
		p->cur_split = it->split;
		p->store_split++;
		r = sprite_writer_begin_split(p->w, p->s.f.splits[it->split].name);
	}
	if (r == 0)
		r = sprite_writer_add_path(p->w, R->tiles + (i % R->nslots) * R->tile_bytes,
					   it->label, rel_path(p->src, it->path));
	if (r < 0)
		return sprite_fail(p->err, r, "%s: write error: %s", p->store, strerror(-r));
	rep->packed++;
	rep->split_count[p->store_split]++;
	return 0;
}

/* Every item, in order, from the decoders' ring into the store. */
static int write_items(struct packing *p)
{
	struct ring *R = &p->R;
	const struct sprite_pack_options *o = p->o;
	int r = 0;
	for (size_t i = 0; i < p->s.items.n; i++) {
		struct slot *sl = &R->slots[i % R->nslots];
		pthread_mutex_lock(&R->mu);
		while (!sl->ready)
			pthread_cond_wait(&R->cv_ready, &R->mu);
		pthread_mutex_unlock(&R->mu);

		r = store_item(p, i, sl, r);

		pthread_mutex_lock(&R->mu);
		sl->ready = 0;
		R->consumed = i + 1;
		if (r < 0)
			R->stop = 1;
		pthread_cond_broadcast(&R->cv_space);
		pthread_mutex_unlock(&R->mu);
		if (o->progress) {
			sprite_progress_add(o->progress, 1);
			if ((i & 255) == 0)
				sprite_progress_draw(o->progress);
		}
		if (r < 0)
			break;
	}
	return r;
}

static int pack_folder(const char *src, const char *store, const struct sprite_pack_options *o,
		       const char *dsname, struct sprite_pack_report *rep, char *err)
{
	struct packing p = {.src = src,
			    .store = store,
			    .o = o,
			    .rep = rep,
			    .err = err,
			    .cur_split = -1,
			    .store_split = -1};
	struct ring *R = &p.R;
	pthread_t *tids = NULL;
	int nthreads = 0, r;

	r = list_folder(src, &p.s, err);
	if (r == 0)
		r = take_ignored(&p);
	if (r < 0)
		goto out;
	rep->found = p.s.items.n;
	if (p.s.items.n == 0) {
		r = sprite_fail(err, -ENODATA,
				"%s: no images found (expected %s/<class>/<image> or "
				"%s/<split>/<class>/<image>, or IDX files)",
				src, src, src);
		goto out;
	}
	r = open_store(&p, dsname);
	if (r < 0)
		goto out;

	int jobs = o->jobs > 0 ? o->jobs : online_cpus();
	if (jobs > 256)
		jobs = 256;
	r = make_ring(&p, jobs);
	tids = calloc((size_t)jobs, sizeof *tids);
	if (r == 0 && !tids)
		r = sprite_fail(err, -ENOMEM, "out of memory");
	if (r < 0)
		goto out;
	pthread_mutex_init(&R->mu, NULL);
	pthread_cond_init(&R->cv_ready, NULL);
	pthread_cond_init(&R->cv_space, NULL);
	for (; nthreads < jobs; nthreads++) {
		if (pthread_create(&tids[nthreads], NULL, worker, R) != 0)
			break;
	}
	if (nthreads == 0) {
		r = sprite_fail(err, -EAGAIN, "cannot start decode threads");
		goto out_sync;
	}
	if (o->progress)
		sprite_progress_start(o->progress, "pack", p.s.items.n);
	r = write_items(&p);

out_sync:
	pthread_mutex_lock(&R->mu);
	R->stop = 1;
	pthread_cond_broadcast(&R->cv_space);
	pthread_mutex_unlock(&R->mu);
	for (int i = 0; i < nthreads; i++)
		pthread_join(tids[i], NULL);
	pthread_cond_destroy(&R->cv_ready);
	pthread_cond_destroy(&R->cv_space);
	pthread_mutex_destroy(&R->mu);
	if (o->progress)
		sprite_progress_end(o->progress);
	if (r == 0 && rep->packed == 0)
		r = sprite_fail(err, -ENODATA, "%s: none of the %llu files is a usable image", src,
				(unsigned long long)rep->found);
	if (r == 0) {
		r = sprite_writer_finish(p.w, err);
		if (r < 0)
			prefix_err(err, store);
		p.w = NULL;
	}
out:
	sprite_writer_abort(p.w);
	free(tids);
	free(R->tiles);
	free(R->slots);
	free(R->tree);
	source_free(&p.s);
	return r;
}

/*
 * What would only fail at the final rename, or after the source is listed
 * and its first image decoded, fails here at once: STORE a folder, or its
 * folder missing or not writable.
 */
static int check_store_path(const char *store, char *err)
{
	struct stat st;
	if (stat(store, &st) == 0 && S_ISDIR(st.st_mode)) {
		sprite_seterr(err, "%s: is a folder (give the path of the store file to write)",
			      store);
		return -EISDIR;
	}
	char *dir = strdup(store);
	if (!dir) {
		sprite_seterr(err, "out of memory");
		return -ENOMEM;
	}
	char *slash = strrchr(dir, '/');
	const char *d = slash ? (slash == dir ? "/" : (*slash = 0, dir)) : ".";
	int r = 0;
	if (stat(d, &st) < 0) {
		r = -errno;
		sprite_seterr(err, "%s: the folder %s: %s", store, d, strerror(-r));
	} else if (!S_ISDIR(st.st_mode)) {
		r = -ENOTDIR;
		sprite_seterr(err, "%s: %s is not a folder", store, d);
	} else if (access(d, W_OK | X_OK) < 0) {
		r = -errno;
		sprite_seterr(err, "%s: cannot write in the folder %s: %s", store, d, strerror(-r));
	} else {
		r = sprite_outfile_check(store, err); /* not a folder anyone may swap files in */
	}
	free(dir);
	return r;
}

int sprite_pack(const char *source, const char *store, const struct sprite_pack_options *o,
		struct sprite_pack_report *rep, char *err)
{
	struct sprite_pack_options defaults = {0};
	struct sprite_pack_report local;
	if (!o)
		o = &defaults;
	if (!rep)
		rep = &local;
	memset(rep, 0, sizeof *rep);
	if (!source || !store) {
		sprite_seterr(err, "no source or store given");
		return -EINVAL;
	}
	if ((o->tile_h > SPRITE_MAX_TILE_SIDE || o->tile_w > SPRITE_MAX_TILE_SIDE ||
	     o->tile_c > SPRITE_MAX_CHANNELS) ||
	    (o->tile_c && o->tile_c != 1 && o->tile_c != 3 && o->tile_c != 4)) {
		sprite_seterr(err, "bad tile shape %ux%ux%u (sides up to %u, channels 1, 3 or 4)",
			      o->tile_h, o->tile_w, o->tile_c, SPRITE_MAX_TILE_SIDE);
		return -EINVAL;
	}
	if ((uint32_t)o->fit > SPRITE_FIT_PAD) {
		sprite_seterr(err, "unknown fit mode %u", (unsigned)o->fit);
		return -EINVAL;
	}
	if (o->name && strlen(o->name) >= SPRITE_NAME_MAX) {
		sprite_seterr(err, "data set name of %zu bytes: a store holds at most %u",
			      strlen(o->name), SPRITE_NAME_MAX - 1);
		return -ENAMETOOLONG;
	}
	struct stat st;
	if (stat(source, &st) < 0) {
		int e = errno;
		sprite_seterr(err, "%s: %s", source, strerror(e));
		return -e;
	}
	if (!S_ISDIR(st.st_mode)) {
		sprite_seterr(err,
			      "%s: not a folder (give an image folder or a folder of IDX files)",
			      source);
		return -ENOTDIR;
	}

	int r = check_store_path(store, err);
	if (r < 0)
		return r;

	char dsname[SPRITE_NAME_MAX], real[PATH_MAX];
	const char *nm = o->name;
	if (!nm) {
		const char *b = realpath(source, real) ? real : source;
		const char *slash = strrchr(b, '/');
		nm = slash && slash[1] ? slash + 1 : b;
	}
	/* A longer folder name is cut to what the header holds, between characters. */
	size_t nl = sprite_utf8_cut(nm, SPRITE_NAME_MAX - 1);
	memcpy(dsname, nm, nl);
	dsname[nl] = 0;

	double t0 = sprite_now();
	r = sprite_pack_is_idx(source) ? sprite_pack_idx(source, store, o, dsname, rep, err)
				       : pack_folder(source, store, o, dsname, rep, err);
	rep->seconds = sprite_now() - t0;
	if (r == 0 && stat(store, &st) == 0)
		rep->bytes_out = (uint64_t)st.st_size;
	return r;
}
