/*
 * folder.c - the one listing of an ImageFolder tree (rule and contract in
 * folder.h), shared by spritefs-pack and hntrain's image folder source.
 *
 * Only the folders above the class folders are read by sprite_folder_list;
 * the files below them, which may be millions, are handed out one split at
 * a time by sprite_folder_walk, so a reader that uses two splits of many
 * never lists the others. What is passed over is kept as data rather than
 * told through a callback, so that each reader names it in its own order
 * (the packer all of it before decoding, hntrain split by split).
 */
#include "common/folder.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/format.h"
#include "common/store.h"
#include "common/util.h"

static int seterr(char *err, size_t errcap, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int seterr(char *err, size_t errcap, int rc, const char *fmt, ...)
{
	if (err && errcap) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errcap, fmt, ap);
		va_end(ap);
	}
	return rc;
}

int sprite_folder_entries_push(struct sprite_folder_entries *l, const char *path, int unreadable,
			       const char *why)
{
	if (l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 16;
		struct sprite_folder_entry *nv = realloc(l->v, ncap * sizeof *nv);
		if (!nv)
			return -ENOMEM;
		l->v = nv;
		l->cap = ncap;
	}
	struct sprite_folder_entry *e = &l->v[l->n];
	e->path = strdup(path);
	e->why = strdup(why);
	e->unreadable = unreadable;
	if (!e->path || !e->why) {
		free(e->path);
		free(e->why);
		return -ENOMEM;
	}
	l->n++;
	return 0;
}

void sprite_folder_entries_free(struct sprite_folder_entries *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].path);
		free(l->v[i].why);
	}
	free(l->v);
	memset(l, 0, sizeof *l);
}

