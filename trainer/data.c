/*
 * data.c - hntrain's data sources, the part every kind shares: which kind a
 * path is, opening it and checking what it says, reads, the training order,
 * and --preload, which turns any source into an in-memory one.
 *
 * Every source answers one question, "give me samples idx[0..n) of this
 * split", so that the loader threads, the seeded order and the weights are
 * the same whatever the medium; only the cost of answering differs, which is
 * exactly what hntrain measures. Each kind is a file behind struct
 * hn_source_ops (source.h); what a file says (npy headers, dataset.json,
 * IDX sizes, store fields) is checked by its reader before use, and what
 * every source must hold (a tile shape, classes, training samples) here.
 */
#include "trainer/data.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/folder.h"
#include "common/perm.h"
#include "common/store.h"
#include "trainer/source.h"

_Static_assert(HN_ERR_MAX == SPRITE_ERR_MAX, "one message size for sprite_fail");

/* The generator stream of the --limit pick: (seed, this + split), apart from the epochs'. */
#define HN_LIMIT_STREAM 0x4c494d4954000000ull /* "LIMIT" */

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
	return __atomic_load_n(&s->nskipped, __ATOMIC_RELAXED);
}

uint64_t hn_source_bad_sheets(const hn_source *s, uint64_t *samples)
{
	if (samples)
		*samples = __atomic_load_n(&s->nbad_samples, __ATOMIC_RELAXED);
	return __atomic_load_n(&s->nbad_sheets, __ATOMIC_RELAXED);
}

/* ---- --skip-bad-sheets ------------------------------------------------- */

static uint64_t sheet_of(const hn_source *s, uint64_t i)
{
	return i / (s->info.sheet_tiles ? s->info.sheet_tiles : 1024);
}

int hn_source_on_bad_sheet(const hn_source *s, int split, uint64_t i)
{
	return s->bad_sheet[split] &&
	       __atomic_load_n(&s->bad_sheet[split][sheet_of(s, i)], __ATOMIC_RELAXED);
}

void hn_source_mark_bad_sheet(hn_source *s, int split, uint64_t i, const char *why)
{
	if (!s->bad_sheet[split])
		return;
	uint64_t k = sheet_of(s, i), t = s->info.sheet_tiles ? s->info.sheet_tiles : 1024;
	if (__atomic_exchange_n(&s->bad_sheet[split][k], 1, __ATOMIC_RELAXED))
		return;
	/* the samples of the sheet this run reads (--limit reads a sample of them) */
	uint64_t n = s->info.full_count[split];
	uint64_t lo = k * t, hi = lo + t < n ? lo + t : n, used = hi > lo ? hi - lo : 0;
	if (s->pick[split]) {
		used = 0;
		for (uint64_t p = 0; p < s->info.count[split]; p++)
			used += s->pick[split][p] >= lo && s->pick[split][p] < hi;
	}
	__atomic_add_fetch(&s->nbad_sheets, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&s->nbad_samples, used, __ATOMIC_RELAXED);
	if (s->on_skip) {
		char msg[HN_ERR_MAX + 160];
		snprintf(msg, sizeof msg,
			 "%s; its samples %" PRIu64 "-%" PRIu64
			 " of the %s split skipped from now on "
			 "(--skip-bad-sheets)",
			 why, lo, hi ? hi - 1 : 0, split == HN_SPLIT_TRAIN ? "training" : "test");
		s->on_skip(s->skip_ctx, msg);
	}
}

static int bad_sheets_start(hn_source *s, const struct hn_source_options *o, char *err)
{
	s->on_skip = o->on_skip;
	s->skip_ctx = o->skip_ctx;
	if (!o->skip_bad_sheets)
		return 0;
	uint64_t t = s->info.sheet_tiles ? s->info.sheet_tiles : 1024;
	for (int k = 0; k < 2; k++) {
		s->bad_sheet[k] = calloc(s->info.full_count[k] / t + 1, 1);
		if (!s->bad_sheet[k])
			return sprite_fail(err, -ENOMEM, "out of memory");
	}
	return 0;
}

