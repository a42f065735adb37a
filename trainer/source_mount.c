/*
 * source_mount.c - a spritefs mount as a data source (data.h: "mount").
 *
 * The mount is read with open/pread only (never through fs/ code), as any
 * other trainer would read it: dataset.json for the classes, then for each
 * split <split>/images.npy and labels.npy. The labels of the samples the
 * run uses are read once at start; a batch is gathered from images.npy with
 * one pread per run of consecutive indices. Where the mount offers epoch
 * views laid out for exactly this run (seed, batch size, order), a training
 * batch is one view file instead, checked against the permutation.
 *
 * A daemon that has gone (ENOTCONN, ECONNABORTED) is said so, with the way
 * out (`fusermount3 -u`, mount again), and never gathered around: every
 * file of the mount is gone with it. The daemon's pid, from stats.json at
 * open, lets the loader's watchdog name a daemon that hangs.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/batch.h"
#include "common/perm.h"
#include "common/store.h"
#include "common/util.h"
#include "trainer/dsjson.h"
#include "trainer/npy.h"
#include "trainer/source.h"

struct mount_src {
	int img_fd[2], lab_fd[2]; /* images through the page cache; labels exact */
	int img_xfd[2];		  /* images exact: retries a range next to a bad sheet */
	uint64_t img_off[2], lab_off[2];
	int lab_size[2];  /* bytes per label in labels.npy: 1, 2, 4 or 8 */
	uint16_t *lab[2]; /* the labels of the samples used, read at start */
	int epochs_dir;	  /* the mount offers <split>/epochs */
	uint64_t seed;
	uint32_t batch;
	int use_views; /* epoch views match this run (no --limit, same batch and order) */
	int views_off; /* a view did not open: gather from then on (atomic) */
	void (*on_note)(void *ctx, const char *note);
	void *note_ctx;
	int views_match;      /* dataset.json says the views use our batch and order */
	char views_why[300];  /* why not */
	uint64_t view_epochs; /* views exist for epochs below this */
	long pid;	      /* the daemon's (stats.json), 0 when unknown */
	char train_split[SPRITE_SPLIT_NAME_MAX + 1], test_split[SPRITE_SPLIT_NAME_MAX + 1];
};

/*
 * What EIO from a spritefs mount means: a sheet failed its checksum (the
 * daemon names it once in its log and counts it in .spritefs/stats.json).
 */
