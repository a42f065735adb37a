/*
 * labels.c - the label table of a split, built on first need.
 *
 * labels.npy, by-class/ and dataset.json's class counts need every sample's
 * label. A version-3 store carries them (checked at open), and then no sheet
 * is read; an older store's are gathered by decoding every sheet of the
 * split, in order, with readahead. A sheet that cannot be decoded, or holds
 * a label out of range, leaves its samples out (UINT16_MAX) and is marked
 * bad, so that by-class/ and labels.npy never show a wrong label. The table
 * also groups sample numbers by class (class_start, class_samples), the
 * listing of by-class/<class>/.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/batch.h"
#include "fs/sfs.h"

int sfs_labels_ensure(struct sfs *fs, struct sfs_split *sp)
{
	const struct sprite_store_info *in = fs->info;
	int r = 0;
	pthread_mutex_lock(&sp->lab_lock);
	if (sp->lab_state) {
		pthread_mutex_unlock(&sp->lab_lock);
		return 0;
	}
	/* The store's label table, checked at open: no sheet to read or decode. */
	const uint16_t *table = sprite_store_labels(fs->store, sp->index);
	uint16_t *labels = table ? NULL : malloc((sp->count ? sp->count : 1) * sizeof(uint16_t));
	uint8_t *bad = calloc(sp->nsheets ? sp->nsheets : 1, 1);
	uint64_t *start = calloc((size_t)in->nclasses + 1, sizeof(uint64_t));
	uint32_t *samples = malloc((sp->count ? sp->count : 1) * sizeof(uint32_t));
	if ((!table && !labels) || !bad || !start || !samples) {
		r = -ENOMEM;
		goto fail;
	}
	if (table)
		goto group;
	for (uint32_t k = 0; k < sp->nsheets; k++) {
		uint32_t i = sp->first_sheet + k;
		const struct sprite_sheet_entry *e = &in->sheets[i];
		const uint8_t *raw;
		struct sprite_batch_header h;
		struct sfs_reader ra = {.kind = SFS_K_LABELS_NPY, .sp = sp, .sheet = i};
		sfs_readahead(fs, &ra);
		int64_t n = sfs_sheet_get(fs, i, &raw);
		if (n < 0) {
			bad[k] = 1;
			for (uint32_t s = 0; s < e->count; s++)
				labels[e->first + s] = UINT16_MAX;
			continue;
		}
		sprite_batch_layout(e->count, in->tile_h, in->tile_w, in->tile_c, &h);
		for (uint32_t s = 0; s < e->count; s++) {
			uint16_t l;
			memcpy(&l, raw + h.labels_offset + 2 * (size_t)s, 2);
			if (l >= in->nclasses) {
				if (!bad[k])
					sfs_log("spritefs: %s: sheet %u: label %u out of range; "
						"its "
						"samples are left out of by-class and labels.npy",
						fs->store_path, i, l);
				bad[k] = 1;
			}
			labels[e->first + s] = l;
		}
		sfs_sheet_put(fs, i);
		if (bad[k])
			for (uint32_t s = 0; s < e->count; s++)
				labels[e->first + s] = UINT16_MAX;
	}
	table = labels;
group:
	for (uint64_t s = 0; s < sp->count; s++)
		if (table[s] != UINT16_MAX)
			start[table[s] + 1]++;
	for (uint32_t c = 0; c < in->nclasses; c++)
		start[c + 1] += start[c];
	{
		uint64_t *fill = calloc(in->nclasses ? in->nclasses : 1, sizeof(uint64_t));
		if (!fill) {
			r = -ENOMEM;
			goto fail;
		}
		for (uint64_t s = 0; s < sp->count; s++)
			if (table[s] != UINT16_MAX)
				samples[start[table[s]] + fill[table[s]]++] = (uint32_t)s;
		free(fill);
	}
	sp->labels = table;
	sp->labels_owned = labels;
	sp->sheet_bad = bad;
	sp->class_start = start;
	sp->class_samples = samples;
	sp->lab_state = 1;
	pthread_mutex_unlock(&sp->lab_lock);
	return 0;
fail:
	free(labels);
	free(bad);
	free(start);
	free(samples);
	pthread_mutex_unlock(&sp->lab_lock);
	return r;
}
