/*
 * fuzz_batch.c - fuzz target: batch files (*.sprite, common/batch.c), what
 * hntrain and other readers take from a mount. A batch that parses must lie
 * wholly inside the bytes given: every label, id and tile is read here, so
 * ASan sees any section that points outside.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/batch.h"
#include "common/store.h"
#include "tests/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sprite_batch b;
	char err[SPRITE_ERR_MAX] = "";
	if (sprite_batch_parse(data, size, &b, err) < 0) {
		if (!err[0]) {
			fprintf(stderr, "fuzz_batch: refused without a message\n");
			abort();
		}
		return 0;
	}
	uint64_t tiles = (uint64_t)b.count * b.h * b.w * b.c;
	if (tiles > size || (const uint8_t *)b.tiles < data ||
	    (const uint8_t *)b.tiles + tiles > data + size) {
		fprintf(stderr, "fuzz_batch: %u tiles of %ux%ux%u do not fit %zu bytes\n", b.count,
			b.h, b.w, b.c, size);
		abort();
	}
	fuzz_accepted++;
	uint64_t sum = 0;
	for (uint32_t k = 0; k < b.count; k++)
		sum += b.labels[k] + b.ids[k];
	for (uint64_t q = 0; q < tiles; q++)
		sum += b.tiles[q];
	fuzz_sink += sum;
	return 0;
}

static int one(struct fuzz_buf *out, const char *name, uint32_t count, uint32_t h, uint32_t w,
	       uint32_t c)
{
	struct sprite_batch_header hd;
	sprite_batch_layout(count, h, w, c, &hd);
	uint8_t tmp[SPRITE_BATCH_HEADER_SIZE];
	uint64_t total = sprite_batch_init(tmp, count, h, w, c, 1);
	out->data = calloc(1, (size_t)total);
	if (!out->data)
		return -1;
	out->len = (size_t)total;
	sprite_batch_init(out->data, count, h, w, c, 1);
	for (uint32_t k = 0; k < count; k++) {
		uint16_t l = (uint16_t)(k % 10);
		uint32_t id = 100 + k;
		memcpy(out->data + hd.labels_offset + 2 * (size_t)k, &l, 2);
		memcpy(out->data + hd.ids_offset + 4 * (size_t)k, &id, 4);
	}
	for (uint64_t q = hd.tiles_offset; q < total; q++)
		out->data[q] = (uint8_t)q;
	snprintf(out->name, sizeof out->name, "%s", name);
	return 0;
}

static int seeds(struct fuzz_buf **out, char *err)
{
	struct fuzz_buf *b = calloc(3, sizeof *b);
	if (!b)
		return -1;
	*out = b;
	if (one(&b[0], "gray.sprite", 5, 6, 7, 1) < 0 || one(&b[1], "rgb.sprite", 3, 4, 4, 3) < 0 ||
	    one(&b[2], "one.sprite", 1, 1, 1, 1) < 0) {
		snprintf(err, 256, "out of memory");
		return -1;
	}
	return 3;
}

const struct fuzz_target fuzz_target = {"fuzz_batch", seeds, NULL};
