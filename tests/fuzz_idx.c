/*
 * fuzz_idx.c - fuzz target: IDX files, plain or gzip (common/idx.c), the
 * form Fashion-MNIST comes in. Each input is read both as an image file and
 * as a label file; what loads must hold the count and shape it claims (all
 * of it is read here, for ASan), and a refusal must say why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "common/image.h"
#include "common/store.h"
#include "tests/fuzz.h"

static void refused(const char *err)
{
	if (!err[0]) {
		fprintf(stderr, "fuzz_idx: refused without a message\n");
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_path(data, size);
	if (!path)
		return 0;
	char err[SPRITE_ERR_MAX] = "";
	uint32_t h = 0, w = 0;
	uint8_t *px = NULL, *labels = NULL;
	uint64_t sum = 0;
	int64_t n = sprite_idx_load_images(path, &h, &w, &px, err);
	if (n < 0) {
		refused(err);
	} else {
		for (uint64_t q = 0; q < (uint64_t)n * h * w; q++)
			sum += px[q];
		fuzz_accepted++;
		free(px);
	}
	err[0] = 0;
	n = sprite_idx_load_labels(path, &labels, err);
	if (n < 0) {
		refused(err);
	} else {
		for (int64_t q = 0; q < n; q++)
			sum += labels[q];
		fuzz_accepted++;
		free(labels);
	}
	fuzz_sink += sum;
	return 0;
}

static void be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static int idx(struct fuzz_buf *b, const char *name, int images, uint32_t n)
{
	size_t hl = images ? 16 : 8, body = images ? (size_t)n * 5 * 6 : n;
	b->len = hl + body;
	b->data = malloc(b->len);
	if (!b->data)
		return -1;
	be32(b->data, images ? 0x803 : 0x801);
	be32(b->data + 4, n);
	if (images) {
		be32(b->data + 8, 5);
		be32(b->data + 12, 6);
	}
	for (size_t q = 0; q < body; q++)
		b->data[hl + q] = (uint8_t)(images ? q * 3 : q % 10);
	snprintf(b->name, sizeof b->name, "%s", name);
	return 0;
}

/* The same bytes as a gzip stream. */
static int gzip(struct fuzz_buf *out, const struct fuzz_buf *in, const char *name)
{
	z_stream z = {0};
	if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	size_t cap = deflateBound(&z, in->len) + 32;
	out->data = malloc(cap);
	if (!out->data) {
		deflateEnd(&z);
		return -1;
	}
	z.next_in = in->data;
	z.avail_in = (uInt)in->len;
	z.next_out = out->data;
	z.avail_out = (uInt)cap;
	int rc = deflate(&z, Z_FINISH);
	out->len = cap - z.avail_out;
	deflateEnd(&z);
	snprintf(out->name, sizeof out->name, "%s", name);
	return rc == Z_STREAM_END ? 0 : -1;
}

static int seeds(struct fuzz_buf **out, char *err)
{
	struct fuzz_buf *b = calloc(4, sizeof *b);
	if (!b)
		return -1;
	*out = b;
	if (idx(&b[0], "images-idx3-ubyte", 1, 7) < 0 ||
	    idx(&b[1], "labels-idx1-ubyte", 0, 7) < 0 ||
	    gzip(&b[2], &b[0], "images-idx3-ubyte.gz") < 0 ||
	    gzip(&b[3], &b[1], "labels-idx1-ubyte.gz") < 0) {
		snprintf(err, 256, "cannot build the IDX seeds");
		return -1;
	}
	return 4;
}

const struct fuzz_target fuzz_target = {"fuzz_idx", seeds, NULL};
