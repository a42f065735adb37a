/*
 * batch.c - layout arithmetic that a file's size (tree.c) and its bytes
 * (read.c) must agree on: the grid of tiles of a sheet image, and the
 * samples in an epoch view's batch file. Pure functions of the options and
 * the store, below both, so that neither calls the other for them.
 */
#include "fs/sfs.h"

void sfs_sheet_grid(uint32_t count, uint32_t *rows, uint32_t *cols)
{
	uint32_t k = 1;
	while ((uint64_t)k * k < count)
		k++;
	*cols = k;
	*rows = count ? (count + k - 1) / k : 1;
}

uint64_t sfs_epoch_batch_count(const struct sfs *fs, const struct sfs_split *sp, uint32_t n)
{
	uint64_t first = (uint64_t)n * fs->o.batch;
	uint64_t left = sp->count - first;
	return left < fs->o.batch ? left : fs->o.batch;
}
