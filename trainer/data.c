/*
 * data.c - hntrain's data sources: store file, spritefs mount, image
 * folder, IDX folder, and the in-memory copy made by --preload.
 *
 * Every source answers one question, "give me samples idx[0..n) of this
 * split", so that the loader threads, the seeded order and the weights are
 * the same whatever the medium; only the cost of answering differs, which is
 * exactly what hntrain measures. The mount is read with open/pread only
 * (never through fs/ code), as any other trainer would read it. Everything a
 * file says (npy headers, JSON, IDX sizes, store fields) is checked before
 * use: the store reader validates its own metadata, the rest is done here.
 */
#include "trainer/data.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/batch.h"
#include "common/folder.h"
#include "common/image.h"
#include "common/perm.h"
#include "common/store.h"
#include "common/util.h"

enum src_kind { SRC_STORE, SRC_MOUNT, SRC_IMAGES, SRC_IDX, SRC_MEMORY };

/* A decoded store sheet held by the cache; ref > 0 pins it. */
struct sheet_slot {
	uint8_t *raw;
	struct sprite_batch b;
	int state; /* 0 absent, 1 being read, 2 ready */
	int ref;
	uint64_t last_use;
};

/* An image file of the ImageFolder tree. */
struct img_file {
	char *path;
	uint16_t label;
};

struct hn_source {
	enum src_kind kind;
	struct hn_source_info info;
	char describe[512];
	size_t tile_bytes;

	/* store */
	sprite_store *store;
	int store_split[2];
	struct sheet_slot *sheets;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t use_clock, cache_used, cache_budget;

	/* mount */
	char root[4096];
	int img_fd[2], lab_fd[2]; /* images through the page cache; labels exact */
	int img_xfd[2];		  /* images exact: retries a range next to a bad sheet */
	uint64_t img_off[2], lab_off[2];
	int lab_size[2]; /* bytes per label in labels.npy: 1, 2, 4 or 8 */
	int epochs_dir;	 /* the mount offers <split>/epochs */
	uint64_t seed;
	uint32_t batch;
	int use_views; /* epoch views match this run (no --limit, same batch and order) */
	int views_off; /* a view did not open: gather from then on (atomic) */
	void (*on_note)(void *ctx, const char *note);
	void *note_ctx;
	int views_match;      /* dataset.json says the views use our batch and order */
	uint32_t view_batch;  /* the mount's epoch view batch size */
	uint64_t view_epochs; /* views exist for epochs below this */
	char train_split[SPRITE_SPLIT_NAME_MAX + 1], test_split[SPRITE_SPLIT_NAME_MAX + 1];

	/* images */
	struct img_file *files[2];
	uint64_t nfiles[2]; /* --preload shrinks the counts to the files that decode */
	uint8_t *bad[2];    /* per file: did not decode, skipped from then on */
	uint64_t nbad;	    /* files in bad[], atomic */
	int strict;
	void (*on_skip)(void *ctx, const char *why);
	void (*on_ignore)(void *ctx, const char *path, const char *why);
	void *skip_ctx;
	uint64_t nignored; /* entries of the tree passed to on_ignore */

	/* idx and memory */
	uint8_t *px[2];
	uint16_t *lab[2];
};

static int fail(char *err, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, int rc, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, HN_ERR_MAX, fmt, ap);
		va_end(ap);
	}
	return rc;
}

const struct hn_source_info *hn_source_info(const hn_source *s)
{
	return &s->info;
}

const char *hn_source_describe(const hn_source *s)
{
	return s->describe;
}

uint64_t hn_source_skipped(const hn_source *s)
{
	return __atomic_load_n(&s->nbad, __ATOMIC_RELAXED);
}

uint64_t hn_source_ignored(const hn_source *s)
{
	return s->nignored;
}

static int no_test(const char *t)
{
	return !t || !*t || !strcmp(t, "none");
}

static int set_classes(hn_source *s, uint32_t n, const char *const *names)
{
	s->info.class_names = calloc(n ? n : 1, sizeof(char *));
	if (!s->info.class_names)
		return -ENOMEM;
	s->info.nclasses = n;
	for (uint32_t i = 0; i < n; i++) {
		char tmp[16];
		if (!names || !names[i])
			snprintf(tmp, sizeof tmp, "%u", i);
		s->info.class_names[i] = strdup(names && names[i] ? names[i] : tmp);
		if (!s->info.class_names[i])
			return -ENOMEM;
	}
	return 0;
}

static void apply_limits(hn_source *s, const struct hn_source_options *o)
{
	for (int k = 0; k < 2; k++)
		s->info.count[k] = s->info.full_count[k];
	if (o->limit && o->limit < s->info.count[0])
		s->info.count[0] = o->limit;
	if (o->test_limit && o->test_limit < s->info.count[1])
		s->info.count[1] = o->test_limit;
	s->info.has_test = s->info.count[1] > 0;
}

/* ---- reading helpers ---------------------------------------------------- */

/*
 * What EIO from a spritefs mount means: a sheet failed its checksum (the
 * daemon names it once in its log and counts it in .spritefs/stats.json).
 */
static const char *eio_hint(int rc)
{
	return rc == -EIO ? " (the mount could not verify a sheet; see its log or "
			    ".spritefs/stats.json)"
			  : "";
}

/*
 * Open a mount file so that a pread asks the daemon for exactly its range:
 * through the page cache the kernel reads whole pages and reads ahead, so a
 * few bytes next to a bad sheet would fail with it. FUSE takes O_DIRECT
 * reads of any length into any buffer; where it is refused, read plainly.
 * A disk filesystem (a copy of a mount) opens O_DIRECT and then refuses
 * unaligned reads, so one byte is read to find out.
 */
static int open_exact(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
	char byte;
	if (fd >= 0 && pread(fd, &byte, 1, 0) < 0 && errno == EINVAL) {
		close(fd);
		fd = -1;
		errno = EINVAL;
	}
	if (fd < 0 && errno == EINVAL)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd;
}

/* Read a whole small file (<= cap bytes) into a NUL-terminated buffer. */
static int read_small_file(const char *path, size_t cap, char **out, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char *buf = malloc(cap + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = -errno;
			free(buf);
			close(fd);
			return e;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n == cap) {
			free(buf);
			close(fd);
			return -EFBIG;
		}
	}
	close(fd);
	buf[n] = 0;
	*out = buf;
	*len = n;
	return 0;
}

/* ---- store --------------------------------------------------------------- */

static void sheet_evict_locked(hn_source *s)
{
	while (s->cache_budget && s->cache_used > s->cache_budget) {
		struct sheet_slot *victim = NULL;
		const struct sprite_store_info *si = sprite_store_info(s->store);
		for (uint32_t i = 0; i < si->nsheets; i++) {
			struct sheet_slot *q = &s->sheets[i];
			if (q->state == 2 && q->ref == 0 &&
			    (!victim || q->last_use < victim->last_use))
				victim = q;
		}
		if (!victim)
			return;
		s->cache_used -= victim->b.count ? (uint64_t)sprite_store_sheet_raw_size(
							   s->store, (uint32_t)(victim - s->sheets))
						 : 0;
		free(victim->raw);
		victim->raw = NULL;
		victim->state = 0;
	}
}