static const char *eio_hint(int rc)
{
	return rc == -EIO ? " (the mount could not verify a sheet; see its log or "
			    ".spritefs/stats.json; --skip-bad-sheets trains without its samples)"
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

static int is_gone(int rc)
{
	return rc == -ENOTCONN || rc == -ECONNABORTED;
}

/* A read failed with rc because the daemon is gone: say so, and how to recover. */
static int gone(const hn_source *s, int rc, char *err)
{
	return sprite_fail(err, rc,
			   "the spritefs daemon serving %s is gone (%s): `fusermount3 -u %s`, "
			   "then mount again",
			   s->root, strerror(-rc), s->root);
}

/*
 * The largest dataset.json taken: 65,535 classes whose 255-byte names are
 * escaped in full, twice (classes, class_dirs), with the per-split tables.
 */
#define DSJSON_MAX (256u << 20)

/*
 * Read a whole small file (< cap bytes) into a NUL-terminated buffer that
 * grows with what the file really holds, so that a generous cap costs
 * nothing for the usual small file.
 */
static int read_small_file(const char *path, size_t cap, char **out, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char *buf = NULL;
	size_t n = 0, size = 0;
	int rc = 0;
	for (;;) {
		if (n + 1 >= size) {
			size_t want = size ? size * 2 : 64 << 10;
			if (want > cap + 1)
				want = cap + 1;
			char *nb = n + 1 < want ? realloc(buf, want) : NULL;
			if (!nb) {
				rc = n + 1 >= want ? -EFBIG : -ENOMEM;
				break;
			}
			buf = nb;
			size = want;
		}
		ssize_t r = read(fd, buf + n, size - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	buf[n] = 0;
	*out = buf;
	*len = n;
	return 0;
}

/* hn_npy_read_header on path, with what an EIO from the mount means. */
static int npy_header(int fd, const char *path, struct hn_npy *h, char *err)
{
	int rc = hn_npy_read_header(fd, path, h, err);
	if (rc == -EIO) {
		size_t l = strlen(err);
		snprintf(err + l, HN_ERR_MAX - l, "%s", eio_hint(rc));
	}
	return rc;
}

static int mount_open_split(hn_source *s, int k, const char *split, char *err)
{
	struct mount_src *m = s->priv;
	char path[4200];
	struct hn_npy h;
	snprintf(path, sizeof path, "%s/%s/images.npy", s->root, split);
	m->img_fd[k] = open(path, O_RDONLY | O_CLOEXEC);
	if (m->img_fd[k] < 0 || (m->img_xfd[k] = open_exact(path)) < 0)
		return is_gone(-errno) ? gone(s, -errno, err)
				       : sprite_fail(err, -errno, "%s: %s", path, strerror(errno));
	int rc = npy_header(m->img_xfd[k], path, &h, err);
	if (rc < 0)
		return rc;
	m->img_off[k] = h.data_off;
	if (h.itemsize != 1 || h.is_signed || (h.ndim != 3 && h.ndim != 4))
		return sprite_fail(err, -EINVAL, "%s: expected uint8 images of shape (N,H,W[,C])",
				   path);
	uint32_t ht = (uint32_t)h.shape[1], w = (uint32_t)h.shape[2],
		 c = h.ndim == 4 ? (uint32_t)h.shape[3] : 1;
	if (!ht || !w || !c || ht > SPRITE_MAX_TILE_SIDE || w > SPRITE_MAX_TILE_SIDE ||
	    c > SPRITE_MAX_CHANNELS || h.shape[0] > UINT32_MAX)
		return sprite_fail(err, -EINVAL, "%s: tile shape %ux%ux%u out of range", path, ht,
				   w, c);
	if (k == 0) {
		s->info.h = ht;
		s->info.w = w;
		s->info.c = c;
	} else if (ht != s->info.h || w != s->info.w || c != s->info.c) {
		return sprite_fail(err, -EINVAL, "%s: tile shape differs from the training split's",
				   path);
	}
	s->info.full_count[k] = h.shape[0];

	snprintf(path, sizeof path, "%s/%s/labels.npy", s->root, split);
	m->lab_fd[k] = open_exact(path);
	if (m->lab_fd[k] < 0)
		return sprite_fail(err, -errno, "%s: %s", path, strerror(errno));
	rc = npy_header(m->lab_fd[k], path, &h, err);
	if (rc < 0)
		return rc;
	m->lab_off[k] = h.data_off;
	if (h.ndim != 1 || h.shape[0] != s->info.full_count[k])
		return sprite_fail(err, -EINVAL, "%s: expected %" PRIu64 " labels", path,
				   s->info.full_count[k]);
	m->lab_size[k] = h.itemsize;
	return 0;
}

/*
 * Use the mount's epoch views only when they hold exactly our batches:
 * dataset.json's "epochs" batch equals --batch, and the training split's
 * order (full, or windowed with the same window) is the one this run uses.
 * Views are read for the epochs the mount lists, < "count"; later epochs
 * are gathered, with a note as for a view that does not open.
 */
static void views_check(const hn_source *s, struct mount_src *m, const struct hn_dsjson *d,
			const struct hn_source_options *o)
{
	m->view_epochs = d->view_epochs;
	uint32_t want = o->window == HN_WINDOW_DATASET ? s->info.order_window : o->window;
	/* a window of all the split's sheets or more is the full order */
	uint64_t T = s->info.sheet_tiles ? s->info.sheet_tiles : 1024,
		 sheets = (s->info.full_count[0] + T - 1) / T;
	if (want >= sheets)
		want = 0;
	m->views_match = d->view_batch == o->batch && d->view_batch > 0 &&
			 ((!strcmp(d->order, "full") && want == 0) ||
			  (!strcmp(d->order, "windowed") && d->window == want && want > 0));
	if (!m->views_match)
		snprintf(m->views_why, sizeof m->views_why,
			 "its epoch views hold batches of %u in the %s order%s, this run wants "
			 "batches of %u in the %s order (window %u): mount it with -o batch=%u%s "
			 "to read them",
			 d->view_batch, d->order, "", o->batch, want ? "windowed" : "full", want,
			 o->batch,
			 o->window == HN_WINDOW_DATASET ? ""
			 : want				? ",window=N (this N)"
							: ",window=full");
}

static int mount_open(hn_source *s, const char *path, const struct hn_source_options *o, char *err)
{
	struct mount_src *m = calloc(1, sizeof *m);
	if (!m)
		return sprite_fail(err, -ENOMEM, "out of memory");
	s->priv = m;
	for (int k = 0; k < 2; k++)
		m->img_fd[k] = m->img_xfd[k] = m->lab_fd[k] = -1;
	char p[4200], *json = NULL;
	size_t len = 0;
	snprintf(s->info.kind, sizeof s->info.kind, "mount");
	snprintf(p, sizeof p, "%s/dataset.json", path);
	int rc = read_small_file(p, DSJSON_MAX, &json, &len);
	if (rc < 0)
		return is_gone(rc) ? gone(s, rc, err)
				   : sprite_fail(err, rc, "%s: %s", p, strerror(-rc));
	char *stats = NULL, *at;
	size_t stats_len;
	snprintf(p, sizeof p, "%s/.spritefs/stats.json", path);
	if (read_small_file(p, 1 << 16, &stats, &stats_len) == 0 &&
	    (at = strstr(stats, "\"pid\": ")))
		m->pid = strtol(at + 7, NULL, 10);
	free(stats);
	snprintf(p, sizeof p, "%s/dataset.json", path);
	struct hn_dsjson d;
	rc = hn_dsjson_parse(json, len, p, o->train_split, &d, err);
	free(json);
	if (rc == 0)
		rc = hn_source_set_classes(s, d.nclasses, (const char *const *)d.classes);
	if (rc == 0) {
		if (d.sheet_tiles)
			s->info.sheet_tiles = d.sheet_tiles;
		snprintf(s->info.name, sizeof s->info.name, "%s", d.name);
	}
	if (rc == 0)
		rc = mount_open_split(s, 0, o->train_split, err);
	if (rc == 0 && !hn_source_no_test(o->test_split))
		rc = mount_open_split(s, 1, o->test_split, err);
	if (rc == 0) {
		/* a mount from before the order was the data set's: the default */
		s->info.order_window =
			d.order_window >= 0
				? (uint32_t)d.order_window
				: sprite_order_window(s->info.sheet_tiles ? s->info.sheet_tiles
									  : 1024,
						      (uint64_t)s->info.h * s->info.w * s->info.c);
		views_check(s, m, &d, o);
	}
	hn_dsjson_free(&d);
	if (rc < 0)
		return rc;
	snprintf(p, sizeof p, "%s/%s/epochs", path, o->train_split);
	struct stat st;
	m->epochs_dir = stat(p, &st) == 0 && S_ISDIR(st.st_mode);
	m->seed = o->seed;
	m->batch = o->batch;
	snprintf(m->train_split, sizeof m->train_split, "%s", o->train_split);
	snprintf(m->test_split, sizeof m->test_split, "%s",
		 hn_source_no_test(o->test_split) ? "" : o->test_split);
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
 * The labels of the samples this run uses, read once at open into
 * m->lab[k] by id: 1-8 bytes a sample, and only their range (ids up to
 * hn_source_span), and with a --limit pick only the sheets holding a picked
 * id, so that a bad sheet the run does not use does not stop it. A range
 * that fails is read again sheet by sheet to name the samples it holds.
 */
static int mount_load_labels(hn_source *s, int k, const char *split, char *err)
{
	struct mount_src *ms = s->priv;
	uint64_t n = hn_source_span(s, k), per = s->info.sheet_tiles ? s->info.sheet_tiles : 1024;
	uint64_t chunk = per * (1 + (1u << 20) / (per * 8)); /* whole sheets, about 1 MiB */
	const uint32_t *pick = hn_source_ids(s, k);
	uint64_t p = 0;
	if (pick)
		chunk = per; /* sheet by sheet: those without a picked id are not read */
	int ls = ms->lab_size[k];
	uint8_t *buf = malloc((size_t)(chunk * (uint64_t)ls));
	ms->lab[k] = calloc((size_t)(n ? n : 1), sizeof(uint16_t));
	if (!buf || !ms->lab[k]) {
		free(buf);
		return sprite_fail(err, -ENOMEM, "out of memory for %" PRIu64 " labels", n);
	}
	int rc = 0;
	for (uint64_t first = 0; first < n && rc == 0; first += chunk) {
		uint64_t m = n - first < chunk ? n - first : chunk;
		while (pick && p < s->info.count[k] && pick[p] < first)
			p++;
		if (pick && (p == s->info.count[k] || pick[p] >= first + m))
			continue;
		rc = sprite_pread_full(ms->lab_fd[k], buf, (size_t)(m * (uint64_t)ls),
				       ms->lab_off[k] + first * (uint64_t)ls);
		uint64_t a = first, b = first + m;
		for (uint64_t f = first; rc < 0 && f < first + m; f += per) {
			/* which sheet: the first range that fails on its own */
			a = f;
			b = f + per < first + m ? f + per : first + m;
			int r = sprite_pread_full(ms->lab_fd[k], buf,
						  (size_t)((b - a) * (uint64_t)ls),
						  ms->lab_off[k] + a * (uint64_t)ls);
			if (r < 0) {
				rc = r;
				break;
			}
		}
		if (is_gone(rc)) {
			rc = gone(s, rc, err);
			break;
		}
		if (rc < 0) {
			char range[48];
			if (b - a > 1)
				snprintf(range, sizeof range, "samples %" PRIu64 "-%" PRIu64, a,
					 b - 1);
			else
				snprintf(range, sizeof range, "sample %" PRIu64, a);
			rc = sprite_fail(
				err, rc, "%s/%s/labels.npy: %s: %s%s", s->root, split, range,
				rc == -ENODATA ? "shorter than its header says" : strerror(-rc),
				eio_hint(rc));
			break;
		}
		for (uint64_t j = 0; j < m; j++) {
			uint16_t l = label_at(buf + j * (uint64_t)ls, ls);
			if (l >= s->info.nclasses) {
				rc = sprite_fail(err, -EINVAL,
						 "%s/%s/labels.npy: sample %" PRIu64
						 ": label %u out of range (%u classes)",
						 s->root, split, first + j, l, s->info.nclasses);
				break;
			}
			ms->lab[k][first + j] = l;
		}
	}
	free(buf);
	return rc;
}

/* Samples [i, i + run) of split into dst: through the page cache, else exactly. */
static int gather_run(hn_source *s, int split, uint64_t i, int run, uint8_t *dst, char *err)
{
	struct mount_src *m = s->priv;
	const char *name = split == HN_SPLIT_TRAIN ? m->train_split : m->test_split;
	size_t len = (size_t)run * s->tile_bytes;
	uint64_t off = m->img_off[split] + i * s->tile_bytes;
	int rc = sprite_pread_full(m->img_fd[split], dst, len, off);
	if (rc == -EIO)
		rc = sprite_pread_full(m->img_xfd[split], dst, len, off);
	if (is_gone(rc))
		return gone(s, rc, err);
	if (rc < 0)
		return sprite_fail(err, rc,
				   "%s/%s/images.npy: samples %" PRIu64 "-%" PRIu64 ": %s%s",
				   s->root, name, i, i + (uint64_t)run - 1,
				   rc == -ENODATA ? "shorter than its header says" : strerror(-rc),
				   eio_hint(rc));
	return 0;
}

/*
 * Gather samples with one pread per run of consecutive indices, through the
 * page cache; a run that fails with EIO is read again exactly (the kernel
 * may have read ahead into a bad sheet the run does not need). With
 * --skip-bad-sheets a run that still fails is read sample by sample, and
 * the samples that fail with EIO mark their sheet bad and are left out:
 * the rest are packed first, in idx order.
 */
static int mount_gather(hn_source *s, const struct hn_batch *b, char *err)
{
	struct mount_src *m = s->priv;
	int split = b->split, n = b->n, w = 0;
	const uint32_t *idx = b->idx;
	for (int k = 0; k < n;) {
		if (hn_source_on_bad_sheet(s, split, idx[k])) {
			k++;
			continue;
		}
		int run = 1;
		while (k + run < n && idx[k + run] == idx[k] + (uint32_t)run && run < 4096 &&
		       !hn_source_on_bad_sheet(s, split, idx[k + run]))
			run++;
		uint64_t i = idx[k];
		if (i + (uint64_t)run > hn_source_span(s, split))
			return sprite_fail(err, -ERANGE, "%s: sample %" PRIu64 " out of range",
					   s->root, i);
		uint8_t *dst = b->tiles + (size_t)w * s->tile_bytes;
		int rc = gather_run(s, split, i, run, dst, err);
		if (rc == -EIO && s->bad_sheet[split]) {
			for (int j = 0; j < run; j++) {
				if (hn_source_on_bad_sheet(s, split, i + (uint64_t)j))
					continue;
				rc = gather_run(s, split, i + (uint64_t)j, 1,
						b->tiles + (size_t)w * s->tile_bytes, err);
				if (rc == -EIO) {
					char why[HN_ERR_MAX];
					snprintf(why, sizeof why,
						 "%.120s/%s/images.npy: sample %" PRIu64
						 ": %s (the mount could not verify its sheet)",
						 s->root,
						 split == HN_SPLIT_TRAIN ? m->train_split
									 : m->test_split,
						 i + (uint64_t)j, strerror(EIO));
					hn_source_mark_bad_sheet(s, split, i + (uint64_t)j, why);
					continue;
				}
				if (rc < 0)
					return rc;
				b->labels[w++] = m->lab[split][i + (uint64_t)j];
			}
			k += run;
			continue;
		}
		if (rc < 0)
			return rc;
		memcpy(b->labels + w, m->lab[split] + i, (size_t)run * sizeof *b->labels);
		w += run;
		k += run;
	}
	return w;
}

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
 * at read) is read the plain way. One preadv puts the view's head (header,
 * labels, ids) in a small buffer and its tiles straight into the batch:
 * no bounce buffer of the whole view to fault in, and no second copy.
 */
static int preadv_full(int fd, struct iovec *iov, int n, uint64_t off)
{
	while (n > 0) {
		ssize_t r = preadv(fd, iov, n, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ENODATA;
		off += (uint64_t)r;
		for (; n > 0 && (size_t)r >= iov->iov_len; iov++, n--)
			r -= (ssize_t)iov->iov_len;
		if (n > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + r;
			iov->iov_len -= (size_t)r;
		}
	}
	return 0;
}

/*
 * want[0] from offset 0 (the view's head) and want[1] from TILES_AT (its
 * tiles, or a range of them): one preadv where they are contiguous.
 */
static int view_load(const char *path, const struct iovec *want, uint64_t tiles_at, int *opened)
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
		struct iovec iov[2] = {want[0], want[1]}; /* preadv_full moves them on */
		if (tiles_at == want[0].iov_len)
			rc = preadv_full(fd, iov, 2, 0);
		else if ((rc = preadv_full(fd, iov, 1, 0)) == 0)
			rc = preadv_full(fd, iov + 1, 1, tiles_at);
		close(fd);
	}
	return rc;
}

/* Say once that the training split is gathered although the banner said views. */
static void views_note(struct mount_src *m, const char *why)
{
	if (!m->on_note)
		return;
	char note[HN_ERR_MAX + 160];
	snprintf(note, sizeof note,
		 "%s; epoch views unusable, gathering from %s/images.npy instead (the same "
		 "samples in the same order)",
		 why, m->train_split);
	m->on_note(m->note_ctx, note);
}

/*
 * Samples [a, a + k) of view v (vn samples in all) into the batch at sample
 * w. A view that does not open (the mount has no view for this seed, or
 * cannot take another seed: ENOSPC) returns -ENOENT with the reason in err,
 * for the caller to gather instead. A view that opened and then fails to
 * read is an error.
 */
static int view_read_range(hn_source *s, const struct hn_batch *bt, uint64_t v, uint64_t vn,
			   uint64_t a, uint64_t k, uint64_t w, char *err)
{
	struct mount_src *m = s->priv;
	size_t tb = s->tile_bytes;
	char path[4400];
	snprintf(path, sizeof path, "%s/%s/epochs/%" PRIu64 "/%" PRIu64 "/%" PRIu64 ".sprite",
		 s->root, m->train_split, m->seed, bt->epoch, v);
	struct sprite_batch_header hdr;
	sprite_batch_layout((uint32_t)vn, s->info.h, s->info.w, s->info.c, &hdr);
	size_t head = hdr.tiles_offset;
	uint8_t *buf = malloc(head);
	if (!buf)
		return sprite_fail(err, -ENOMEM, "%s: out of memory", path);
	int opened;
	struct iovec want[2] = {{buf, head}, {bt->tiles + w * tb, (size_t)k * tb}};
	int rc = view_load(path, want, head + a * tb, &opened);
	if (rc < 0) {
		free(buf);
		if (is_gone(rc)) /* not a view that is missing: every file is gone */
			return gone(s, rc, err);
		if (!opened)
			return sprite_fail(err, -ENOENT, "%s: %s", path, strerror(-rc));
		return sprite_fail(err, rc, "%s: %s%s", path,
				   rc == -ENODATA ? "shorter than its batch" : strerror(-rc),
				   eio_hint(rc));
	}
	/*
	 * The head must be the layout of exactly this view (the split index
	 * aside): then its labels and ids lie where the layout says, and the
	 * tiles read into the batch are the view's.
	 */
	struct sprite_batch_header got;
	memcpy(&got, buf, sizeof got);
	got.split = hdr.split;
	if (memcmp(&got, &hdr, sizeof hdr) != 0)
		rc = sprite_fail(err, -EINVAL, "%s: batch of %u %ux%ux%u tiles, expected %" PRIu64,
				 path, got.count, got.h, got.w, got.c, vn);
	const uint16_t *labels = (const uint16_t *)(buf + hdr.labels_offset);
	const uint32_t *ids = (const uint32_t *)(buf + hdr.ids_offset);
	for (uint64_t j = 0; rc == 0 && j < k; j++) {
		if (ids[a + j] != bt->idx[w + j])
			rc = sprite_fail(err, -EINVAL,
					 "%s: sample %" PRIu64 " is %u, the permutation says %u",
					 path, a + j, ids[a + j], bt->idx[w + j]);
		else if (labels[a + j] >= s->info.nclasses)
			rc = sprite_fail(err, -EINVAL, "%s: label out of range", path);
		else
			bt->labels[w + j] = labels[a + j];
	}
	free(buf);
	return rc;
}

/* A training batch that is one whole epoch view. */
static int view_read(hn_source *s, const struct hn_batch *bt, char *err)
{
	return view_read_range(s, bt, bt->view, (uint64_t)bt->n, 0, (uint64_t)bt->n, 0, err);
}

/*
 * A rank's share of a short last global batch, which no view holds whole:
 * its samples are positions [order_pos, order_pos + n) of the epoch's
 * order, so they lie in one view or a few, each read in part. Gathering
 * them from images.npy instead made a cold mount read the store 1.4x over
 * with 3-6 ranks: images.npy is read ahead in store order, and the sheets
 * it brought in were the order's past windows, not the next ones. Errors as
 * view_read's.
 */
static int view_read_part(hn_source *s, const struct hn_batch *bt, char *err)
{
	struct mount_src *m = s->priv;
	uint64_t count = s->info.full_count[HN_SPLIT_TRAIN], batch = m->batch;
	int rc = 0;
	for (uint64_t w = 0; rc == 0 && w < (uint64_t)bt->n;) {
		uint64_t p = bt->order_pos + w, v = p / batch, a = p % batch;
		uint64_t vn = count - v * batch < batch ? count - v * batch : batch;
		uint64_t k = vn - a < (uint64_t)bt->n - w ? vn - a : (uint64_t)bt->n - w;
		rc = view_read_range(s, bt, v, vn, a, k, w, err);
		w += k;
	}
	return rc;
}

/* A training batch from its epoch view while the views serve, else gathered. */
static int mount_read(hn_source *s, const struct hn_batch *b, char *err)
{
	struct mount_src *m = s->priv;
	if (b->split == HN_SPLIT_TRAIN && m->use_views && (b->view != HN_NO_VIEW || b->in_order) &&
	    !__atomic_load_n(&m->views_off, __ATOMIC_RELAXED)) {
		char why[HN_ERR_MAX];
		int rc;
		if (b->epoch >= m->view_epochs) /* dataset.json's "count": said, not silent */
			rc = sprite_fail(why, -ENOENT,
					 "%s/%s/epochs/%" PRIu64 "/%" PRIu64 ": past the %" PRIu64
					 " epochs the mount lists (-o epochs=%" PRIu64 ")",
					 s->root, m->train_split, m->seed, b->epoch, m->view_epochs,
					 m->view_epochs);
		else if (b->view != HN_NO_VIEW)
			rc = view_read(s, b, why);
		else
			rc = view_read_part(s, b, why);
		/* --skip-bad-sheets: a view on an unreadable sheet is gathered around it */
		if (rc == -EIO && s->bad_sheet[b->split])
			return mount_gather(s, b, err);
		if (rc != -ENOENT) {
			if (rc < 0)
				memcpy(err, why, HN_ERR_MAX);
			return rc < 0 ? rc : b->n;
		}
		/* The view did not open: gather this batch and the rest, said once. */
		if (!__atomic_exchange_n(&m->views_off, 1, __ATOMIC_RELAXED))
			views_note(m, why);
	}
	return mount_gather(s, b, err);
}

/* The labels of the samples used, then whether the epoch views serve this run. */
static int mount_start(hn_source *s, const struct hn_source_options *o, char *err)
{
	struct mount_src *m = s->priv;
	int rc;
	for (int k = 0; k < 2; k++)
		if (s->info.count[k] &&
		    (rc = mount_load_labels(s, k, k ? m->test_split : m->train_split, err)) < 0)
			return rc;
	m->on_note = o->on_note;
	m->note_ctx = o->note_ctx;
	if (m->epochs_dir && !m->views_match && !o->limit)
		views_note(m, m->views_why);
	if (m->epochs_dir && o->limit) {
		/* the views order the whole split; --limit orders a sample of it */
		char why[HN_ERR_MAX];
		snprintf(why, sizeof why, "--limit %" PRIu64 ": the views order the whole split",
			 (uint64_t)o->limit);
		views_note(m, why);
	}
	if (m->epochs_dir && m->views_match && !o->limit) {
		/* The mount may refuse this seed (ENOSPC: too many seeds in use). */
		char p[4400];
		struct stat st;
		snprintf(p, sizeof p, "%s/%s/epochs/%" PRIu64, s->root, o->train_split, o->seed);
		m->use_views = stat(p, &st) == 0;
		if (!m->use_views && is_gone(-errno))
			return gone(s, -errno, err);
		if (!m->use_views) {
			char why[HN_ERR_MAX];
			sprite_fail(why, -errno, "%s: %s", p, strerror(errno));
			views_note(m, why);
		}
	}
	if (m->use_views)
		snprintf(s->describe, sizeof s->describe,
			 "mount %.*s: epoch views %s/epochs/%" PRIu64
			 "/<epoch>/<n>.sprite (batch %u)",
			 (int)strlen(s->root), s->root, o->train_split, o->seed, o->batch);
	return 0;
}

static void mount_stalled(hn_source *s, char *out, size_t cap)
{
	const struct mount_src *m = s->priv;
	if (m->pid > 0)
		snprintf(out, cap,
			 "the spritefs daemon serving %s (pid %ld) does not answer: stopped or "
			 "hung (kill -CONT %ld, or end it, fusermount3 -u, mount again)",
			 s->root, m->pid, m->pid);
	else
		snprintf(out, cap,
			 "the spritefs daemon serving %s does not answer: stopped or hung (end it, "
			 "fusermount3 -u, mount again)",
			 s->root);
}

static void mount_close(hn_source *s)
{
	struct mount_src *m = s->priv;
	if (!m)
		return;
	for (int k = 0; k < 2; k++) {
		if (m->img_fd[k] >= 0)
			close(m->img_fd[k]);
		if (m->img_xfd[k] >= 0)
			close(m->img_xfd[k]);
		if (m->lab_fd[k] >= 0)
			close(m->lab_fd[k]);
		free(m->lab[k]);
	}
	free(m);
	s->priv = NULL;
}

const struct hn_source_ops hn_source_mount_ops = {
	.name = "mount",
	.open = mount_open,
	.start = mount_start,
	.read = mount_read,
	.gather = mount_gather,
	.stalled = mount_stalled,
	.close = mount_close,
};
