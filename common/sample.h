/*
 * sample.h - the one rule for whether a source file of an image folder is a
 * sample, and the tile it becomes.
 *
 * spritefs-pack (common/pack.c) and hntrain's image folder source
 * (trainer/source_folder.c) both turn files into tiles through
 * sprite_sample_load(), so a file left out of a store is left out of the
 * folder's samples too, and sample i of a split is the same tile from
 * either: a folder and the store packed from it give the same weights
 * whatever the folder holds (truncated, non-image, unsupported files).
 *
 * A file is a sample when it is a regular file of at most 1 GiB that
 * decodes (PNG, JPEG, TIFF, binary Netpbm; see image.h) without error or
 * warning, within the pixel caps, and fits the tile. Anything else is not,
 * and the reason says why (not naming the file: the caller does).
 */
#ifndef SPRITE_SAMPLE_H
#define SPRITE_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "common/format.h"

/* What to make of a file. */
struct sprite_sample_spec {
	uint32_t th, tw, tc; /* the tile */
	enum sprite_fit fit; /* how another size becomes the tile */
	int whole;	     /* decode at full size (no JPEG DCT scaling): sizes compared */
	/*
	 * When set, the real path of the tree the file was listed in: a file
	 * whose open lands outside it (a link swapped in after the listing) is
	 * refused. docs/FORMAT.md, "Symbolic links in a source tree".
	 */
	const char *tree;
	uint32_t background; /* what alpha becomes: SPRITE_BG_* (format.h); 0 as stored */
};

/* What a file was. */
struct sprite_sample_got {
	uint32_t h, w;	/* the decoded image's size, before the fit */
	uint64_t bytes; /* bytes of the file read */
};

/* A read buffer reused across calls by one thread; zero it first, free data after. */
struct sprite_sample_buf {
	uint8_t *data;
	size_t cap;
};

/*
 * Read path, decode it and fit it into tile (th*tw*tc bytes). 0: a sample;
 * -ENOMEM: out of memory (a failure, not a verdict on the file); any other
 * negative: not a sample, why (SPRITE_ERR_MAX bytes) saying why. buf may be
 * NULL.
 */
int sprite_sample_load(const char *path, const struct sprite_sample_spec *sp,
		       struct sprite_sample_buf *buf, uint8_t *tile, struct sprite_sample_got *got,
		       char *why);

#endif