/* Pin sheet i, reading and decoding it on this thread if it is not cached. */
static int sheet_get(hn_source *s, uint32_t i, struct sheet_slot **out, char *err)
{
	struct sheet_slot *q = &s->sheets[i];
	pthread_mutex_lock(&s->lock);
	while (q->state == 1)
		pthread_cond_wait(&s->cond, &s->lock);
	if (q->state == 2) {
		q->ref++;
		q->last_use = ++s->use_clock;
		pthread_mutex_unlock(&s->lock);
		*out = q;
		return 0;
	}
	q->state = 1;
	pthread_mutex_unlock(&s->lock);

	int64_t raw_size = sprite_store_sheet_raw_size(s->store, i);
	uint8_t *raw = raw_size > 0 ? malloc((size_t)raw_size) : NULL;
	char why[SPRITE_ERR_MAX] = "";
	int64_t r =
		raw ? sprite_store_read_sheet(s->store, i, raw, (size_t)raw_size, why) : -ENOMEM;
	struct sprite_batch b;
	int rc = 0;
	if (r < 0) {
		if (why[0]) /* the store's message names the sheet */
			rc = fail(err, (int)r, "%s: %s", s->root, why);
		else
			rc = fail(err, (int)r, "%s: sheet %u: %s", s->root, i, strerror((int)-r));
	} else if ((rc = sprite_batch_parse(raw, (size_t)r, &b, why)) < 0) {
		rc = fail(err, rc, "%s: sheet %u: %s", s->root, i, why);
	} else if (b.h != s->info.h || b.w != s->info.w || b.c != s->info.c) {
		rc = fail(err, -EINVAL,
			  "%s: sheet %u: tile shape %ux%ux%u differs from the store's", s->root, i,
			  b.h, b.w, b.c);
	} else {
		for (uint32_t k = 0; k < b.count; k++)
			if (b.labels[k] >= s->info.nclasses) {
				rc = fail(err, -EINVAL, "%s: sheet %u: label %u >= %u classes",
					  s->root, i, b.labels[k], s->info.nclasses);
				break;
			}
	}
	pthread_mutex_lock(&s->lock);
	if (rc < 0) {
		free(raw);
		q->state = 0;
	} else {
		q->raw = raw;
		q->b = b;
		q->state = 2;
		q->ref = 1;
		q->last_use = ++s->use_clock;
		s->cache_used += (uint64_t)raw_size;
		sheet_evict_locked(s);
		*out = q;
	}
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static void sheet_put(hn_source *s, struct sheet_slot *q)
{
	pthread_mutex_lock(&s->lock);
	q->ref--;
	sheet_evict_locked(s);
	pthread_mutex_unlock(&s->lock);
}

static int store_read(hn_source *s, int split, const uint32_t *idx, int n, uint8_t *tiles,
		      uint16_t *labels, char *err)
{
	struct sheet_slot *q = NULL;
	uint32_t cur = UINT32_MAX;
	int rc = 0;
	for (int k = 0; k < n; k++) {
		uint32_t sheet, slot;
		rc = sprite_store_locate(s->store, (uint32_t)s->store_split[split], idx[k], &sheet,
					 &slot);
		if (rc < 0) {
			rc = fail(err, rc, "%s: sample %u of split %d not found", s->root, idx[k],
				  split);
			break;
		}
		if (sheet != cur) {
			if (q)
				sheet_put(s, q);
			q = NULL;
			cur = UINT32_MAX;
			if ((rc = sheet_get(s, sheet, &q, err)) < 0)
				break;
			cur = sheet;
		}
		if (slot >= q->b.count) {
			rc = fail(err, -EINVAL, "%s: sheet %u has no slot %u", s->root, sheet,
				  slot);
			break;
		}
		memcpy(tiles + (size_t)k * s->tile_bytes, q->b.tiles + (size_t)slot * s->tile_bytes,
		       s->tile_bytes);
		labels[k] = q->b.labels[slot];
	}
	if (q)
		sheet_put(s, q);
	return rc;
}

static int store_open(hn_source *s, const char *path, const struct hn_source_options *o, char *err)
{
	char why[SPRITE_ERR_MAX] = "";
	int rc = sprite_store_open(path, &s->store, why);
	if (rc < 0)
		return fail(err, rc, "%s: not a readable store: %s", path,
			    why[0] ? why : strerror(-rc));
	const struct sprite_store_info *si = sprite_store_info(s->store);
	s->kind = SRC_STORE;
	snprintf(s->info.kind, sizeof s->info.kind, "store");
	snprintf(s->info.name, sizeof s->info.name, "%s", si->name);
	s->info.h = si->tile_h;
	s->info.w = si->tile_w;
	s->info.c = si->tile_c;
	s->info.sheet_tiles = si->sheet_tiles;
	if ((rc = set_classes(s, si->nclasses, si->class_names)) < 0)
		return fail(err, rc, "out of memory");
	s->store_split[0] = sprite_store_find_split(s->store, o->train_split);
	if (s->store_split[0] < 0)
		return fail(err, -ENOENT, "%s: the store has no split \"%s\"", path,
			    o->train_split);
	s->info.full_count[0] = si->splits[s->store_split[0]].count;
	if (!no_test(o->test_split)) {
		s->store_split[1] = sprite_store_find_split(s->store, o->test_split);
		if (s->store_split[1] < 0)
			return fail(err, -ENOENT,
				    "%s: the store has no split \"%s\" (--test-split none "
				    "trains without evaluation)",
				    path, o->test_split);
		s->info.full_count[1] = si->splits[s->store_split[1]].count;
	}
	s->sheets = calloc(si->nsheets ? si->nsheets : 1, sizeof *s->sheets);
	if (!s->sheets)
		return fail(err, -ENOMEM, "out of memory");
	s->cache_budget = o->cache_bytes;
	snprintf(s->describe, sizeof s->describe,
		 "store %s: %u sheets of %u tiles, decoded on the loader threads", path,
		 si->nsheets, si->sheet_tiles);
	return 0;
}

/* ---- npy and a little JSON, for the mount ------------------------------- */

/*
 * Parse a .npy header (versions 1-3) of an uint8 array (N,H,W[,C]) or a
 * label vector (N,) of an unsigned/signed integer type.
 */
static int npy_parse(int fd, const char *path, uint64_t *shape, int *ndim, int *itemsize,
		     int *is_signed, uint64_t *data_off, char *err)
{
	uint8_t pre[12];
	struct stat st;
	if (fstat(fd, &st) < 0)
		return fail(err, -errno, "%s: %s", path, strerror(errno));
	int r = sprite_pread_full(fd, pre, sizeof pre, 0);
	if (r < 0 && r != -ENODATA)
		return fail(err, r, "%s: %s%s", path, strerror(-r), eio_hint(r));
	if (r < 0 || memcmp(pre, "\x93NUMPY", 6))
		return fail(err, -EINVAL, "%s: not a .npy file", path);
	uint64_t hlen, hoff;
	if (pre[6] == 1) {
		hlen = pre[8] | (uint64_t)pre[9] << 8;
		hoff = 10;
	} else if (pre[6] == 2 || pre[6] == 3) {
		hlen = pre[8] | (uint64_t)pre[9] << 8 | (uint64_t)pre[10] << 16 |
		       (uint64_t)pre[11] << 24;
		hoff = 12;
	} else {
		return fail(err, -EINVAL, "%s: .npy version %u not supported", path, pre[6]);
	}
	if (hlen == 0 || hlen > 65536 || hoff + hlen > (uint64_t)st.st_size)
		return fail(err, -EINVAL, "%s: bad .npy header length %" PRIu64, path, hlen);
	char *h = malloc(hlen + 1);
	if (!h)
		return -ENOMEM;
	if ((r = sprite_pread_full(fd, h, hlen, hoff)) < 0) {
		free(h);
		if (r != -ENODATA)
			return fail(err, r, "%s: %s%s", path, strerror(-r), eio_hint(r));
		return fail(err, -EINVAL, "%s: short .npy header", path);
	}
	h[hlen] = 0;
	int rc = -EINVAL;
	const char *d = strstr(h, "'descr'"), *f = strstr(h, "'fortran_order'"),
		   *sh = strstr(h, "'shape'");
	if (!d || !f || !sh) {
		rc = fail(err, -EINVAL, "%s: .npy header lacks descr/fortran_order/shape", path);
		goto out;
	}
	d = strchr(d + 7, '\'');
	if (!d || !d[1] || !d[2] || !d[3]) {
		rc = fail(err, -EINVAL, "%s: bad .npy descr", path);
		goto out;
	}
	/* descr like '|u1', '<u2', '<i8' */
	char endian = d[1], type = d[2];
	int size = d[3] - '0';
	if ((endian != '|' && endian != '<' && endian != '=') || (type != 'u' && type != 'i') ||
	    (size != 1 && size != 2 && size != 4 && size != 8) || d[4] != '\'') {
		rc = fail(err, -EINVAL, "%s: .npy dtype %.6s is not a little-endian integer", path,
			  d);
		goto out;
	}
	if (strstr(f, "True") && strstr(f, "True") < sh && strstr(f, "True") - f < 24) {
		rc = fail(err, -EINVAL, "%s: fortran-ordered .npy not supported", path);
		goto out;
	}
	const char *p = strchr(sh, '(');
	if (!p) {
		rc = fail(err, -EINVAL, "%s: bad .npy shape", path);
		goto out;
	}
	p++;
	int nd = 0;
	while (*p && *p != ')') {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == ')')
			break;
		if (!isdigit((unsigned char)*p) || nd == 4) {
			rc = fail(err, -EINVAL, "%s: bad .npy shape", path);
			goto out;
		}
		char *e;
		errno = 0;
		unsigned long long v = strtoull(p, &e, 10);
		if (errno || v > (1ull << 40)) {
			rc = fail(err, -EINVAL, "%s: .npy dimension out of range", path);
			goto out;
		}
		shape[nd++] = v;
		p = e;
	}
	if (*p != ')' || nd == 0) {
		rc = fail(err, -EINVAL, "%s: bad .npy shape", path);
		goto out;
	}
	uint64_t items = 1;
	for (int i = 0; i < nd; i++) {
		if (shape[i] && items > UINT64_MAX / shape[i] / 8) {
			rc = fail(err, -EINVAL, "%s: .npy shape too large", path);
			goto out;
		}
		items *= shape[i];
	}
	*data_off = hoff + hlen;
	if (*data_off + items * (uint64_t)size > (uint64_t)st.st_size) {
		rc = fail(err, -EINVAL, "%s: .npy data shorter than its shape", path);
		goto out;
	}
	*ndim = nd;
	*itemsize = size;
	*is_signed = type == 'i';
	rc = 0;
out:
	free(h);
	return rc;
}

