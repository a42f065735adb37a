/*
 * test_batch - batch file layout and the hostile-input parser.
 *
 * Checks the layout rules every trainer depends on (sections 64-aligned, in
 * order, total size exact) over a range of counts and shapes, that a laid-out
 * batch parses back to the same pointers, and that every header field that
 * could send a reader out of bounds is rejected with the right code: bad
 * magic, newer version, offsets out of order or past the end, counts whose
 * sections would overflow, truncated buffers. Finally a byte-flip sweep over
 * the header must never make the parser accept something that points outside
 * the buffer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/batch.h"
#include "common/store.h"
#include "tests/check.h"

static void check_layout(void)
{
	const uint32_t counts[] = {0, 1, 2, 15, 16, 17, 31, 32, 33, 1000, 1024, 65536};
	const uint32_t shapes[][3] = {{28, 28, 1}, {32, 32, 3}, {1, 1, 1}, {7, 5, 4}};
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		for (size_t j = 0; j < sizeof(shapes) / sizeof(shapes[0]); j++) {
			uint32_t n = counts[i], h = shapes[j][0], w = shapes[j][1],
				 c = shapes[j][2];
			struct sprite_batch_header hd;
			sprite_batch_layout(n, h, w, c, &hd);
			CHECK(!memcmp(hd.magic, SPRITE_BATCH_MAGIC, 8) && hd.version == 1 &&
				      hd.header_size == 64,
			      "n=%u header", n);
			CHECK(hd.labels_offset == 64, "n=%u labels at %u", n, hd.labels_offset);
			CHECK(hd.ids_offset % 64 == 0 && hd.ids_offset >= 64 + 2 * n &&
				      hd.ids_offset < 64 + 2 * n + 64,
			      "n=%u ids at %u", n, hd.ids_offset);
			CHECK(hd.tiles_offset % 64 == 0 &&
				      hd.tiles_offset >= hd.ids_offset + 4 * n &&
				      hd.tiles_offset < hd.ids_offset + 4 * n + 64,
			      "n=%u tiles at %u", n, hd.tiles_offset);
			CHECK(hd.total_size == hd.tiles_offset + (uint64_t)n * h * w * c,
			      "n=%u total %llu", n, (unsigned long long)hd.total_size);
			CHECK(hd.count == n && hd.h == h && hd.w == w && hd.c == c, "n=%u shape",
			      n);

			/* init + parse round trip */
			size_t len = (size_t)hd.total_size;
			uint8_t *buf = calloc(1, len);
			CHECK(sprite_batch_init(buf, n, h, w, c, 5) == hd.total_size, "init size");
			struct sprite_batch b;
			char err[SPRITE_ERR_MAX] = "";
			int r = sprite_batch_parse(buf, len, &b, err);
			CHECK(r == 0, "n=%u %ux%ux%u parse: %s", n, h, w, c, err);
			if (r == 0) {
				CHECK(b.count == n && b.h == h && b.w == w && b.c == c &&
					      b.split == 5,
				      "parsed fields");
				CHECK((const uint8_t *)b.labels == buf + 64 &&
					      (const uint8_t *)b.ids == buf + hd.ids_offset &&
					      b.tiles == buf + hd.tiles_offset,
				      "parsed pointers");
			}
			if (len > 64) {
				r = sprite_batch_parse(buf, len - 1, &b, err);
				CHECK(r == -SPRITE_ETRUNC, "n=%u one byte short: %d", n, r);
			}
			free(buf);
		}
	/* a count whose sections cannot be addressed with uint32 offsets */
	struct sprite_batch_header hd;
	sprite_batch_layout(UINT32_MAX, 1, 1, 1, &hd);
	CHECK(hd.total_size == 0, "huge count gets total_size 0, got %llu",
	      (unsigned long long)hd.total_size);
}

struct hostile {
	const char *what;
	size_t off;
	uint32_t val;
	int code;
	const char *want;
};

