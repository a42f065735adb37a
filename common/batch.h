/*
 * batch.h - the batch file (*.sprite) that spritefs serves and hntrain reads:
 * header, uint16 labels, uint32 sample ids, uint8 HWC tiles (format.h).
 *
 * sprite_batch_parse() is safe on malicious input: it checks magic, version,
 * section offsets, alignment and that every section lies inside len.
 */
#ifndef SPRITE_BATCH_H
#define SPRITE_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "common/format.h"

struct sprite_batch {
	uint32_t count, h, w, c, split;
	const uint16_t *labels; /* count entries */
	const uint32_t *ids;	/* count entries: sample index within the split */
	const uint8_t *tiles;	/* count * h * w * c bytes */
};

/* Offsets and total size of a batch of count tiles of h*w*c bytes. */
void sprite_batch_layout(uint32_t count, uint32_t h, uint32_t w, uint32_t c,
			 struct sprite_batch_header *hdr_out);

/* Fill a batch header into buf (>= SPRITE_BATCH_HEADER_SIZE); returns total size. */
uint64_t sprite_batch_init(void *buf, uint32_t count, uint32_t h, uint32_t w, uint32_t c,
			   uint32_t split);

/* Validate buf[0..len) as a batch file and point out into it. -SPRITE_E* on error. */
int sprite_batch_parse(const void *buf, size_t len, struct sprite_batch *out, char *err);

#endif