/* Skip JSON whitespace. */
static const char *js_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* Parse a JSON string at p into out (cap bytes, \u escapes beyond ASCII become '?'). */
static const char *js_string(const char *p, const char *end, char *out, size_t cap)
{
	if (p >= end || *p != '"')
		return NULL;
	p++;
	size_t n = 0;
	while (p < end && *p != '"') {
		char ch = *p++;
		if (ch == '\\') {
			if (p >= end)
				return NULL;
			ch = *p++;
			switch (ch) {
			case 'n':
				ch = '\n';
				break;
			case 't':
				ch = '\t';
				break;
			case 'r':
				ch = '\r';
				break;
			case 'b':
				ch = '\b';
				break;
			case 'f':
				ch = '\f';
				break;
			case 'u':
				if (end - p < 4)
					return NULL;
				{
					char hex[5] = {p[0], p[1], p[2], p[3], 0};
					unsigned v = (unsigned)strtoul(hex, NULL, 16);
					ch = v < 0x80 ? (char)v : '?';
				}
				p += 4;
				break;
			default:
				break; /* \" \\ \/ */
			}
		}
		if (out && n + 1 < cap)
			out[n++] = ch;
	}
	if (p >= end)
		return NULL;
	if (out && cap)
		out[n] = 0;
	return p + 1;
}

/* Skip one JSON value; NULL on malformed input. depth bounds recursion. */
static const char *js_skip(const char *p, const char *end, int depth)
{
	p = js_ws(p, end);
	if (p >= end || depth > 64)
		return NULL;
	if (*p == '"')
		return js_string(p, end, NULL, 0);
	if (*p == '{' || *p == '[') {
		char close = *p == '{' ? '}' : ']';
		p = js_ws(p + 1, end);
		if (p < end && *p == close)
			return p + 1;
		for (;;) {
			if (close == '}') {
				p = js_string(js_ws(p, end), end, NULL, 0);
				if (!p)
					return NULL;
				p = js_ws(p, end);
				if (p >= end || *p != ':')
					return NULL;
				p++;
			}
			p = js_skip(p, end, depth + 1);
			if (!p)
				return NULL;
			p = js_ws(p, end);
			if (p < end && *p == ',') {
				p++;
				continue;
			}
			if (p < end && *p == close)
				return p + 1;
			return NULL;
		}
	}
	while (p < end && (isalnum((unsigned char)*p) || *p == '-' || *p == '+' || *p == '.'))
		p++;
	return p;
}

/* Find key in the top-level object; returns the value's start or NULL. */
static const char *js_find(const char *p, const char *end, const char *key)
{
	p = js_ws(p, end);
	if (p >= end || *p != '{')
		return NULL;
	p++;
	for (;;) {
		char k[128];
		p = js_ws(p, end);
		if (p < end && *p == '}')
			return NULL;
		p = js_string(p, end, k, sizeof k);
		if (!p)
			return NULL;
		p = js_ws(p, end);
		if (p >= end || *p != ':')
			return NULL;
		p = js_ws(p + 1, end);
		if (!strcmp(k, key))
			return p;
		p = js_skip(p, end, 0);
		if (!p)
			return NULL;
		p = js_ws(p, end);
		if (p >= end || *p != ',')
			return NULL;
		p++;
	}
}

