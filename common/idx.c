/*
 * idx.c - read IDX files (MNIST, Fashion-MNIST), plain or gzip-compressed,
 * through zlib's gz* reader, which takes both.
 *
 * The header's magic is checked before its dimensions are read, so a wrong
 * kind of file is named as such; the body buffer grows as data arrives, so a
 * header that claims billions of items costs memory only if the bytes are
 * really there.
 */
#include "common/image.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "common/codec.h"
#include "common/store.h"

static int idx_read_header(gzFile f, const char *path, uint8_t nd, uint32_t *dims, char *err)
{
	uint8_t hdr[16];
	unsigned want = 4 + 4u * nd;
	int n = 0, k;
	/* The magic is checked before the dims are read, so that a wrong kind
	 * of file is named as such rather than as truncated. */
	for (unsigned part = 0; part < 2; part++) {
		unsigned from = part ? 4 : 0, len = part ? 4u * nd : 4;
		k = gzread(f, hdr + from, len);
		if (k < 0) {
			int e;
			sprite_image_err(err, path, "read error: %s", gzerror(f, &e));
			return -EIO;
		}
		n += k;
		if ((unsigned)k < len) {
			sprite_image_err(err, path, "truncated IDX header (%d of %u bytes)", n,
					 want);
			return -SPRITE_ETRUNC;
		}
		if (part == 0) {
			uint32_t magic = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
					 (uint32_t)hdr[2] << 8 | hdr[3];
			uint32_t expect = 0x00000800u | nd;
			if (magic != expect) {
				sprite_image_err(err, path,
						 "bad IDX magic 0x%08x (expected 0x%08x)", magic,
						 expect);
				return -SPRITE_EBADMAGIC;
			}
		}
	}
	for (unsigned i = 0; i < nd; i++) {
		const uint8_t *p = hdr + 4 + 4 * i;
		dims[i] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
	}
	return 0;
}

/*
 * Read exactly total bytes. The buffer grows as data arrives so that a header
 * claiming billions of items costs memory only if the data is really there.
 */
static int idx_read_body(gzFile f, const char *path, uint64_t total, uint8_t **out, char *err)
{
	size_t cap = total < (1u << 20) ? (size_t)total : (1u << 20), got = 0;
	uint8_t *buf = malloc(cap ? cap : 1);
	if (!buf) {
		sprite_image_err(err, path, "out of memory");
		return -ENOMEM;
	}
	while (got < total) {
		if (got == cap) {
			size_t ncap = cap * 2 < total ? cap * 2 : (size_t)total;
			uint8_t *nb = realloc(buf, ncap);
			if (!nb) {
				free(buf);
				sprite_image_err(err, path, "out of memory for %llu bytes",
						 (unsigned long long)total);
				return -ENOMEM;
			}
			buf = nb;
			cap = ncap;
		}
		size_t chunk = cap - got;
		if (chunk > (1u << 30))
			chunk = 1u << 30;
		int n = gzread(f, buf + got, (unsigned)chunk);
		if (n < 0) {
			int e;
			sprite_image_err(err, path, "read error: %s", gzerror(f, &e));
			free(buf);
			return -EIO;
		}
		if (n == 0) {
			sprite_image_err(err, path, "truncated: %llu of %llu data bytes",
					 (unsigned long long)got, (unsigned long long)total);
			free(buf);
			return -SPRITE_ETRUNC;
		}
		got += (size_t)n;
	}
	*out = buf;
	return 0;
}

static gzFile idx_open(const char *path, char *err, int *rc)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		*rc = -errno;
		sprite_image_err(err, path, "cannot open: %s", strerror(errno));
		return NULL;
	}
	gzFile f = gzdopen(fd, "rb");
	if (!f) {
		close(fd);
		*rc = -ENOMEM;
		sprite_image_err(err, path, "out of memory");
		return NULL;
	}
	gzbuffer(f, 1u << 18);
	return f;
}

int64_t sprite_idx_load_images(const char *path, uint32_t *h, uint32_t *w, uint8_t **px, char *err)
{
	int r = 0;
	gzFile f = idx_open(path, err, &r);
	if (!f)
		return r;
	uint32_t d[3];
	r = idx_read_header(f, path, 3, d, err);
	if (r < 0)
		goto done;
	if (d[1] == 0 || d[2] == 0 || d[1] > SPRITE_IMAGE_MAX_SIDE ||
	    d[2] > SPRITE_IMAGE_MAX_SIDE || (uint64_t)d[1] * d[2] > SPRITE_IMAGE_MAX_PIXELS) {
		sprite_image_err(err, path, "bad IDX image size %ux%u", d[1], d[2]);
		r = -SPRITE_ECORRUPT;
		goto done;
	}
	uint64_t total = (uint64_t)d[0] * d[1] * d[2]; /* < 2^60: no overflow */
	if (total > SIZE_MAX / 2) {
		sprite_image_err(err, path, "IDX data too large");
		r = -SPRITE_ECORRUPT;
		goto done;
	}
	r = idx_read_body(f, path, total, px, err);
	if (r < 0)
		goto done;
	*h = d[1];
	*w = d[2];
	gzclose(f);
	return (int64_t)d[0];
done:
	gzclose(f);
	return r;
}

int64_t sprite_idx_load_labels(const char *path, uint8_t **labels, char *err)
{
	int r = 0;
	gzFile f = idx_open(path, err, &r);
	if (!f)
		return r;
	uint32_t n;
	r = idx_read_header(f, path, 1, &n, err);
	if (r == 0)
		r = idx_read_body(f, path, n, labels, err);
	gzclose(f);
	return r < 0 ? r : (int64_t)n;
}