uint64_t hn_source_ignored(const hn_source *s)
{
	return s->nignored;
}

int hn_source_no_test(const char *t)
{
	return !t || !*t || !strcmp(t, "none");
}

int hn_source_set_classes(hn_source *s, uint32_t n, const char *const *names)
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

/*
 * --limit N (and --test-limit) below the split's size: N ids drawn without
 * replacement by selection sampling (Knuth's algorithm S) from a generator
 * keyed by the seed and the split alone, so that they spread over the
 * whole split (a folder sorted by class gives every class its share) and
 * are the same on every medium of the same data set. Ascending, as a
 * source reads best.
 */
static int pick_ids(uint64_t seed, int k, uint64_t want, uint64_t n, uint32_t **out)
{
	uint32_t *ids = malloc((size_t)want * sizeof *ids);
	if (!ids)
		return -ENOMEM;
	struct sprite_rng r;
	sprite_rng_init(&r, seed, HN_LIMIT_STREAM + (uint64_t)k);
	uint64_t got = 0;
	for (uint64_t i = 0; i < n && got < want; i++)
		if (sprite_rng_below(&r, n - i) < want - got)
			ids[got++] = (uint32_t)i;
	*out = ids;
	return 0;
}

static int apply_limits(hn_source *s, const struct hn_source_options *o, char *err)
{
	const uint64_t limit[2] = {o->limit, o->test_limit};
	for (int k = 0; k < 2; k++) {
		s->info.count[k] = s->info.full_count[k];
		if (!limit[k] || limit[k] >= s->info.count[k])
			continue;
		if (s->info.full_count[k] > UINT32_MAX ||
		    pick_ids(o->seed, k, limit[k], s->info.full_count[k], &s->pick[k]) < 0)
			return sprite_fail(err, -ENOMEM, "out of memory for the --%slimit sample",
					   k ? "test-" : "");
		s->info.count[k] = limit[k];
	}
	s->info.has_test = s->info.count[1] > 0;
	return 0;
}

uint64_t hn_source_id(const hn_source *s, int k, uint64_t i)
{
	return s->ids_resolved && s->pick[k] ? s->pick[k][i] : i;
}

uint64_t hn_source_span(const hn_source *s, int k)
{
	uint64_t n = s->info.count[k];
	return s->pick[k] && n ? (uint64_t)s->pick[k][n - 1] + 1 : n;
}

const uint32_t *hn_source_ids(const hn_source *s, int split)
{
	return s->pick[split];
}

/*
 * Read positions b->idx[] of the run's samples: mapped to the source's ids
 * through the --limit pick first. gather: the source's gather where it has
 * one (index order, never a mount's epoch views).
 */
static int fetch(hn_source *s, const struct hn_batch *b, int gather, char *err)
{
	const struct hn_source_ops *ops = s->ops;
	int (*fn)(hn_source *, const struct hn_batch *, char *) =
		gather && ops->gather ? ops->gather : ops->read;
	const uint32_t *pick = s->ids_resolved ? NULL : s->pick[b->split];
	if (!pick)
		return fn(s, b, err);
	struct hn_batch m = *b;
	uint32_t *ids = malloc((size_t)(b->n > 0 ? b->n : 1) * sizeof *ids);
	if (!ids)
		return sprite_fail(err, -ENOMEM, "out of memory");
	for (int i = 0; i < b->n; i++) {
		if (b->idx[i] >= s->info.count[b->split]) {
			free(ids);
			return sprite_fail(err, -ERANGE, "sample %u out of range", b->idx[i]);
		}
		ids[i] = pick[b->idx[i]];
	}
	m.idx = ids;
	int rc = fn(s, &m, err);
	free(ids);
	return rc;
}

