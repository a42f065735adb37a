/*
 * source_mem.c - samples held in memory as a data source: an IDX folder
 * once loaded (source_idx.c), and any source after hn_source_preload(),
 * the zero-I/O baseline. s->priv is a struct hn_mem.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/source.h"

int hn_source_mem_read(hn_source *s, const struct hn_batch *b, char *err)
{
	const struct hn_mem *mem = s->priv;
	int w = 0;
	for (int k = 0; k < b->n; k++) {
		uint32_t i = b->idx[k];
		if (i >= s->info.full_count[b->split])
			return sprite_fail(err, -ERANGE, "sample %u out of range", i);
		/* preloaded around unreadable sheets: they keep their places, empty */
		if (hn_source_on_bad_sheet(s, b->split, hn_source_id(s, b->split, i)))
			continue;
		memcpy(b->tiles + (size_t)w * s->tile_bytes,
		       mem->px[b->split] + (size_t)i * s->tile_bytes, s->tile_bytes);
		b->labels[w++] = mem->lab[b->split][i];
	}
	return w;
}

void hn_source_mem_close(hn_source *s)
{
	struct hn_mem *mem = s->priv;
	if (!mem)
		return;
	for (int k = 0; k < 2; k++) {
		free(mem->px[k]);
		free(mem->lab[k]);
	}
	free(mem);
	s->priv = NULL;
}

const struct hn_source_ops hn_source_mem_ops = {
	.name = "memory",
	.read = hn_source_mem_read,
	.close = hn_source_mem_close,
};
