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

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/format.h"
#include "common/store.h"
#include "common/util.h"

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
		    struct sprite_folder_entries *outside, char *err)
{
	struct sprite_dirent **e;
	size_t ne, n = 0;
	char shown[SPRITE_ERR_MAX];
	int r = sprite_list_dir(dir, &e, &ne);
	if (r == -ENOMEM)
		return sprite_fail(err, r, "out of memory listing %s",
				   sprite_escape(dir, shown, sizeof shown));
	if (r < 0)
		return sprite_fail(err, r, "%s: cannot open: %s",
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
		return sprite_fail(err, r, "out of memory listing %s",
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
	if (list_dir(dir, NULL, &v, &n, NULL, NULL) < 0)
		return 0;
	free_names(v, n);
	return n > 0;
}

/* Add split (name, dir) to f, taking dir; its class folders listed, its other entries kept. */
static int add_split(struct sprite_folder *f, const char *name, char *dir, int list,
		     const char *root_real, char *err)
{
	struct sprite_folder_split *sp = &f->splits[f->nsplits];
	memset(sp, 0, sizeof *sp);
	sp->dir = dir;
	sp->name = strdup(name);
	f->nsplits++;
	if (!sp->dir || !sp->name)
		return sprite_fail(err, -ENOMEM, "out of memory");
	return list ? list_dir(dir, root_real, &sp->classes, &sp->nclasses, &sp->outside, err) : 0;
}

/* The sorted union of the class folders of every split. */
static int union_classes(struct sprite_folder *f, char *err)
{
	size_t total = 0, u = 0;
	for (size_t k = 0; k < f->nsplits; k++)
		total += f->splits[k].nclasses;
	f->classes = calloc(total ? total : 1, sizeof *f->classes);
	if (!f->classes)
		return sprite_fail(err, -ENOMEM, "out of memory");
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
			return sprite_fail(err, -ENOMEM, "out of memory");
		}
	return 0;
}

int sprite_folder_list(const char *root, struct sprite_folder *f, char *err)
{
	memset(f, 0, sizeof *f);
	char **top;
	size_t ntop;
	char *real = realpath(root, NULL); /* links below it must stay inside */
	if (!real) {
		int e = errno;
		char shown[SPRITE_ERR_MAX];
		return sprite_fail(err, -e, "%s: cannot open: %s",
				   sprite_escape(root, shown, sizeof shown), strerror(e));
	}
	int r = list_dir(root, real, &top, &ntop, &f->outside, err);
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
		r = sprite_fail(err, -ENOMEM, "out of memory");
	} else if (!f->split_layout) {
		/* The root is the split "train", its folders the classes. */
		r = add_split(f, "train", strdup(root), 0, real, err);
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
					r = sprite_fail(err, -ENOMEM, "out of memory");
				else if (has_subdir(p))
					r = add_split(f, top[i], p, 1, real, err);
				else
					f->bare[f->nbare++] = p;
			}
	}
	free_names(top, ntop);
	free(real);
	return r < 0 ? r : union_classes(f, err);
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
		       void *ctx, char *err)
{
	if (k >= f->nsplits)
		return -EINVAL;
	if (f->nclasses > SPRITE_MAX_CLASSES)
		return sprite_fail(err, -E2BIG, "%zu classes, more than %u", f->nclasses,
				   SPRITE_MAX_CLASSES);
	const struct sprite_folder_split *sp = &f->splits[k];
	int r = 0;
	for (size_t i = 0; i < sp->nclasses && r == 0; i++) {
		char **hit = bsearch(&sp->classes[i], f->classes, f->nclasses, sizeof *f->classes,
				     cmp_str);
		char *p = sprite_path_join(sp->dir, sp->classes[i]);
		if (!p)
			return sprite_fail(err, -ENOMEM, "out of memory");
		struct walk_ctx w = {file, ignored, ctx, (uint16_t)(hit - f->classes)};
		r = sprite_walk_files(p, walk_file, ignored ? walk_ignored : NULL, &w, err);
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

/* ---- folder listing and walk ------------------------------------------- */

#define WALK_MAX_DEPTH 32

/* What an entry of a folder is, links followed: 'd', 'f', or 0 with why. */
static char entry_kind(int dfd, const char *name, unsigned char d_type, const char **why)
{
	struct stat st;
	if (d_type == DT_DIR)
		return 'd';
	if (d_type == DT_REG)
		return 'f';
	if (fstatat(dfd, name, &st, 0) < 0) {
		int e = errno;
		struct stat ls;
		*why = e == ENOENT && fstatat(dfd, name, &ls, AT_SYMLINK_NOFOLLOW) == 0 &&
				       S_ISLNK(ls.st_mode)
			       ? "a dangling symbolic link"
			       : strerror(e);
		return 0;
	}
	if (S_ISDIR(st.st_mode))
		return 'd';
	if (S_ISREG(st.st_mode))
		return 'f';
	*why = S_ISFIFO(st.st_mode)   ? "a FIFO, not a file or folder"
	       : S_ISSOCK(st.st_mode) ? "a socket, not a file or folder"
	       : S_ISCHR(st.st_mode)  ? "a character device, not a file or folder"
	       : S_ISBLK(st.st_mode)  ? "a block device, not a file or folder"
				      : "not a file or folder";
	return 0;
}

static int cmp_dirent(const void *a, const void *b)
{
	return strcmp((*(struct sprite_dirent *const *)a)->name,
		      (*(struct sprite_dirent *const *)b)->name);
}

void sprite_dirents_free(struct sprite_dirent **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

int sprite_list_dir(const char *dir, struct sprite_dirent ***out, size_t *count)
{
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	struct sprite_dirent **v = NULL;
	size_t n = 0, cap = 0;
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		const char *why = NULL;
		char kind = entry_kind(dirfd(d), de->d_name, de->d_type, &why);
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct sprite_dirent **nv = realloc(v, nc * sizeof *nv);
			if (!nv) {
				r = -ENOMEM;
				break;
			}
			v = nv;
			cap = nc;
		}
		/* why is kept in the entry: strerror's text may not outlive the next call */
		size_t l = strlen(de->d_name) + 1, wl = why ? strlen(why) + 1 : 0;
		struct sprite_dirent *e = malloc(sizeof *e + l + wl);
		if (!e) {
			r = -ENOMEM;
			break;
		}
		e->kind = kind;
		e->link = de->d_type == DT_LNK;
		if (de->d_type == DT_UNKNOWN) { /* file systems that do not fill d_type */
			struct stat ls;
			e->link = fstatat(dirfd(d), de->d_name, &ls, AT_SYMLINK_NOFOLLOW) == 0 &&
				  S_ISLNK(ls.st_mode);
		}
		memcpy(e->name, de->d_name, l);
		e->why = why ? memcpy(e->name + l, why, wl) : NULL;
		v[n++] = e;
	}
	closedir(d);
	if (r < 0) {
		sprite_dirents_free(v, n);
		return r;
	}
	sprite_sort(v, n, sizeof *v, cmp_dirent);
	*out = v;
	*count = n;
	return 0;
}

struct walk {
	const char *top_real; /* the walk's folder, resolved: links must stay inside */
	int (*file)(void *ctx, char *path);
	int (*ignored)(void *ctx, const char *path, int unreadable, const char *why);
	void *ctx;
	char *err;
	int depth;
	dev_t dev[WALK_MAX_DEPTH + 1];
	ino_t ino[WALK_MAX_DEPTH + 1];
};

static int walk_fail(struct walk *w, const char *dir, int e, const char *what, const char *detail)
{
	char shown[1024];
	return sprite_fail(w->err, -e, "%s: %s%s", sprite_escape(dir, shown, sizeof shown), what,
			   detail);
}

static int walk_dir(struct walk *w, const char *dir)
{
	struct stat st;
	if (stat(dir, &st) < 0)
		return walk_fail(w, dir, errno, "cannot open: ", strerror(errno));
	for (int k = 0; k < w->depth; k++)
		if (w->dev[k] == st.st_dev && w->ino[k] == st.st_ino)
			return w->ignored ? w->ignored(w->ctx, dir, 0, SPRITE_WALK_LOOP) : 0;
	if (w->depth > WALK_MAX_DEPTH)
		return walk_fail(w, dir, ELOOP, "folders nested too deep", "");
	struct sprite_dirent **v = NULL;
	size_t n = 0;
	int r = sprite_list_dir(dir, &v, &n);
	if (r == -ENOMEM)
		return walk_fail(w, dir, ENOMEM, "out of memory listing the folder", "");
	if (r < 0)
		return walk_fail(w, dir, -r, "cannot open: ", strerror(-r));
	w->dev[w->depth] = st.st_dev;
	w->ino[w->depth] = st.st_ino;
	w->depth++;
	for (size_t i = 0; i < n && r == 0; i++) {
		char *p = sprite_path_join(dir, v[i]->name);
		if (!p)
			r = walk_fail(w, dir, ENOMEM, "out of memory listing the folder", "");
		else if (v[i]->link && v[i]->kind && sprite_path_inside(p, w->top_real) != 1) {
			if (w->ignored)
				r = w->ignored(w->ctx, p, 0, SPRITE_WALK_OUTSIDE);
		} else if (v[i]->kind == 'd')
			r = walk_dir(w, p);
		else if (v[i]->kind == 'f') {
			r = w->file(w->ctx, p);
			continue; /* p is the callee's now */
		} else if (w->ignored)
			r = w->ignored(w->ctx, p, 1, v[i]->why);
		free(p);
	}
	w->depth--;
	sprite_dirents_free(v, n);
	if (r == -ENOMEM && w->err && !w->err[0])
		walk_fail(w, dir, ENOMEM, "out of memory listing the folder", "");
	return r;
}

int sprite_walk_files(const char *dir, int (*file)(void *ctx, char *path),
		      int (*ignored)(void *ctx, const char *path, int unreadable, const char *why),
		      void *ctx, char *err)
{
	if (err)
		err[0] = 0;
	char *real = realpath(dir, NULL);
	if (!real) {
		int e = errno;
		char shown[1024];
		return sprite_fail(err, -e, "%s: cannot open: %s",
				   sprite_escape(dir, shown, sizeof shown), strerror(e));
	}
	struct walk w = {real, file, ignored, ctx, err, 0, {0}, {0}};
	int r = walk_dir(&w, dir);
	free(real);
	return r;
}

/* Whether the resolved path real lies inside (or is) the resolved folder top_real. */
static int real_inside(const char *real, const char *top_real)
{
	size_t n = strlen(top_real);
	if (n == 1 && top_real[0] == '/')
		return real[0] == '/';
	return !strncmp(real, top_real, n) && (real[n] == '/' || !real[n]);
}

int sprite_fd_inside(int fd, const char *top_real)
{
	char link[64], real[PATH_MAX];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, real, sizeof real - 1);
	if (n < 0)
		return -errno;
	real[n] = 0;
	return real_inside(real, top_real);
}

int sprite_path_inside(const char *path, const char *top_real)
{
	char *real = realpath(path, NULL);
	if (!real)
		return -errno;
	int in = real_inside(real, top_real);
	free(real);
	return in;
}