/* ---- opening ---------------------------------------------------------- */
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
		sprite_fail(
			err, -EINVAL,
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
		return sprite_fail(err, -errno, "%s: %s", path, strerror(errno));
	if (S_ISREG(st.st_mode))
		return HN_SOURCE_STORE;
	if (!S_ISDIR(st.st_mode))
		return sprite_fail(err, -EINVAL, "%s: neither a store file nor a folder", path);
	snprintf(p, sizeof p, "%s/dataset.json", path);
	if (access(p, R_OK) == 0)
		return HN_SOURCE_MOUNT;
	if (mount_part(path, err))
		return HN_SOURCE_IN_MOUNT;
	return hn_source_idx_has(path) ? HN_SOURCE_IDX : HN_SOURCE_IMAGES;
}

/* ---- the evaluation split -------------------------------------------- */

#define MAX_LISTED 64

/* The split names of path (of that kind), into names[]; how many, or -errno. */
static int list_splits(const char *path, int kind, char names[][SPRITE_SPLIT_NAME_MAX + 1],
		       char *err)
{
	int n = 0;
	if (kind == HN_SOURCE_IDX) {
		snprintf(names[n++], SPRITE_SPLIT_NAME_MAX + 1, "train");
		snprintf(names[n++], SPRITE_SPLIT_NAME_MAX + 1, "test");
	} else if (kind == HN_SOURCE_STORE) {
		char e[SPRITE_ERR_MAX] = "";
		sprite_store *st;
		int r = sprite_store_open(path, &st, e);
		if (r < 0)
			return sprite_fail(err, r, "%s: %s", path, e[0] ? e : strerror(-r));
		const struct sprite_store_info *in = sprite_store_info(st);
		for (uint32_t i = 0; i < in->nsplits && n < MAX_LISTED; i++)
			snprintf(names[n++], SPRITE_SPLIT_NAME_MAX + 1, "%.*s",
				 (int)SPRITE_SPLIT_NAME_MAX, in->splits[i].name);
		sprite_store_close(st);
	} else if (kind == HN_SOURCE_MOUNT) {
		/* a mount's root: dataset.json, stats.json and one folder per split */
		DIR *d = opendir(path);
		if (!d)
			return sprite_fail(err, -errno, "%s: %s", path, strerror(errno));
		struct dirent *de;
		while ((de = readdir(d)) && n < MAX_LISTED)
			if (de->d_type == DT_DIR && de->d_name[0] != '.' &&
			    strlen(de->d_name) <= SPRITE_SPLIT_NAME_MAX)
				snprintf(names[n++], SPRITE_SPLIT_NAME_MAX + 1, "%s", de->d_name);
		closedir(d);
	} else {
		struct sprite_folder f;
		char e[SPRITE_ERR_MAX] = "";
		int r = sprite_folder_list(path, &f, e);
		if (r < 0) {
			sprite_folder_free(&f);
			return sprite_fail(err, r, "%s", e);
		}
		for (size_t i = 0; i < f.nsplits && n < MAX_LISTED; i++)
			if (strlen(f.splits[i].name) <= SPRITE_SPLIT_NAME_MAX)
				snprintf(names[n++], SPRITE_SPLIT_NAME_MAX + 1, "%s",
					 f.splits[i].name);
		sprite_folder_free(&f);
	}
	return n;
}

