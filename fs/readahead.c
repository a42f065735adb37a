/*
 * readahead.c - what to load ahead of a reader, decided in one place.
 *
 * sfs_readahead() picks the sheets by the kind of file a reader reads:
 * batch files and images.npy ahead in store order (on into the next split),
 * by-class images within their split, epoch views by the epoch's sample
 * order (the cache follows a view with a plan), the label table's pass a
 * few sheets at a time. It only asks the cache to load (sfs_sheet_prefetch*,
 * sfs_cache_stream), so it never blocks; read.c and labels.c call it before
 * they pin the sheet they need.
 */
#include "fs/sfs.h"

/*
 * The sheets that an epoch view's samples from position from of its order
 * on need, each once and only those not already present: the next two
 * batches' worth, and twice as many samples as o.prefetch + 1 sheets hold,
 * up to o.prefetch + 64 sheets (256 at most).
 */
static void epoch_ahead(struct sfs *fs, const struct sfs_split *sp, const uint32_t *perm,
			uint64_t from)
{
	uint32_t list[256];
	uint32_t k = 0, want = fs->o.prefetch + 64;
	if (want > 256)
		want = 256;
	uint64_t limit = from + (uint64_t)fs->o.batch * 2 +
			 (uint64_t)fs->info->sheet_tiles * (fs->o.prefetch + 1) * 2;
	if (limit > sp->count)
		limit = sp->count;
	for (uint64_t s = from; s < limit && k < want; s++) {
		uint32_t sheet, slot;
		if (sprite_store_locate(fs->store, sp->index, perm[s], &sheet, &slot) < 0)
			continue;
		if (sfs_sheet_present(fs, sheet))
			continue;
		int dup = 0;
		for (uint32_t q = 0; q < k && !dup; q++)
			dup = list[q] == sheet;
		if (!dup)
			list[k++] = sheet;
	}
	sfs_sheet_prefetch(fs, list, k, 0);
}

void sfs_readahead(struct sfs *fs, const struct sfs_reader *r)
{
	const struct sfs_split *sp = r->sp;
	const uint32_t split_end = sp->first_sheet + sp->nsheets;
	const uint32_t store_end = fs->info->nsheets;
	switch (r->kind) {
	case SFS_K_BATCH:
		/*
		 * Ahead in store order, on past the split's last sheet into the next
		 * split's (a pass over train/batches then test/batches, or a training
		 * epoch then its evaluation, reads the store front to back): the first
		 * reads of the next split then come from memory instead of the disk.
		 * Pushed to the kernel unless the reader has no page cache.
		 */
		sfs_sheet_prefetch_run(fs, r->sheet, fs->o.prefetch + 1, sp->first_sheet, store_end,
				       !r->direct);
		break;
	case SFS_K_IMAGES_NPY: {
		/*
		 * Every sheet of the request at once, then the next ones; on into
		 * the next split, as batch files.
		 */
		uint32_t nspan = (uint32_t)(r->len / (fs->tile_bytes * fs->info->sheet_tiles)) + 2;
		sfs_sheet_prefetch_run(fs, r->sheet, nspan + fs->o.prefetch, sp->first_sheet,
				       store_end, 0);
		break;
	}
	case SFS_K_CLASS_IMG:
		sfs_sheet_prefetch_run(fs, r->sheet, fs->o.prefetch + 1, sp->first_sheet, split_end,
				       0);
		break;
	case SFS_K_LABELS_NPY:
		/* the label table's pass over the split: every 4th sheet, the next ones */
		if ((r->sheet - sp->first_sheet) % 4 == 0)
			sfs_sheet_prefetch_run(fs, r->sheet + 1, fs->o.prefetch, sp->first_sheet,
					       split_end, 0);
		break;
	case SFS_K_EPOCH_BATCH:
		/*
		 * The order's plan, when there was memory for it: the cache follows
		 * the reader and loads in order of first use (cache.c). Else once
		 * per batch file, when its first bytes are read.
		 */
		if (sfs_epoch_plan(r->handle))
			sfs_cache_stream(fs, r->handle, r->n, 0, 0);
		else if (r->off == 0)
			epoch_ahead(fs, sp, r->perm, (uint64_t)r->n * fs->o.batch);
		break;
	}
}