static void free_names(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The visible folders of dir, in byte order, into *names; with outside, its
 * other entries too: a file is not in a class folder, the rest unreadable.
 * With root_real (the tree's root, resolved), a symbolic link that leads out
 * of the tree is not followed: left out, and named in outside.
 */
static int list_dir(const char *dir, const char *root_real, char ***names, size_t *count,
		    struct sprite_folder_entries *outside, char *err, size_t errcap)
{
	struct sprite_dirent **e;
	size_t ne, n = 0;
	char shown[SPRITE_ERR_MAX];
	int r = sprite_list_dir(dir, &e, &ne);
	if (r == -ENOMEM)
		return seterr(err, errcap, r, "out of memory listing %s",
			      sprite_escape(dir, shown, sizeof shown));
	if (r < 0)
		return seterr(err, errcap, r, "%s: cannot open: %s",
			      sprite_escape(dir, shown, sizeof shown), strerror(-r));
	char **v = calloc(ne ? ne : 1, sizeof *v);
	if (!v)
		r = -ENOMEM;
	for (size_t i = 0; r == 0 && i < ne; i++) {
		if (root_real && e[i]->link && e[i]->kind) {
			char *p = sprite_path_join(dir, e[i]->name);
			if (!p || sprite_path_inside(p, root_real) != 1) {
				r = !p	      ? -ENOMEM
				    : outside ? sprite_folder_entries_push(outside, p, 0,
									   SPRITE_FOLDER_LINK_OUT)
					      : 0;
				free(p);
				continue;
			}
			free(p);
		}
		if (e[i]->kind == 'd') {
			if (!(v[n++] = strdup(e[i]->name)))
				r = -ENOMEM;
		} else if (outside) {
			char *p = sprite_path_join(dir, e[i]->name);
			r = !p		 ? -ENOMEM
			    : e[i]->kind ? sprite_folder_entries_push(outside, p, 0,
								      SPRITE_FOLDER_OUTSIDE)
					 : sprite_folder_entries_push(outside, p, 1, e[i]->why);
			free(p);
		}
	}
	sprite_dirents_free(e, ne);
	if (r < 0) {
		free_names(v, n);
		return seterr(err, errcap, r, "out of memory listing %s",
			      sprite_escape(dir, shown, sizeof shown));
	}
	*names = v;
	*count = n;
	return 0;
}

static int is_split_name(const char *n)
{
	return !strcmp(n, "train") || !strcmp(n, "test") || !strcmp(n, "val") ||
	       !strcmp(n, "valid") || !strcmp(n, "validation");
}

/* Whether dir holds a visible folder (one that cannot be read holds none). */
static int has_subdir(const char *dir)
{
	char **v;
	size_t n;
	if (list_dir(dir, NULL, &v, &n, NULL, NULL, 0) < 0)
		return 0;
	free_names(v, n);
	return n > 0;
}

/* Add split (name, dir) to f, taking dir; its class folders listed, its other entries kept. */
static int add_split(struct sprite_folder *f, const char *name, char *dir, int list,
		     const char *root_real, char *err, size_t errcap)
{
	struct sprite_folder_split *sp = &f->splits[f->nsplits];
	memset(sp, 0, sizeof *sp);
	sp->dir = dir;
	sp->name = strdup(name);
	f->nsplits++;
	if (!sp->dir || !sp->name)
		return seterr(err, errcap, -ENOMEM, "out of memory");
	return list ? list_dir(dir, root_real, &sp->classes, &sp->nclasses, &sp->outside, err,
			       errcap)
		    : 0;
}

/* The sorted union of the class folders of every split. */
static int union_classes(struct sprite_folder *f, char *err, size_t errcap)
{
	size_t total = 0, u = 0;
	for (size_t k = 0; k < f->nsplits; k++)
		total += f->splits[k].nclasses;
	f->classes = calloc(total ? total : 1, sizeof *f->classes);
	if (!f->classes)
		return seterr(err, errcap, -ENOMEM, "out of memory");
	for (size_t k = 0; k < f->nsplits; k++)
		for (size_t i = 0; i < f->splits[k].nclasses; i++)
			f->classes[f->nclasses++] = f->splits[k].classes[i];
	sprite_sort(f->classes, f->nclasses, sizeof *f->classes, cmp_str);
	for (size_t i = 0; i < f->nclasses; i++)
		if (!u || strcmp(f->classes[u - 1], f->classes[i]))
			f->classes[u++] = f->classes[i];
	f->nclasses = u;
	for (size_t i = 0; i < u; i++) /* own copies: the splits keep theirs */
		if (!(f->classes[i] = strdup(f->classes[i]))) {
			f->nclasses = i;
			return seterr(err, errcap, -ENOMEM, "out of memory");
		}
	return 0;
}

int sprite_folder_list(const char *root, struct sprite_folder *f, char *err, size_t errcap)
{
	memset(f, 0, sizeof *f);
	char **top;
	size_t ntop;
	char *real = realpath(root, NULL); /* links below it must stay inside */
	if (!real) {
		int e = errno;
		char shown[SPRITE_ERR_MAX];
		return seterr(err, errcap, -e, "%s: cannot open: %s",
			      sprite_escape(root, shown, sizeof shown), strerror(e));
	}
	int r = list_dir(root, real, &top, &ntop, &f->outside, err, errcap);
	if (r < 0) {
		free(real);
		return r;
	}
	for (size_t i = 0; i < ntop && !f->split_layout; i++) {
		char *p = sprite_path_join(root, top[i]);
		f->split_layout = p && is_split_name(top[i]) && has_subdir(p);
		free(p);
	}
	f->splits = calloc(ntop + 1, sizeof *f->splits);
	f->bare = calloc(ntop + 1, sizeof *f->bare);
	if (!f->splits || !f->bare) {
		r = seterr(err, errcap, -ENOMEM, "out of memory");
	} else if (!f->split_layout) {
		/* The root is the split "train", its folders the classes. */
		r = add_split(f, "train", strdup(root), 0, real, err, errcap);
		if (r == 0) {
			f->splits[0].classes = top;
			f->splits[0].nclasses = ntop;
			top = NULL;
		}
	} else {
		/* "train" first, then the other split folders in byte order. */
		for (int pass = 0; pass < 2 && r == 0; pass++)
			for (size_t i = 0; i < ntop && r == 0; i++) {
				if ((pass == 0) != !strcmp(top[i], "train"))
					continue;
				char *p = sprite_path_join(root, top[i]);
				if (!p)
					r = seterr(err, errcap, -ENOMEM, "out of memory");
				else if (has_subdir(p))
					r = add_split(f, top[i], p, 1, real, err, errcap);
				else
					f->bare[f->nbare++] = p;
			}
	}
	free_names(top, ntop);
	free(real);
	return r < 0 ? r : union_classes(f, err, errcap);
}

/* sprite_walk_files' callbacks: the caller's, with the class's label. */
struct walk_ctx {
	int (*file)(void *ctx, char *path, uint16_t label);
	int (*ignored)(void *ctx, const char *path, int unreadable, const char *why);
	void *ctx;
	uint16_t label;
};

static int walk_file(void *ctx, char *path)
{
	struct walk_ctx *w = ctx;
	return w->file(w->ctx, path, w->label);
}

static int walk_ignored(void *ctx, const char *path, int unreadable, const char *why)
{
	struct walk_ctx *w = ctx;
	return w->ignored(w->ctx, path, unreadable, why);
}

int sprite_folder_walk(const struct sprite_folder *f, size_t k,
		       int (*file)(void *ctx, char *path, uint16_t label),
		       int (*ignored)(void *ctx, const char *path, int unreadable, const char *why),
		       void *ctx, char *err, size_t errcap)
{
	if (k >= f->nsplits)
		return -EINVAL;
	if (f->nclasses > SPRITE_MAX_CLASSES)
		return seterr(err, errcap, -E2BIG, "%zu classes, more than %u", f->nclasses,
			      SPRITE_MAX_CLASSES);
	const struct sprite_folder_split *sp = &f->splits[k];
	int r = 0;
	for (size_t i = 0; i < sp->nclasses && r == 0; i++) {
		char **hit = bsearch(&sp->classes[i], f->classes, f->nclasses, sizeof *f->classes,
				     cmp_str);
		char *p = sprite_path_join(sp->dir, sp->classes[i]);
		if (!p)
			return seterr(err, errcap, -ENOMEM, "out of memory");
		struct walk_ctx w = {file, ignored, ctx, (uint16_t)(hit - f->classes)};
		r = sprite_walk_files(p, walk_file, ignored ? walk_ignored : NULL, &w, err, errcap);
		free(p);
	}
	return r;
}

void sprite_folder_free(struct sprite_folder *f)
{
	for (size_t k = 0; f->splits && k < f->nsplits; k++) {
		free(f->splits[k].name);
		free(f->splits[k].dir);
		free_names(f->splits[k].classes, f->splits[k].nclasses);
		sprite_folder_entries_free(&f->splits[k].outside);
	}
	free(f->splits);
	free_names(f->classes, f->nclasses);
	free_names(f->bare, f->nbare);
	sprite_folder_entries_free(&f->outside);
	memset(f, 0, sizeof *f);
}