int hn_source_pick_test_split(const char *path, const char *train_split, char *out, size_t cap,
			      char *err)
{
	static const char *const usual[] = {"val", "valid", "validation", "test"};
	/* data that cannot be listed: "test", and opening it says what is wrong */
	char ignored[HN_ERR_MAX];
	snprintf(out, cap, "test");
	int kind = hn_source_kind(path, ignored);
	if (kind < 0 || kind == HN_SOURCE_IN_MOUNT)
		return 0;
	char(*names)[SPRITE_SPLIT_NAME_MAX + 1] = calloc(MAX_LISTED, sizeof *names);
	if (!names)
		return sprite_fail(err, -ENOMEM, "out of memory");
	int n = list_splits(path, kind, names, ignored);
	if (n < 0) {
		free(names);
		return 0;
	}
	int rc = 0, found = -1, others = 0;
	for (size_t u = 0; rc == 0 && found < 0 && u < sizeof usual / sizeof usual[0]; u++)
		for (int i = 0; i < n; i++)
			if (!strcmp(names[i], usual[u]) && strcmp(names[i], train_split))
				found = i;
	if (found < 0)
		for (int i = 0; rc == 0 && i < n; i++)
			if (strcmp(names[i], train_split)) {
				others++;
				found = found == -1 ? i : found;
			}
	if (rc == 0 && found < 0) {
		out[0] = 0; /* only the training split: no evaluation */
	} else if (rc == 0 && others > 1) {
		char list[HN_ERR_MAX / 2] = "";
		size_t o = 0;
		for (int i = 0; i < n && o < sizeof list; i++)
			if (strcmp(names[i], train_split))
				o += (size_t)snprintf(list + o, sizeof list - o, "%s%s",
						      o ? ", " : "", names[i]);
		rc = sprite_fail(
			err, -EINVAL,
			"%s: which split is the evaluation one? %s (give --test-split NAME, "
			"or none)",
			path, list);
	} else if (rc == 0) {
		snprintf(out, cap, "%s", names[found]);
	}
	free(names);
	return rc;
}

