/*
 * batch.c - lay out and validate batch files (*.sprite, format.h).
 *
 * A batch is what spritefs serves and what any trainer reads, so its layout
 * is computed in one place (sprite_batch_layout) and checked in one place
 * (sprite_batch_parse). Sections start on 64-byte boundaries so that numpy
 * views and SIMD loads of labels, ids and tiles are aligned when the file is
 * read into (or mapped at) an aligned buffer.
 *
 * The parser treats every header field as hostile: offsets are checked in
 * 64-bit arithmetic against each other and against len before anything is
 * pointed at.
 */
#include "common/batch.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/store.h"

#define ALIGN64(x) (((x) + 63u) & ~(uint64_t)63u)

void sprite_batch_layout(uint32_t count, uint32_t h, uint32_t w, uint32_t c,
			 struct sprite_batch_header *hdr)
{
	uint64_t ids = ALIGN64((uint64_t)SPRITE_BATCH_HEADER_SIZE + 2ull * count);
	uint64_t tiles = ALIGN64(ids + 4ull * count);

	memset(hdr, 0, sizeof(*hdr));
	memcpy(hdr->magic, SPRITE_BATCH_MAGIC, 8);
	hdr->version = SPRITE_BATCH_VERSION;
	hdr->header_size = SPRITE_BATCH_HEADER_SIZE;
	hdr->count = count;
	hdr->h = h;
	hdr->w = w;
	hdr->c = c;
	hdr->labels_offset = SPRITE_BATCH_HEADER_SIZE;
	/* Offsets are uint32: a count that cannot be laid out gets total_size 0. */
	if (tiles > UINT32_MAX)
		return;
	hdr->ids_offset = (uint32_t)ids;
	hdr->tiles_offset = (uint32_t)tiles;
	/* h, w, c <= 2^32 each could overflow; callers pass capped shapes, but
	 * keep the arithmetic honest anyway. */
	unsigned __int128 total = (unsigned __int128)count * h * w * c + tiles;
	hdr->total_size = total > UINT64_MAX ? 0 : (uint64_t)total;
}

uint64_t sprite_batch_init(void *buf, uint32_t count, uint32_t h, uint32_t w, uint32_t c,
			   uint32_t split)
{
	struct sprite_batch_header hdr;
	sprite_batch_layout(count, h, w, c, &hdr);
	hdr.split = split;
	memcpy(buf, &hdr, sizeof(hdr));
	return hdr.total_size;
}

#define FAIL(code, ...)                                                                            \
	do {                                                                                       \
		if (err)                                                                           \
			snprintf(err, SPRITE_ERR_MAX, __VA_ARGS__);                                \
		return -(code);                                                                    \
	} while (0)

int sprite_batch_parse(const void *buf, size_t len, struct sprite_batch *out, char *err)
{
	struct sprite_batch_header h;

	if (len < 8 || memcmp(buf, SPRITE_BATCH_MAGIC, 8) != 0)
		FAIL(SPRITE_EBADMAGIC, "not a sprite batch file (bad magic)");
	if (len < sizeof(h))
		FAIL(SPRITE_ETRUNC, "truncated: %zu bytes, the batch header needs %u", len,
		     SPRITE_BATCH_HEADER_SIZE);
	if ((uintptr_t)buf & 3)
		FAIL(EINVAL, "batch buffer is not 4-byte aligned");
	memcpy(&h, buf, sizeof(h));
	if (h.version > SPRITE_BATCH_VERSION)
		FAIL(SPRITE_EVERSION, "batch version %u is newer than %u", h.version,
		     SPRITE_BATCH_VERSION);
	if (h.version == 0)
		FAIL(SPRITE_ECORRUPT, "batch version 0 is invalid");
	if (h.header_size != SPRITE_BATCH_HEADER_SIZE)
		FAIL(SPRITE_ECORRUPT, "batch header size %u is not %u", h.header_size,
		     SPRITE_BATCH_HEADER_SIZE);
	if (h.h == 0 || h.w == 0 || h.c == 0 || h.h > SPRITE_MAX_TILE_SIDE ||
	    h.w > SPRITE_MAX_TILE_SIDE || h.c > SPRITE_MAX_CHANNELS)
		FAIL(SPRITE_ECORRUPT, "tile shape %ux%ux%u out of range", h.h, h.w, h.c);

	uint64_t n = h.count;
	if (h.labels_offset < SPRITE_BATCH_HEADER_SIZE || (h.labels_offset & 63))
		FAIL(SPRITE_ECORRUPT, "labels offset %u out of range", h.labels_offset);
	if ((h.ids_offset & 63) || h.ids_offset < (uint64_t)h.labels_offset + 2 * n)
		FAIL(SPRITE_ECORRUPT, "ids offset %u out of range", h.ids_offset);
	if ((h.tiles_offset & 63) || h.tiles_offset < (uint64_t)h.ids_offset + 4 * n)
		FAIL(SPRITE_ECORRUPT, "tiles offset %u out of range", h.tiles_offset);
	/* <= 2^32 * 2^26 + 2^32: cannot overflow 64 bits */
	uint64_t need = h.tiles_offset + n * h.h * h.w * h.c;
	if (h.total_size != need)
		FAIL(SPRITE_ECORRUPT, "total size %llu does not match the layout (%llu)",
		     (unsigned long long)h.total_size, (unsigned long long)need);
	if (need > len)
		FAIL(SPRITE_ETRUNC, "truncated: %zu bytes, the batch header says %llu", len,
		     (unsigned long long)need);

	if (out) {
		const uint8_t *b = buf;
		out->count = h.count;
		out->h = h.h;
		out->w = h.w;
		out->c = h.c;
		out->split = h.split;
		out->labels = (const uint16_t *)(const void *)(b + h.labels_offset);
		out->ids = (const uint32_t *)(const void *)(b + h.ids_offset);
		out->tiles = b + h.tiles_offset;
	}
	return 0;
}
