/*
 * source_store.c - a sprite store file as a data source (data.h: "store").
 *
 * The loader threads read and decode sheets themselves (pread, lz4,
 * checksums) into a sheet cache shared between them: a sheet is read once
 * by whichever thread needs it first while the others wait for it, and is
 * kept until the cache goes over its budget (--cache), when the least
 * recently used sheet that no thread holds is dropped. With the whole split
 * cached this is the fastest source; with --window and a small budget it
 * reads a data set larger than RAM a few sheets at a time.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/batch.h"
#include "common/store.h"
#include "trainer/source.h"

/* A decoded store sheet held by the cache; ref > 0 pins it. */
struct sheet_slot {
	uint8_t *raw;
	struct sprite_batch b;
	int state; /* 0 absent, 1 being read, 2 ready */
	int ref;
	uint64_t last_use;
};

struct store_src {
	sprite_store *store;
	int split[2]; /* the store's split index of train and test (-1: none) */
	struct sheet_slot *sheets;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t use_clock, cache_used, cache_budget;
};

static void sheet_evict_locked(struct store_src *st)
{
	while (st->cache_budget && st->cache_used > st->cache_budget) {
		struct sheet_slot *victim = NULL;
		const struct sprite_store_info *si = sprite_store_info(st->store);
		for (uint32_t i = 0; i < si->nsheets; i++) {
			struct sheet_slot *q = &st->sheets[i];
			if (q->state == 2 && q->ref == 0 &&
			    (!victim || q->last_use < victim->last_use))
				victim = q;
		}
		if (!victim)
			return;
		st->cache_used -= victim->b.count
					  ? (uint64_t)sprite_store_sheet_raw_size(
						    st->store, (uint32_t)(victim - st->sheets))
					  : 0;
		free(victim->raw);
		victim->raw = NULL;
		victim->state = 0;
	}
}

/* Check a decoded sheet against the store's shape and classes. */
static int sheet_check(hn_source *s, uint32_t i, const struct sprite_batch *b, char *err)
{
	if (b->h != s->info.h || b->w != s->info.w || b->c != s->info.c)
		return sprite_fail(err, -EINVAL,
				   "%s: sheet %u: tile shape %ux%ux%u differs from the store's",
				   s->root, i, b->h, b->w, b->c);
	for (uint32_t k = 0; k < b->count; k++)
		if (b->labels[k] >= s->info.nclasses)
			return sprite_fail(err, -EINVAL, "%s: sheet %u: label %u >= %u classes",
					   s->root, i, b->labels[k], s->info.nclasses);
	return 0;
}

/* Pin sheet i, reading and decoding it on this thread if it is not cached. */
static int sheet_get(hn_source *s, uint32_t i, struct sheet_slot **out, char *err)
{
	struct store_src *st = s->priv;
	struct sheet_slot *q = &st->sheets[i];
	pthread_mutex_lock(&st->lock);
	while (q->state == 1)
		pthread_cond_wait(&st->cond, &st->lock);
	if (q->state == 2) {
		q->ref++;
		q->last_use = ++st->use_clock;
		pthread_mutex_unlock(&st->lock);
		*out = q;
		return 0;
	}
	q->state = 1;
	pthread_mutex_unlock(&st->lock);

	int64_t raw_size = sprite_store_sheet_raw_size(st->store, i);
	uint8_t *raw = raw_size > 0 ? malloc((size_t)raw_size) : NULL;
	char why[SPRITE_ERR_MAX] = "";
	int64_t r =
		raw ? sprite_store_read_sheet(st->store, i, raw, (size_t)raw_size, why) : -ENOMEM;
	struct sprite_batch b;
	int rc = 0;
	if (r < 0) {
		if (why[0]) /* the store's message names the sheet */
			rc = sprite_fail(err, (int)r, "%s: %s", s->root, why);
		else
			rc = sprite_fail(err, (int)r, "%s: sheet %u: %s", s->root, i,
					 strerror((int)-r));
	} else if ((rc = sprite_batch_parse(raw, (size_t)r, &b, why)) < 0) {
		rc = sprite_fail(err, rc, "%s: sheet %u: %s", s->root, i, why);
	} else {
		rc = sheet_check(s, i, &b, err);
	}
	pthread_mutex_lock(&st->lock);
	if (rc < 0) {
		free(raw);
		q->state = 0;
	} else {
		q->raw = raw;
		q->b = b;
		q->state = 2;
		q->ref = 1;
		q->last_use = ++st->use_clock;
		st->cache_used += (uint64_t)raw_size;
		sheet_evict_locked(st);
		*out = q;
	}
	pthread_cond_broadcast(&st->cond);
	pthread_mutex_unlock(&st->lock);
	return rc;
}

static void sheet_put(struct store_src *st, struct sheet_slot *q)
{
	pthread_mutex_lock(&st->lock);
	q->ref--;
	sheet_evict_locked(st);
	pthread_mutex_unlock(&st->lock);
}

/*
 * The samples of b, packed first in idx order; with --skip-bad-sheets those
 * of a sheet that does not read or decode are left out (the sheet is named
 * once and not read again), else the read fails.
 */