/* Class names from dataset.json's "classes": [ "a", "b", ... ]. */
static int mount_classes(hn_source *s, const char *json, size_t len, char *err)
{
	const char *end = json + len;
	const char *p = js_find(json, end, "classes");
	if (!p || *p != '[')
		return fail(err, -EINVAL, "%s/dataset.json: no \"classes\" list", s->root);
	char **names = NULL;
	uint32_t n = 0, cap = 0;
	p = js_ws(p + 1, end);
	int rc = 0;
	while (p && p < end && *p != ']') {
		char name[256];
		p = js_string(p, end, name, sizeof name);
		if (!p)
			break;
		if (n == HN_MAX_CLASSES) {
			rc = fail(err, -EINVAL, "%s/dataset.json: too many classes", s->root);
			break;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			char **nn = realloc(names, cap * sizeof *names);
			if (!nn) {
				rc = -ENOMEM;
				break;
			}
			names = nn;
		}
		names[n++] = strdup(name);
		p = js_ws(p, end);
		if (p < end && *p == ',')
			p = js_ws(p + 1, end);
	}
	if (!rc && (!p || p >= end || n == 0))
		rc = fail(err, -EINVAL, "%s/dataset.json: malformed \"classes\" list", s->root);
	if (!rc)
		rc = set_classes(s, n, (const char *const *)names);
	for (uint32_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (!rc) {
		const char *st = js_find(json, end, "sheet_tiles");
		if (st && isdigit((unsigned char)*st)) {
			unsigned long v = strtoul(st, NULL, 10);
			if (v > 0 && v <= SPRITE_MAX_SHEET_TILES)
				s->info.sheet_tiles = (uint32_t)v;
		}
		const char *nm = js_find(json, end, "name");
		if (nm)
			js_string(nm, end, s->info.name, sizeof s->info.name);
	}
	return rc;
}

static int mount_open_split(hn_source *s, int k, const char *split, char *err)
{
	char path[4200];
	uint64_t shape[4];
	int nd, isz, sgn;
	snprintf(path, sizeof path, "%s/%s/images.npy", s->root, split);
	s->img_fd[k] = open(path, O_RDONLY | O_CLOEXEC);
	if (s->img_fd[k] < 0 || (s->img_xfd[k] = open_exact(path)) < 0)
		return fail(err, -errno, "%s: %s", path, strerror(errno));
	int rc = npy_parse(s->img_xfd[k], path, shape, &nd, &isz, &sgn, &s->img_off[k], err);
	if (rc < 0)
		return rc;
	if (isz != 1 || sgn || (nd != 3 && nd != 4))
		return fail(err, -EINVAL, "%s: expected uint8 images of shape (N,H,W[,C])", path);
	uint32_t h = (uint32_t)shape[1], w = (uint32_t)shape[2],
		 c = nd == 4 ? (uint32_t)shape[3] : 1;
	if (!h || !w || !c || h > SPRITE_MAX_TILE_SIDE || w > SPRITE_MAX_TILE_SIDE ||
	    c > SPRITE_MAX_CHANNELS || shape[0] > UINT32_MAX)
		return fail(err, -EINVAL, "%s: tile shape %ux%ux%u out of range", path, h, w, c);
	if (k == 0) {
		s->info.h = h;
		s->info.w = w;
		s->info.c = c;
	} else if (h != s->info.h || w != s->info.w || c != s->info.c) {
		return fail(err, -EINVAL, "%s: tile shape differs from the training split's", path);
	}
	s->info.full_count[k] = shape[0];

	snprintf(path, sizeof path, "%s/%s/labels.npy", s->root, split);
	s->lab_fd[k] = open_exact(path);
	if (s->lab_fd[k] < 0)
		return fail(err, -errno, "%s: %s", path, strerror(errno));
	rc = npy_parse(s->lab_fd[k], path, shape, &nd, &isz, &sgn, &s->lab_off[k], err);
	if (rc < 0)
		return rc;
	if (nd != 1 || shape[0] != s->info.full_count[k])
		return fail(err, -EINVAL, "%s: expected %" PRIu64 " labels", path,
			    s->info.full_count[k]);
	s->lab_size[k] = isz;
	return 0;
}

static uint64_t js_u64(const char *obj, const char *end, const char *key, uint64_t dflt)
{
	const char *v = obj && *obj == '{' ? js_find(obj, end, key) : NULL;
	return v && isdigit((unsigned char)*v) ? strtoull(v, NULL, 10) : dflt;
}

/*
 * Use the mount's epoch views only when they hold exactly our batches:
 * dataset.json's "epochs" batch equals --batch, and the training split's
 * order (full, or windowed with the same window) is the one this run uses.
 * Views are read for the epochs the mount lists, < "count"; later epochs
 * are gathered, with a note as for a view that does not open.
 */
static void mount_views_check(hn_source *s, const char *json, size_t len,
			      const struct hn_source_options *o)
{
	const char *end = json + len;
	const char *ep = js_find(json, end, "epochs");
	const char *sp = js_find(json, end, "splits");
	const char *tr = sp && *sp == '{' ? js_find(sp, end, o->train_split) : NULL;
	if (!ep || !tr || *tr != '{')
		return;
	s->view_batch = (uint32_t)js_u64(ep, end, "batch", 0);
	s->view_epochs = js_u64(ep, end, "count", 0);
	char order[32] = "";
	const char *ov = js_find(tr, end, "order");
	if (ov)
		js_string(ov, end, order, sizeof order);
	uint64_t window = js_u64(tr, end, "window", 0);
	s->views_match = s->view_batch == o->batch && s->view_batch > 0 &&
			 ((!strcmp(order, "full") && o->window == 0) ||
			  (!strcmp(order, "windowed") && window == o->window && window > 0));
}

static int mount_open(hn_source *s, const char *path, const struct hn_source_options *o, char *err)
{
	char p[4200], *json = NULL;
	size_t len = 0;
	s->kind = SRC_MOUNT;
	snprintf(s->info.kind, sizeof s->info.kind, "mount");
	snprintf(s->root, sizeof s->root, "%s", path);
	snprintf(p, sizeof p, "%s/dataset.json", path);
	int rc = read_small_file(p, 1 << 20, &json, &len);
	if (rc < 0)
		return fail(err, rc, "%s: %s", p, strerror(-rc));
	rc = mount_classes(s, json, len, err);
	if (rc == 0)
		mount_views_check(s, json, len, o);
	free(json);
	if (rc < 0)
		return rc;
	if ((rc = mount_open_split(s, 0, o->train_split, err)) < 0)
		return rc;
	if (!no_test(o->test_split) && (rc = mount_open_split(s, 1, o->test_split, err)) < 0)
		return rc;
	snprintf(p, sizeof p, "%s/%s/epochs", path, o->train_split);
	struct stat st;
	s->epochs_dir = stat(p, &st) == 0 && S_ISDIR(st.st_mode);
	s->seed = o->seed;
	s->batch = o->batch;
	snprintf(s->train_split, sizeof s->train_split, "%s", o->train_split);
	snprintf(s->test_split, sizeof s->test_split, "%s",
		 no_test(o->test_split) ? "" : o->test_split);
	snprintf(s->describe, sizeof s->describe, "mount %s: %s/images.npy gathered with pread",
		 path, o->train_split);
	return 0;
}

static uint16_t label_at(const uint8_t *p, int size)
{
	uint64_t v = 0;
	for (int i = 0; i < size; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v > 0xffff ? 0xffff : (uint16_t)v; /* range-checked by the caller */
}

/*
 * The labels of the samples this run uses (the first count[k]), read once at
 * open into s->lab[k]: 1-8 bytes a sample, and only their range, so that a
 * bad sheet past --limit does not stop the run. A range that fails is read
 * again sheet by sheet to name the samples it holds.
 */
static int mount_load_labels(hn_source *s, int k, const char *split, char *err)
{
	uint64_t n = s->info.count[k], per = s->info.sheet_tiles ? s->info.sheet_tiles : 1024;
	uint64_t chunk = per * (1 + (1u << 20) / (per * 8)); /* whole sheets, about 1 MiB */
	int ls = s->lab_size[k];
	uint8_t *buf = malloc((size_t)(chunk * (uint64_t)ls));
	s->lab[k] = malloc((size_t)(n ? n : 1) * sizeof(uint16_t));
	if (!buf || !s->lab[k]) {
		free(buf);
		return fail(err, -ENOMEM, "out of memory for %" PRIu64 " labels", n);
	}
	int rc = 0;
	for (uint64_t first = 0; first < n && rc == 0; first += chunk) {
		uint64_t m = n - first < chunk ? n - first : chunk;
		rc = sprite_pread_full(s->lab_fd[k], buf, (size_t)(m * (uint64_t)ls),
				       s->lab_off[k] + first * (uint64_t)ls);
		uint64_t a = first, b = first + m;
		for (uint64_t f = first; rc < 0 && f < first + m; f += per) {
			/* which sheet: the first range that fails on its own */
			a = f;
			b = f + per < first + m ? f + per : first + m;
			int r = sprite_pread_full(s->lab_fd[k], buf,
						  (size_t)((b - a) * (uint64_t)ls),
						  s->lab_off[k] + a * (uint64_t)ls);
			if (r < 0) {
				rc = r;
				break;
			}
		}
		if (rc < 0) {
			char range[48];
			if (b - a > 1)
				snprintf(range, sizeof range, "samples %" PRIu64 "-%" PRIu64, a,
					 b - 1);
			else
				snprintf(range, sizeof range, "sample %" PRIu64, a);
			rc = fail(err, rc, "%s/%s/labels.npy: %s: %s%s", s->root, split, range,
				  rc == -ENODATA ? "shorter than its header says" : strerror(-rc),
				  eio_hint(rc));
			break;
		}
		for (uint64_t j = 0; j < m; j++) {
			uint16_t l = label_at(buf + j * (uint64_t)ls, ls);
			if (l >= s->info.nclasses) {
				rc = fail(err, -EINVAL,
					  "%s/%s/labels.npy: sample %" PRIu64
					  ": label %u out of range (%u classes)",
					  s->root, split, first + j, l, s->info.nclasses);
				break;
			}
			s->lab[k][first + j] = l;
		}
	}
	free(buf);
	return rc;
}

/*
 * Gather samples with one pread per run of consecutive indices, through the
 * page cache; a run that fails with EIO is read again exactly (the kernel
 * may have read ahead into a bad sheet the run does not need).
 */
static int mount_read(hn_source *s, int split, const uint32_t *idx, int n, uint8_t *tiles,
		      uint16_t *labels, char *err)
{
	const char *name = split == HN_SPLIT_TRAIN ? s->train_split : s->test_split;
	for (int k = 0; k < n;) {
		int run = 1;
		while (k + run < n && idx[k + run] == idx[k] + (uint32_t)run && run < 4096)
			run++;
		uint64_t i = idx[k];
		if (i + (uint64_t)run > s->info.count[split])
			return fail(err, -ERANGE, "%s: sample %" PRIu64 " out of range", s->root,
				    i);
		uint8_t *dst = tiles + (size_t)k * s->tile_bytes;
		size_t len = (size_t)run * s->tile_bytes;
		uint64_t off = s->img_off[split] + i * s->tile_bytes;
		int rc = sprite_pread_full(s->img_fd[split], dst, len, off);
		if (rc == -EIO)
			rc = sprite_pread_full(s->img_xfd[split], dst, len, off);
		if (rc < 0)
			return fail(err, rc,
				    "%s/%s/images.npy: samples %" PRIu64 "-%" PRIu64 ": %s%s",
				    s->root, name, i, i + (uint64_t)run - 1,
				    rc == -ENODATA ? "shorter than its header says" : strerror(-rc),
				    eio_hint(rc));
		memcpy(labels + k, s->lab[split] + i, (size_t)run * sizeof *labels);
		k += run;
	}
	return 0;
}

/* ---- image folder ----------------------------------------------------- */

/*
 * An entry of the tree that is not an image of a class folder: named through
 * on_ignore and counted, or with --strict, when it is neither a file nor a
 * folder (a dangling link, a FIFO), the end of the open like a bad image.
 */
static int ignore_entry(hn_source *s, const char *path, int unreadable, const char *why, char *err)
{
	if (unreadable && s->strict) {
		char shown[HN_ERR_MAX];
		return fail(
			err, -EINVAL,
			"%s: %s (--strict stops at an entry that is neither a file nor a folder)",
			sprite_escape(path, shown, sizeof shown), why);
	}
	s->nignored++;
	if (s->on_ignore)
		s->on_ignore(s->skip_ctx, path, why);
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
 * Decode file i of split into tile, fitted to the source's tile shape (h, w,
 * c 0: take the image's own). A file that does not decode is marked bad and
 * reported once through on_skip, and then returns 1 (skip it), or with
 * --strict fails; 0 when the tile holds the sample.
 */
static int image_sample(hn_source *s, int split, uint64_t i, uint8_t *tile,
			struct sprite_image *keep, char *err)
{
	const struct img_file *f = &s->files[split][i];
	if (__atomic_load_n(&s->bad[split][i], __ATOMIC_RELAXED))
		return 1;
	struct sprite_image im;
	char why[SPRITE_ERR_MAX] = "";
	char shown[192]; /* the path in a message of SPRITE_ERR_MAX bytes, with room for why */
	int rc = sprite_image_load(f->path, &im, why); /* why names the file (escaped) */
	sprite_escape(f->path, shown, sizeof shown);
	if (rc == -ENOMEM)
		return fail(err, rc, "%s: out of memory", shown);
	if (rc < 0 && !why[0])
		snprintf(why, sizeof why, "%s: %s", shown, strerror(-rc));
	if (rc == 0 && keep) {
		*keep = im;
		return 0;
	}
	if (rc == 0) {
		rc = sprite_image_fit(&im, s->info.h, s->info.w, s->info.c, tile);
		sprite_image_free(&im);
		if (rc == -ENOMEM)
			return fail(err, rc, "%s: out of memory", shown);
		if (rc < 0)
			snprintf(why, sizeof why, "%s: cannot fit to a %ux%ux%u tile: %s", shown,
				 s->info.h, s->info.w, s->info.c, strerror(-rc));
	}
	if (rc == 0)
		return 0;
	/* the decoder's message names the file */
	if (s->strict)
		return fail(err, rc, "%s (--strict stops at a file that does not decode)", why);
	if (!__atomic_exchange_n(&s->bad[split][i], 1, __ATOMIC_RELAXED)) {
		__atomic_add_fetch(&s->nbad, 1, __ATOMIC_RELAXED);
		if (s->on_skip)
			s->on_skip(s->skip_ctx, why);
	}
	return 1;
}

static int images_open(hn_source *s, const char *path, const struct hn_source_options *o, char *err)
{
	s->kind = SRC_IMAGES;
	s->strict = o->strict;
	s->on_skip = o->on_skip;
	s->on_ignore = o->on_ignore;
	s->skip_ctx = o->skip_ctx;
	snprintf(s->info.kind, sizeof s->info.kind, "images");
	snprintf(s->root, sizeof s->root, "%s", path);
	const char *base = strrchr(path, '/');
	snprintf(s->info.name, sizeof s->info.name, "%s", base && base[1] ? base + 1 : path);

	/*
	 * The tree as spritefs-pack lists it (common/folder.c). Entries outside
	 * the class folders are told for the top, then for each split this run
	 * reads, before its files.
	 */
	struct sprite_folder f;
	int rc = sprite_folder_list(path, &f, err, HN_ERR_MAX);
	if (rc == 0)
		rc = ignore_entries(s, &f.outside, err);
	if (rc == 0 && f.nclasses == 0)
		rc = fail(err, -ENOENT,
			  "%s: no class folders (expected %s/<class>/<images> or "
			  "%s/train/<class>/<images>)",
			  path, path, path);
	else if (rc == 0 && f.nclasses > HN_MAX_CLASSES)
		rc = fail(err, -EINVAL, "%s: too many classes", path);
	else if (rc == 0)
		rc = set_classes(s, (uint32_t)f.nclasses, (const char *const *)f.classes);

	/* The two splits this run uses. */
	int want_test = !no_test(o->test_split);
	for (int k = 0; rc == 0 && k < 1 + want_test; k++) {
		const char *name = k == 0 ? o->train_split : o->test_split;
		size_t j = 0;
		while (j < f.nsplits && strcmp(f.splits[j].name, name))
			j++;
		if (j == f.nsplits) {
			if (k == 1 && !f.split_layout)
				break; /* class folders directly: no test split, train only */
			rc = fail(err, -ENOENT, "%s: no split folder \"%s\"%s", path, name,
				  k ? " (--test-split none trains without evaluation)" : "");
			break;
		}
		struct file_list fl = {0};
		struct walk_ctx wc = {&fl, s, err};
		rc = ignore_entries(s, &f.splits[j].outside, err);
		if (rc == 0)
			rc = sprite_folder_walk(&f, j, walk_file, walk_ignored, &wc, err,
						HN_ERR_MAX);
		s->files[k] = fl.v;
		s->nfiles[k] = fl.n;
		s->info.full_count[k] = fl.n;
		if (rc == 0 && !(s->bad[k] = calloc(fl.n ? fl.n : 1, 1)))
			rc = -ENOMEM;
	}
	sprite_folder_free(&f);
	if (rc < 0)
		return rc;
	if (s->info.full_count[0] == 0)
		return fail(err, -ENOENT, "%s: no image files in the training split", path);

	/* Tile shape: given, or that of the first training image that decodes. */
	s->info.h = o->tile_h;
	s->info.w = o->tile_w;
	s->info.c = o->tile_c;
	if (!s->info.h || !s->info.w || !s->info.c) {
		struct sprite_image im;
		uint64_t i = 0;
		while (i < s->info.full_count[0] &&
		       (rc = image_sample(s, 0, i, NULL, &im, err)) == 1)
			i++;
		if (rc < 0)
			return rc;
		if (i == s->info.full_count[0])
			return fail(err, -EINVAL, "%s: no file of the training split decodes",
				    path);
		if (!s->info.h || !s->info.w) {
			s->info.h = im.h;
			s->info.w = im.w;
		}
		if (!s->info.c)
			s->info.c = im.c;
		sprite_image_free(&im);
		if (s->info.h > SPRITE_MAX_TILE_SIDE || s->info.w > SPRITE_MAX_TILE_SIDE)
			return fail(err, -EINVAL,
				    "%s: first image %ux%u is larger than a tile may be "
				    "(use --tile)",
				    path, s->info.h, s->info.w);
	}
	s->info.sheet_tiles = 1024;
	snprintf(s->describe, sizeof s->describe,
		 "image folder %s: %" PRIu64 " + %" PRIu64 " files decoded on the loader threads",
		 path, s->info.full_count[0], s->info.full_count[1]);
	return 0;
}

/* The samples that decode, packed in idx order; returns how many. */
static int images_read(hn_source *s, int split, const uint32_t *idx, int n, uint8_t *tiles,
		       uint16_t *labels, char *err)
{
	int m = 0;
	for (int k = 0; k < n; k++) {
		if (idx[k] >= s->info.full_count[split])
			return fail(err, -ERANGE, "%s: sample %u out of range", s->root, idx[k]);
		int rc = image_sample(s, split, idx[k], tiles + (size_t)m * s->tile_bytes, NULL,
				      err);
		if (rc < 0)
			return rc;
		if (rc == 0)
			labels[m++] = s->files[split][idx[k]].label;
	}
	return m;
}

/* ---- IDX folder ------------------------------------------------------- */

static int idx_find(const char *dir, const char *prefix, const char *kind, char *out, size_t cap)
{
	struct stat st;
	snprintf(out, cap, "%s/%s-%s", dir, prefix, kind);
	if (stat(out, &st) == 0)
		return 0;
	snprintf(out, cap, "%s/%s-%s.gz", dir, prefix, kind);
	return stat(out, &st) == 0 ? 0 : -ENOENT;
}

static int idx_has(const char *dir)
{
	char p[4200];
	return idx_find(dir, "train", "images-idx3-ubyte", p, sizeof p) == 0;
}

static int idx_open(hn_source *s, const char *path, const struct hn_source_options *o, char *err)
{
	s->kind = SRC_IDX;
	snprintf(s->info.kind, sizeof s->info.kind, "idx");
	snprintf(s->root, sizeof s->root, "%s", path);
	const char *base = strrchr(path, '/');
	snprintf(s->info.name, sizeof s->info.name, "%s", base && base[1] ? base + 1 : path);
	int maxlab = -1;
	for (int k = 0; k < 2; k++) {
		const char *split = k == 0 ? o->train_split : o->test_split;
		if (k == 1 && no_test(split))
			break;
		/* IDX folders name their test split t10k. */
		const char *prefix = !strcmp(split, "test") ? "t10k" : split;
		char ip[4200], lp[4200], why[SPRITE_ERR_MAX] = "";
		if (idx_find(path, prefix, "images-idx3-ubyte", ip, sizeof ip) < 0 ||
		    idx_find(path, prefix, "labels-idx1-ubyte", lp, sizeof lp) < 0)
			return fail(err, -ENOENT,
				    "%s: no %s-images-idx3-ubyte[.gz] and "
				    "%s-labels-idx1-ubyte[.gz] for split \"%s\"",
				    path, prefix, prefix, split);
		uint32_t h, w;
		uint8_t *l8 = NULL;
		int64_t n = sprite_idx_load_images(ip, &h, &w, &s->px[k], why);
		if (n < 0)
			return fail(err, (int)n, "%s: %s", ip, why[0] ? why : strerror((int)-n));
		int64_t nl = sprite_idx_load_labels(lp, &l8, why);
		if (nl < 0)
			return fail(err, (int)nl, "%s: %s", lp, why[0] ? why : strerror((int)-nl));
		if (nl != n) {
			free(l8);
			return fail(err, -EINVAL, "%s: %" PRId64 " labels for %" PRId64 " images",
				    lp, nl, n);
		}
		if (k == 0) {
			s->info.h = h;
			s->info.w = w;
			s->info.c = 1;
		} else if (h != s->info.h || w != s->info.w) {
			free(l8);
			return fail(err, -EINVAL, "%s: %ux%u images, the training split has %ux%u",
				    ip, h, w, s->info.h, s->info.w);
		}
		s->lab[k] = malloc((size_t)(n ? n : 1) * sizeof(uint16_t));
		if (!s->lab[k]) {
			free(l8);
			return -ENOMEM;
		}
		for (int64_t i = 0; i < n; i++) {
			s->lab[k][i] = l8[i];
			if (l8[i] > maxlab)
				maxlab = l8[i];
		}
		free(l8);
		s->info.full_count[k] = (uint64_t)n;
	}
	if (maxlab < 0)
		return fail(err, -EINVAL, "%s: no samples", path);
	int rc = set_classes(s, (uint32_t)maxlab + 1, NULL);
	if (rc < 0)
		return rc;
	s->info.sheet_tiles = 1024;
	snprintf(s->describe, sizeof s->describe, "IDX folder %s, loaded in memory", path);
	return 0;
}

static int memory_read(hn_source *s, int split, const uint32_t *idx, int n, uint8_t *tiles,
		       uint16_t *labels, char *err)
{
	for (int k = 0; k < n; k++) {
		if (idx[k] >= s->info.full_count[split])
			return fail(err, -ERANGE, "sample %u out of range", idx[k]);
		memcpy(tiles + (size_t)k * s->tile_bytes,
		       s->px[split] + (size_t)idx[k] * s->tile_bytes, s->tile_bytes);
		labels[k] = s->lab[split][idx[k]];
	}
	return 0;
}

/* ---- epoch views of a mount ------------------------------------------- */

/*
 * The mount lays out <split>/epochs/<seed>/<epoch>/<n>.sprite: batch n of
 * the epoch's permutation, with the sample ids inside. hntrain uses them
 * only when they hold exactly the batch it wants; the ids are compared
 * against idx so that a mount built with another order is caught, never
 * trained on silently.
 *
 * A view is read once (the next epoch reads other files), so it is opened
 * O_DIRECT: spritefs then copies the batch from its sheet cache straight into
 * our buffer, one copy instead of two, and the kernel's page cache is not
 * filled with files nobody reads again. FUSE takes O_DIRECT reads of any
 * length into any buffer; a filesystem that refuses them (EINVAL at open or
 * at read) is read the plain way.
 */
static int view_load(const char *path, uint8_t *buf, size_t need, int *opened)
{
	int rc = -EINVAL;
	*opened = 0;
	for (int direct = 1; direct >= 0 && rc == -EINVAL; direct--) {
		int fd = open(path, O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		*opened = 1;
		rc = sprite_pread_full(fd, buf, need, 0);
		close(fd);
	}
	return rc;
}

/* Say once that the training split is gathered although the banner said views. */
static void views_note(hn_source *s, const char *why)
{
	if (!s->on_note)
		return;
	char note[HN_ERR_MAX + 160];
	snprintf(note, sizeof note,
		 "%s; epoch views unusable, gathering from %s/images.npy instead (the same "
		 "samples in the same order)",
		 why, s->train_split);
	s->on_note(s->note_ctx, note);
}

/*
 * One epoch view; a view that does not open (the mount has no view for this
 * seed, or cannot take another seed: ENOSPC) returns -ENOENT with the reason
 * in err, for the caller to gather instead. A view that opened and then
 * fails to read is an error.
 */
static int view_read(hn_source *s, uint64_t epoch, uint64_t bi, const uint32_t *idx, int n,
		     uint8_t *tiles, uint16_t *labels, char *err)
{
	char path[4400];
	snprintf(path, sizeof path, "%s/%s/epochs/%" PRIu64 "/%" PRIu64 "/%" PRIu64 ".sprite",
		 s->root, s->train_split, s->seed, epoch, bi);
	struct sprite_batch_header hdr;
	sprite_batch_layout((uint32_t)n, s->info.h, s->info.w, s->info.c, &hdr);
	size_t need = hdr.total_size;
	uint8_t *buf = malloc(need);
	if (!buf)
		return fail(err, -ENOMEM, "%s: out of memory", path);
	int opened;
	int rc = view_load(path, buf, need, &opened);
	if (rc < 0) {
		free(buf);
		if (!opened)
			return fail(err, -ENOENT, "%s: %s", path, strerror(-rc));
		return fail(err, rc, "%s: %s%s", path,
			    rc == -ENODATA ? "shorter than its batch" : strerror(-rc),
			    eio_hint(rc));
	}
	struct sprite_batch b;
	char why[SPRITE_ERR_MAX] = "";
	if (rc == 0 && (rc = sprite_batch_parse(buf, need, &b, why)) < 0)
		rc = fail(err, rc, "%s: %s", path, why);
	else if (rc == 0 && (b.count != (uint32_t)n || b.h != s->info.h || b.w != s->info.w ||
			     b.c != s->info.c))
		rc = fail(err, -EINVAL, "%s: batch of %u %ux%ux%u tiles, expected %d", path,
			  b.count, b.h, b.w, b.c, n);
	for (int k = 0; rc == 0 && k < n; k++) {
		if (b.ids[k] != idx[k])
			rc = fail(err, -EINVAL, "%s: sample %d is %u, the permutation says %u",
				  path, k, b.ids[k], idx[k]);
		else if (b.labels[k] >= s->info.nclasses)
			rc = fail(err, -EINVAL, "%s: label out of range", path);
		else
			labels[k] = b.labels[k];
	}
	if (rc == 0)
		memcpy(tiles, b.tiles, (size_t)n * s->tile_bytes);
	free(buf);
	return rc;
}

/* ---- the interface ---------------------------------------------------- */

/*
 * A folder below the root of a spritefs mount (a split folder, its
 * batches/, epochs/, sheets/, .spritefs/) read as an image folder takes
 * those folders for classes and trains on nonsense. The root is the nearest
 * folder above holding dataset.json and .spritefs/, both of which a mount
 * always serves. <split>/by-class is an image folder (the
 * mount serves it for ImageFolder readers), so it is not refused. 1 with the
 * message in err when path is such a folder, else 0.
 */
static int mount_part(const char *path, char *err)
{
	char real[PATH_MAX], up[PATH_MAX], p[PATH_MAX + 32];
	struct stat st;
	if (!realpath(path, real))
		return 0;
	snprintf(up, sizeof up, "%s", real);
	for (char *cut; (cut = strrchr(up, '/')) && cut != up;) {
		*cut = 0;
		snprintf(p, sizeof p, "%s/dataset.json", up);
		if (access(p, R_OK) < 0)
			continue;
		snprintf(p, sizeof p, "%s/.spritefs", up);
		if (stat(p, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		const char *rel = real + strlen(up) + 1, *sl = strchr(rel, '/');
		if (sl && !strcmp(sl + 1, "by-class"))
			return 0;
		fail(err, -EINVAL,
		     "%s is the folder %s of the spritefs mount %s, not a data set: give --data "
		     "%s (--split and --test-split pick its splits; %s/<split>/by-class is an "
		     "image folder)",
		     path, rel, up, up, up);
		return 1;
	}
	return 0;
}

int hn_source_kind(const char *path, char *err)
{
	struct stat st;
	char p[4200];
	if (stat(path, &st) < 0)
		return fail(err, -errno, "%s: %s", path, strerror(errno));
	if (S_ISREG(st.st_mode))
		return HN_SOURCE_STORE;
	if (!S_ISDIR(st.st_mode))
		return fail(err, -EINVAL, "%s: neither a store file nor a folder", path);
	snprintf(p, sizeof p, "%s/dataset.json", path);
	if (access(p, R_OK) == 0)
		return HN_SOURCE_MOUNT;
	if (mount_part(path, err))
		return HN_SOURCE_IN_MOUNT;
	return idx_has(path) ? HN_SOURCE_IDX : HN_SOURCE_IMAGES;
}

int hn_source_open(const char *path, const struct hn_source_options *o, hn_source **out, char *err)
{
	struct stat st;
	int kind = hn_source_kind(path, err);
	if (kind < 0)
		return kind;
	if (kind == HN_SOURCE_IN_MOUNT)
		return -EINVAL;
	hn_source *s = calloc(1, sizeof *s);
	if (!s)
		return fail(err, -ENOMEM, "out of memory");
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	for (int k = 0; k < 2; k++)
		s->img_fd[k] = s->img_xfd[k] = s->lab_fd[k] = -1;
	s->store_split[1] = -1;
	snprintf(s->root, sizeof s->root, "%s", path);
	int rc = kind == HN_SOURCE_STORE   ? store_open(s, path, o, err)
		 : kind == HN_SOURCE_MOUNT ? mount_open(s, path, o, err)
		 : kind == HN_SOURCE_IDX   ? idx_open(s, path, o, err)
					   : images_open(s, path, o, err);
	if (rc >= 0 && (!s->info.h || !s->info.w || !s->info.c || !s->info.nclasses))
		rc = fail(err, -EINVAL, "%s: empty tile shape or no classes", path);
	if (rc >= 0 && s->info.full_count[0] == 0)
		rc = fail(err, -EINVAL, "%s: the training split is empty", path);
	if (rc >= 0 && s->info.full_count[0] > UINT32_MAX)
		rc = fail(err, -EINVAL, "%s: more than 2^32 training samples", path);
	if (rc < 0) {
		hn_source_close(s);
		return rc;
	}
	s->tile_bytes = (size_t)s->info.h * s->info.w * s->info.c;
	apply_limits(s, o);
	for (int k = 0; k < 2 && s->kind == SRC_MOUNT; k++)
		if (s->info.count[k] &&
		    (rc = mount_load_labels(s, k, k ? s->test_split : s->train_split, err)) < 0) {
			hn_source_close(s);
			return rc;
		}
	s->on_note = o->on_note;
	s->note_ctx = o->note_ctx;
	if (s->kind == SRC_MOUNT && s->epochs_dir && s->views_match && !o->limit) {
		/* The mount may refuse this seed (ENOSPC: too many seeds in use). */
		char p[4400];
		snprintf(p, sizeof p, "%s/%s/epochs/%" PRIu64, path, o->train_split, o->seed);
		s->use_views = stat(p, &st) == 0;
		if (!s->use_views) {
			char why[HN_ERR_MAX];
			fail(why, -errno, "%s: %s", p, strerror(errno));
			views_note(s, why);
		}
	}
	if (s->use_views) {
		snprintf(s->describe, sizeof s->describe,
			 "mount %s: epoch views %s/epochs/%" PRIu64
			 "/<epoch>/<n>.sprite (batch %u)",
			 path, o->train_split, o->seed, o->batch);
	}
	*out = s;
	return 0;
}

void hn_source_close(hn_source *s)
{
	if (!s)
		return;
	if (s->sheets) {
		const struct sprite_store_info *si = sprite_store_info(s->store);
		for (uint32_t i = 0; i < si->nsheets; i++)
			free(s->sheets[i].raw);
		free(s->sheets);
	}
	sprite_store_close(s->store);
	for (int k = 0; k < 2; k++) {
		if (s->img_fd[k] >= 0)
			close(s->img_fd[k]);
		if (s->img_xfd[k] >= 0)
			close(s->img_xfd[k]);
		if (s->lab_fd[k] >= 0)
			close(s->lab_fd[k]);
		if (s->files[k]) {
			for (uint64_t i = 0; i < s->nfiles[k]; i++)
				free(s->files[k][i].path);
			free(s->files[k]);
			free(s->bad[k]);
		}
		free(s->px[k]);
		free(s->lab[k]);
	}
	if (s->info.class_names)
		for (uint32_t i = 0; i < s->info.nclasses; i++)
			free(s->info.class_names[i]);
	free(s->info.class_names);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}

int hn_source_read(hn_source *s, int split, uint64_t epoch, uint64_t batch_index,
		   const uint32_t *idx, int n, uint8_t *tiles, uint16_t *labels, char *err)
{
	if (split != HN_SPLIT_TRAIN && split != HN_SPLIT_TEST)
		return fail(err, -EINVAL, "bad split");
	int rc = -EINVAL;
	switch (s->kind) {
	case SRC_STORE:
		rc = store_read(s, split, idx, n, tiles, labels, err);
		break;
	case SRC_MOUNT:
		if (split == HN_SPLIT_TRAIN && s->use_views &&
		    !__atomic_load_n(&s->views_off, __ATOMIC_RELAXED)) {
			char why[HN_ERR_MAX];
			if (epoch >= s->view_epochs) /* dataset.json's "count": said, not silent */
				rc = fail(why, -ENOENT,
					  "%s/%s/epochs/%" PRIu64 "/%" PRIu64 ": past the %" PRIu64
					  " epochs the mount lists (-o epochs=%" PRIu64 ")",
					  s->root, s->train_split, s->seed, epoch, s->view_epochs,
					  s->view_epochs);
			else
				rc = view_read(s, epoch, batch_index, idx, n, tiles, labels, why);
			if (rc != -ENOENT) {
				if (rc < 0)
					memcpy(err, why, HN_ERR_MAX);
				break;
			}
			/* The view did not open: gather this batch and the rest, said once. */
			if (!__atomic_exchange_n(&s->views_off, 1, __ATOMIC_RELAXED))
				views_note(s, why);
		}
		rc = mount_read(s, split, idx, n, tiles, labels, err);
		break;
	case SRC_IMAGES:
		return images_read(s, split, idx, n, tiles, labels, err); /* those that decode */
	case SRC_IDX:
	case SRC_MEMORY:
		rc = memory_read(s, split, idx, n, tiles, labels, err);
		break;
	}
	return rc < 0 ? rc : n;
}

void hn_source_perm(const hn_source *s, uint64_t seed, uint64_t epoch, uint32_t window,
		    uint32_t *perm)
{
	uint32_t n = (uint32_t)s->info.count[0];
	if (window)
		sprite_perm_windowed(seed, epoch, n,
				     s->info.sheet_tiles ? s->info.sheet_tiles : 1024, window,
				     perm);
	else
		sprite_perm(seed, epoch, n, perm);
}

/* ---- --preload --------------------------------------------------------- */

enum { PRELOAD_CHUNK = 256 };

struct preload_job {
	hn_source *s;
	pthread_mutex_t lock;
	uint64_t next[2];
	uint8_t *px[2];
	uint16_t *lab[2];
	uint32_t *got[2]; /* samples read per chunk (fewer where image files did not decode) */
	int rc;
	char err[HN_ERR_MAX];
};

static void *preload_worker(void *arg)
{
	struct preload_job *j = arg;
	enum { CHUNK = PRELOAD_CHUNK };
	uint32_t idx[CHUNK];
	for (;;) {
		pthread_mutex_lock(&j->lock);
		int k = j->next[0] < j->s->info.count[0] ? 0 : 1;
		uint64_t first = j->next[k];
		if (j->rc < 0 || first >= j->s->info.count[k]) {
			pthread_mutex_unlock(&j->lock);
			return NULL;
		}
		uint64_t n = j->s->info.count[k] - first;
		if (n > CHUNK)
			n = CHUNK;
		j->next[k] += n;
		pthread_mutex_unlock(&j->lock);
		for (uint64_t i = 0; i < n; i++)
			idx[i] = (uint32_t)(first + i);
		char err[HN_ERR_MAX] = "";
		/* Index order, so a mount is read through images.npy, not epoch views. */
		int rc = j->s->kind == SRC_MOUNT
				 ? mount_read(j->s, k, idx, (int)n,
					      j->px[k] + first * j->s->tile_bytes,
					      j->lab[k] + first, err)
				 : hn_source_read(j->s, k, 0, 0, idx, (int)n,
						  j->px[k] + first * j->s->tile_bytes,
						  j->lab[k] + first, err);
		if (rc < 0) {
			pthread_mutex_lock(&j->lock);
			if (j->rc == 0) {
				j->rc = rc;
				memcpy(j->err, err, sizeof err);
			}
			pthread_mutex_unlock(&j->lock);
			return NULL;
		}
		/* mount_read gives 0; hn_source_read the samples it read */
		j->got[k][first / CHUNK] = j->s->kind == SRC_MOUNT ? (uint32_t)n : (uint32_t)rc;
	}
}

/* Close the gaps the files that did not decode left at the ends of chunks. */
static uint64_t preload_compact(struct preload_job *j, int k, size_t tile_bytes)
{
	uint64_t n = j->s->info.count[k], w = 0;
	for (uint64_t first = 0; first < n; first += PRELOAD_CHUNK) {
		uint32_t m = j->got[k][first / PRELOAD_CHUNK];
		if (w != first && m) {
			memmove(j->px[k] + w * tile_bytes, j->px[k] + first * tile_bytes,
				m * tile_bytes);
			memmove(j->lab[k] + w, j->lab[k] + first, m * sizeof *j->lab[k]);
		}
		w += m;
	}
	return w;
}

int hn_source_preload(hn_source *s, int nthreads, char *err)
{
	struct preload_job j = {.s = s};
	pthread_mutex_init(&j.lock, NULL);
	for (int k = 0; k < 2; k++) {
		j.px[k] = malloc(s->info.count[k] * s->tile_bytes + 1);
		j.lab[k] = malloc(s->info.count[k] * sizeof(uint16_t) + 2);
		j.got[k] = calloc(s->info.count[k] / PRELOAD_CHUNK + 1, sizeof *j.got[k]);
		if (!j.px[k] || !j.lab[k] || !j.got[k]) {
			for (int i = 0; i < 2; i++) {
				free(j.px[i]);
				free(j.lab[i]);
				free(j.got[i]);
			}
			return fail(err, -ENOMEM, "--preload: not enough memory for the data set");
		}
	}
	if (nthreads < 1)
		nthreads = 1;
	if (nthreads > 64)
		nthreads = 64;
	pthread_t t[64];
	int started = 0;
	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&t[i], NULL, preload_worker, &j) == 0)
			started++;
		else
			break;
	if (!started)
		preload_worker(&j);
	for (int i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	pthread_mutex_destroy(&j.lock);
	if (j.rc < 0) {
		for (int i = 0; i < 2; i++) {
			free(j.px[i]);
			free(j.lab[i]);
			free(j.got[i]);
		}
		return fail(err, j.rc, "%s", j.err);
	}
	/* From here on the source is memory: drop what the original kind held. */
	for (int k = 0; k < 2; k++) {
		s->info.count[k] = preload_compact(&j, k, s->tile_bytes);
		free(j.got[k]);
		free(s->px[k]);
		free(s->lab[k]);
		s->px[k] = j.px[k];
		s->lab[k] = j.lab[k];
		s->info.full_count[k] = s->info.count[k];
	}
	if (s->info.count[0] == 0)
		return fail(err, -ENODATA, "%s: no training sample decodes", s->root);
	char d[sizeof s->describe];
	memcpy(d, s->describe, sizeof d);
	snprintf(s->describe, sizeof s->describe, "preloaded in RAM from %.480s", d);
	size_t l = strlen(s->info.kind);
	if (l + 10 < sizeof s->info.kind)
		strcat(s->info.kind, "+preload");
	s->kind = SRC_MEMORY;
	return 0;
}
