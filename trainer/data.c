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

int hn_source_fetch(hn_source *s, const struct hn_batch *b, int gather, char *err)
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
	return hn_source_fetch(s, b, 0, err);
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