static int store_read(hn_source *s, const struct hn_batch *b, char *err)
{
	struct store_src *st = s->priv;
	struct sheet_slot *q = NULL;
	uint32_t cur = UINT32_MAX;
	int rc = 0, w = 0;
	for (int k = 0; k < b->n; k++) {
		uint32_t sheet, slot, i = b->idx[k];
		if (hn_source_on_bad_sheet(s, b->split, i))
			continue;
		rc = sprite_store_locate(st->store, (uint32_t)st->split[b->split], i, &sheet,
					 &slot);
		if (rc < 0) {
			rc = sprite_fail(err, rc, "%s: sample %u of split %d not found", s->root, i,
					 b->split);
			break;
		}
		if (sheet != cur) {
			if (q)
				sheet_put(st, q);
			q = NULL;
			cur = UINT32_MAX;
			if ((rc = sheet_get(s, sheet, &q, err)) < 0) {
				if (rc != -ENOMEM && !s->bad_sheet[b->split]) {
					size_t l = strnlen(err, HN_ERR_MAX);
					snprintf(err + l, HN_ERR_MAX - l,
						 " (--skip-bad-sheets trains without its samples)");
				}
				if (rc == -ENOMEM || !s->bad_sheet[b->split])
					break;
				hn_source_mark_bad_sheet(s, b->split, i, err);
				rc = 0;
				continue;
			}
			cur = sheet;
		}
		if (slot >= q->b.count) {
			rc = sprite_fail(err, -EINVAL, "%s: sheet %u has no slot %u", s->root,
					 sheet, slot);
			break;
		}
		memcpy(b->tiles + (size_t)w * s->tile_bytes,
		       q->b.tiles + (size_t)slot * s->tile_bytes, s->tile_bytes);
		b->labels[w++] = q->b.labels[slot];
	}
	if (q)
		sheet_put(st, q);
	return rc < 0 ? rc : w;
}

static int store_open(hn_source *s, const char *path, const struct hn_source_options *o, char *err)
{
	struct store_src *st = calloc(1, sizeof *st);
	if (!st)
		return sprite_fail(err, -ENOMEM, "out of memory");
	s->priv = st;
	pthread_mutex_init(&st->lock, NULL);
	pthread_cond_init(&st->cond, NULL);
	st->split[1] = -1;
	char why[SPRITE_ERR_MAX] = "";
	int rc = sprite_store_open(path, &st->store, why);
	if (rc < 0)
		return sprite_fail(err, rc, "%s: not a readable store: %s", path,
				   why[0] ? why : strerror(-rc));
	const struct sprite_store_info *si = sprite_store_info(st->store);
	snprintf(s->info.kind, sizeof s->info.kind, "store");
	snprintf(s->info.name, sizeof s->info.name, "%s", si->name);
	s->info.h = si->tile_h;
	s->info.w = si->tile_w;
	s->info.c = si->tile_c;
	s->info.sheet_tiles = si->sheet_tiles;
	s->info.order_window = si->order_window;
	if ((rc = hn_source_set_classes(s, si->nclasses, si->class_names)) < 0)
		return sprite_fail(err, rc, "out of memory");
	st->split[0] = sprite_store_find_split(st->store, o->train_split);
	if (st->split[0] < 0)
		return sprite_fail(err, -ENOENT, "%s: the store has no split \"%s\"", path,
				   o->train_split);
	s->info.full_count[0] = si->splits[st->split[0]].count;
	if (!hn_source_no_test(o->test_split)) {
		st->split[1] = sprite_store_find_split(st->store, o->test_split);
		if (st->split[1] < 0)
			return sprite_fail(err, -ENOENT,
					   "%s: the store has no split \"%s\" (--test-split none "
					   "trains without evaluation)",
					   path, o->test_split);
		s->info.full_count[1] = si->splits[st->split[1]].count;
	}
	st->sheets = calloc(si->nsheets ? si->nsheets : 1, sizeof *st->sheets);
	if (!st->sheets)
		return sprite_fail(err, -ENOMEM, "out of memory");
	st->cache_budget = o->cache_bytes;
	snprintf(s->describe, sizeof s->describe,
		 "store %s: %u sheets of %u tiles, decoded on the loader threads", path,
		 si->nsheets, si->sheet_tiles);
	return 0;
}

static void store_close(hn_source *s)
{
	struct store_src *st = s->priv;
	if (!st)
		return;
	if (st->sheets) {
		const struct sprite_store_info *si = sprite_store_info(st->store);
		for (uint32_t i = 0; i < si->nsheets; i++)
			free(st->sheets[i].raw);
		free(st->sheets);
	}
	sprite_store_close(st->store);
	pthread_mutex_destroy(&st->lock);
	pthread_cond_destroy(&st->cond);
	free(st);
	s->priv = NULL;
}

const struct hn_source_ops hn_source_store_ops = {
	.name = "store",
	.open = store_open,
	.read = store_read,
	.close = store_close,
};