int hn_source_open(const char *path, const struct hn_source_options *o, hn_source **out, char *err)
{
	int kind = hn_source_kind(path, err);
	if (kind < 0)
		return kind;
	if (kind == HN_SOURCE_IN_MOUNT)
		return -EINVAL;
	hn_source *s = calloc(1, sizeof *s);
	if (!s)
		return sprite_fail(err, -ENOMEM, "out of memory");
	s->ops = kind == HN_SOURCE_STORE   ? &hn_source_store_ops
		 : kind == HN_SOURCE_MOUNT ? &hn_source_mount_ops
		 : kind == HN_SOURCE_IDX   ? &hn_source_idx_ops
					   : &hn_source_folder_ops;
	snprintf(s->root, sizeof s->root, "%s", path);
	int rc = s->ops->open(s, path, o, err);
	if (rc >= 0 && (!s->info.h || !s->info.w || !s->info.c || !s->info.nclasses))
		rc = sprite_fail(err, -EINVAL, "%s: empty tile shape or no classes", path);
	if (rc >= 0 && s->info.full_count[0] == 0)
		rc = sprite_fail(err, -EINVAL, "%s: the training split is empty", path);
	if (rc >= 0 && s->info.full_count[0] > UINT32_MAX)
		rc = sprite_fail(err, -EINVAL, "%s: more than 2^32 training samples", path);
	if (rc >= 0) {
		s->tile_bytes = (size_t)s->info.h * s->info.w * s->info.c;
		rc = apply_limits(s, o, err);
		if (rc >= 0)
			rc = bad_sheets_start(s, o, err);
		if (rc >= 0 && s->ops->start)
			rc = s->ops->start(s, o, err);
	}
	if (rc < 0) {
		hn_source_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

void hn_source_close(hn_source *s)
{
	if (!s)
		return;
	s->ops->close(s);
	if (s->info.class_names)
		for (uint32_t i = 0; i < s->info.nclasses; i++)
			free(s->info.class_names[i]);
	free(s->info.class_names);
	free(s->bad_sheet[0]);
	free(s->bad_sheet[1]);
	free(s->pick[0]);
	free(s->pick[1]);
	free(s);
}

/* ---- reading ---------------------------------------------------------- */

int hn_source_read(hn_source *s, const struct hn_batch *b, char *err)
{
	if (b->split != HN_SPLIT_TRAIN && b->split != HN_SPLIT_TEST)
		return sprite_fail(err, -EINVAL, "bad split");
	return fetch(s, b, 0, err);
}

void hn_source_stalled(hn_source *s, char *out, size_t cap)
{
	if (s->ops->stalled)
		s->ops->stalled(s, out, cap);
	else
		snprintf(out, cap, "reading %s", s->root);
}

void hn_source_default_order(hn_source *s)
{
	s->info.sheet_tiles = sprite_default_sheet_tiles(s->info.h, s->info.w, s->info.c);
	s->info.order_window = sprite_order_window(s->info.sheet_tiles,
						   (uint64_t)s->info.h * s->info.w * s->info.c);
}

int hn_source_perm(const hn_source *s, uint64_t seed, uint64_t epoch, uint32_t window,
		   uint32_t *perm, char *err)
{
	uint32_t n = (uint32_t)s->info.count[0];
	/*
	 * No fallback to the full order when the windowed one finds no memory:
	 * that would train on another order than the mount's, without a word.
	 */
	int rc = sprite_order(seed, epoch, n, s->info.sheet_tiles ? s->info.sheet_tiles : 1024,
			      window, perm);
	if (rc < 0)
		return sprite_fail(err, rc,
				   "the training order of epoch %" PRIu64 " (%" PRIu32
				   " samples, windows of %" PRIu32 " sheets): %s",
				   epoch + 1, n, window, strerror(-rc));
	return 0;
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
		struct hn_batch b = {.split = k,
				     .n = (int)n,
				     .idx = idx,
				     .tiles = j->px[k] + first * j->s->tile_bytes,
				     .labels = j->lab[k] + first};
		/* Index order, so a mount is read through images.npy, not epoch views. */
		int rc = fetch(j->s, &b, 1, err);
		if (rc < 0) {
			pthread_mutex_lock(&j->lock);
			if (j->rc == 0) {
				j->rc = rc;
				memcpy(j->err, err, sizeof err);
			}
			pthread_mutex_unlock(&j->lock);
			return NULL;
		}
		j->got[k][first / CHUNK] = (uint32_t)rc; /* fewer where files did not decode */
	}
}

/*
 * Close the gaps the files that did not decode left at the ends of chunks.
 * The samples of unreadable sheets (--skip-bad-sheets) instead keep their
 * places, so that the order is drawn over the same indices as without
 * --preload: each chunk's samples are moved back to them, and the memory
 * source skips those sheets as the store or mount did.
 */
static uint64_t preload_compact(struct preload_job *j, int k, size_t tile_bytes)
{
	uint64_t n = j->s->info.count[k], w = 0;
	if (j->s->bad_sheet[k]) {
		for (uint64_t first = 0; first < n; first += PRELOAD_CHUNK) {
			uint64_t m = j->got[k][first / PRELOAD_CHUNK];
			uint64_t end = first + PRELOAD_CHUNK < n ? first + PRELOAD_CHUNK : n;
			for (uint64_t i = end; i-- > first && m > 0;) {
				if (hn_source_on_bad_sheet(j->s, k, hn_source_id(j->s, k, i)))
					continue;
				m--; /* packed sample m belongs at i (m <= i - first) */
				if (first + m != i) {
					memmove(j->px[k] + i * tile_bytes,
						j->px[k] + (first + m) * tile_bytes, tile_bytes);
					j->lab[k][i] = j->lab[k][first + m];
				}
			}
		}
		return n;
	}
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

int hn_source_channel_stats(hn_source *s, uint64_t max_samples, float *mean, float *std,
			    uint64_t *used, char *err)
{
	enum { CHUNK = 256 };
	const uint64_t count = s->info.count[HN_SPLIT_TRAIN];
	const uint64_t n = count < max_samples ? count : max_samples;
	const uint32_t C = s->info.c;
	const size_t px = (size_t)s->info.h * s->info.w;
	uint64_t sum[HN_NORM_CH] = {0}, sumsq[HN_NORM_CH] = {0}, got = 0;
	if (C < 1 || C > HN_NORM_CH)
		return sprite_fail(err, -EINVAL,
				   "per-channel statistics take 1 to %d channels, "
				   "not %u",
				   HN_NORM_CH, C);
	uint8_t *tiles = malloc(CHUNK * s->tile_bytes + 1);
	uint16_t *labels = malloc(CHUNK * sizeof(uint16_t));
	uint32_t *idx = malloc(CHUNK * sizeof(uint32_t));
	int rc = tiles && labels && idx ? 0 : -ENOMEM;
	for (uint64_t k0 = 0; rc == 0 && k0 < n; k0 += CHUNK) {
		int m = n - k0 < CHUNK ? (int)(n - k0) : CHUNK;
		for (int k = 0; k < m; k++)
			idx[k] = (uint32_t)((k0 + (uint64_t)k) * count / n);
		struct hn_batch b = {.split = HN_SPLIT_TRAIN,
				     .view = HN_NO_VIEW,
				     .n = m,
				     .idx = idx,
				     .tiles = tiles,
				     .labels = labels};
		rc = fetch(s, &b, 1, err);
		if (rc < 0)
			break;
		for (int k = 0; k < rc; k++) { /* the samples read come first */
			const uint8_t *t = tiles + (size_t)k * s->tile_bytes;
			for (size_t i = 0; i < px; i++)
				for (uint32_t c = 0; c < C; c++) {
					uint64_t v = t[i * C + c];
					sum[c] += v;
					sumsq[c] += v * v;
				}
		}
		got += (uint64_t)rc;
		rc = 0;
	}
	free(tiles);
	free(labels);
	free(idx);
	if (rc == -ENOMEM)
		return sprite_fail(err, rc, "out of memory for the per-channel statistics");
	if (rc < 0)
		return rc;
	if (!got)
		return sprite_fail(err, -ENODATA,
				   "no training sample could be read for the "
				   "per-channel statistics");
	for (uint32_t c = 0; c < C; c++) {
		double N = (double)got * (double)px;
		double mu = (double)sum[c] / N, var = (double)sumsq[c] / N - mu * mu;
		mean[c] = (float)(mu / 255.0);
		std[c] = (float)(sqrt(var > 0 ? var : 0) / 255.0);
	}
	*used = got;
	return 0;
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
			return sprite_fail(err, -ENOMEM,
					   "--preload: not enough memory for the data set");
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
		return sprite_fail(err, j.rc, "%s", j.err);
	}
	/* From here on the source is memory: drop what the original kind held. */
	struct hn_mem *mem = calloc(1, sizeof *mem);
	if (!mem) {
		for (int i = 0; i < 2; i++) {
			free(j.px[i]);
			free(j.lab[i]);
			free(j.got[i]);
		}
		return sprite_fail(err, -ENOMEM, "--preload: out of memory");
	}
	s->ops->close(s);
	for (int k = 0; k < 2; k++) {
		s->info.count[k] = preload_compact(&j, k, s->tile_bytes);
		free(j.got[k]);
		mem->px[k] = j.px[k];
		mem->lab[k] = j.lab[k];
		s->info.full_count[k] = s->info.count[k];
	}
	s->ops = &hn_source_mem_ops;
	s->priv = mem;
	s->ids_resolved = 1; /* the memory holds the --limit pick by position */
	if (s->info.count[0] == 0)
		return sprite_fail(err, -ENODATA, "%s: no training sample decodes", s->root);
	char d[sizeof s->describe];
	memcpy(d, s->describe, sizeof d);
	snprintf(s->describe, sizeof s->describe, "preloaded in RAM from %.480s", d);
	size_t l = strlen(s->info.kind);
	if (l + 10 < sizeof s->info.kind)
		strcat(s->info.kind, "+preload");
	return 0;
}