static void check_hostile(void)
{
	const uint32_t n = 10, h = 4, w = 4, c = 3;
	struct sprite_batch_header hd;
	sprite_batch_layout(n, h, w, c, &hd);
	size_t len = (size_t)hd.total_size;
	/* uint64_t storage keeps the buffer 8-aligned */
	uint64_t *store = calloc(1, len + 64);
	uint8_t *good = (uint8_t *)store;
	sprite_batch_init(good, n, h, w, c, 0);
	uint64_t *store2 = calloc(1, len + 64);
	uint8_t *b = (uint8_t *)store2;
	char err[SPRITE_ERR_MAX];
	struct sprite_batch out;

#define O(f) offsetof(struct sprite_batch_header, f)
	const struct hostile cases[] = {
		{"magic", 0, 0x41414141, SPRITE_EBADMAGIC, "bad magic"},
		{"version 2", O(version), 2, SPRITE_EVERSION, "version 2 is newer"},
		{"version 0", O(version), 0, SPRITE_ECORRUPT, "version 0"},
		{"header size", O(header_size), 128, SPRITE_ECORRUPT, "header size"},
		{"h 0", O(h), 0, SPRITE_ECORRUPT, "tile shape"},
		{"w huge", O(w), 100000, SPRITE_ECORRUPT, "tile shape"},
		{"c 5", O(c), 5, SPRITE_ECORRUPT, "tile shape"},
		{"labels offset 0", O(labels_offset), 0, SPRITE_ECORRUPT, "labels offset"},
		{"labels offset unaligned", O(labels_offset), 65, SPRITE_ECORRUPT, "labels offset"},
		{"labels offset past end", O(labels_offset), 0x7fffffc0, SPRITE_ECORRUPT,
		 "ids offset"},
		{"ids before labels end", O(ids_offset), 64, SPRITE_ECORRUPT, "ids offset"},
		{"ids unaligned", O(ids_offset), 130, SPRITE_ECORRUPT, "ids offset"},
		{"ids past end", O(ids_offset), 0xffffffc0, SPRITE_ECORRUPT, "tiles offset"},
		{"tiles before ids end", O(tiles_offset), 128, SPRITE_ECORRUPT, "tiles offset"},
		{"tiles past end", O(tiles_offset), 0xffffffc0, SPRITE_ECORRUPT, "total size"},
		{"count overflow", O(count), 0xffffffff, SPRITE_ECORRUPT, "ids offset"},
		{"count +1", O(count), n + 1, SPRITE_ECORRUPT, "total size"},
		{"total size", O(total_size), 12345, SPRITE_ECORRUPT, "total size"},
	};
#undef O
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(b, good, len);
		memcpy(b + cases[i].off, &cases[i].val, 4);
		err[0] = 0;
		int r = sprite_batch_parse(b, len, &out, err);
		CHECK(r == -cases[i].code && strstr(err, cases[i].want),
		      "%s: got %d '%s', want %d '%s'", cases[i].what, r, err, -cases[i].code,
		      cases[i].want);
	}

	/* a header consistent with itself but larger than the buffer */
	memcpy(b, good, len);
	struct sprite_batch_header *bh = (struct sprite_batch_header *)(void *)b;
	bh->count = 1000;
	bh->total_size = (uint64_t)bh->tiles_offset + 1000ull * h * w * c;
	sprite_batch_layout(1000, h, w, c, bh);
	CHECK(sprite_batch_parse(b, len, &out, err) == -SPRITE_ETRUNC, "bigger than buffer");
	CHECK(sprite_batch_parse(good, 40, &out, err) == -SPRITE_ETRUNC, "buffer under 64 bytes");
	CHECK(sprite_batch_parse(good, 3, &out, err) == -SPRITE_EBADMAGIC, "3 bytes");
	CHECK(sprite_batch_parse(good + 1, len - 1, &out, err) == -SPRITE_EBADMAGIC, "shifted");
	memcpy(b + 2, good, len);
	CHECK(sprite_batch_parse(b + 2, len, &out, err) == -EINVAL, "misaligned buffer");

	/* sweep: flip every bit of the header; any accepted result must lie in the buffer */
	for (size_t byte = 0; byte < 64; byte++)
		for (int bit = 0; bit < 8; bit++) {
			memcpy(b, good, len);
			b[byte] ^= (uint8_t)(1u << bit);
			if (sprite_batch_parse(b, len, &out, err) != 0)
				continue;
			uint64_t end = (uint64_t)(out.tiles - b) +
				       (uint64_t)out.count * out.h * out.w * out.c;
			CHECK(end <= len &&
				      (const uint8_t *)out.ids + 4ull * out.count <= out.tiles &&
				      (const uint8_t *)out.labels + 2ull * out.count <=
					      (const uint8_t *)out.ids,
			      "flip %zu.%d accepted out of bounds", byte, bit);
		}
	free(store);
	free(store2);
}

int main(void)
{
	check_layout();
	check_hostile();
	if (failures) {
		fprintf(stderr, "test_batch: %d failures\n", failures);
		return 1;
	}
	printf("test_batch: ok\n");
	return 0;
}
