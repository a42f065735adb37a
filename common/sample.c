/*
 * sample.c - a source file to a tile, by the one rule of sample.h, for the
 * packer and hntrain's folder source alike.
 */
#include "common/sample.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/folder.h"
#include "common/image.h"
#include "common/rows.h"
#include "common/store.h"
#include "common/util.h"

#define SAMPLE_MAX_FILE (1ull << 30) /* larger source files are not samples */

/* Read the whole file behind fd (size bytes by fstat) into buf; its length in *len. */
static int read_all(int fd, uint64_t size, struct sprite_sample_buf *buf, size_t *len, char *why)
{
	size_t want = (size_t)size;
	if (want + 1 > buf->cap) {
		size_t ncap = want + 1 > 65536 ? want + 1 : 65536;
		uint8_t *nb = realloc(buf->data, ncap);
		if (!nb) {
			snprintf(why, SPRITE_ERR_MAX, "out of memory for a file of %zu bytes",
				 want);
			return -ENOMEM;
		}
		buf->data = nb;
		buf->cap = ncap;
	}
	size_t got = 0;
	while (got < want) {
		ssize_t n = read(fd, buf->data + got, want - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			snprintf(why, SPRITE_ERR_MAX, "read error: %s", strerror(e));
			return -e;
		}
		if (n == 0)
			break; /* shrank while reading: decode what is there */
		got += (size_t)n;
	}
	*len = got;
	return 0;
}

/*
 * Where a JPEG ends: the offset after its EOI marker, found by walking its
 * segments (by their lengths) and, after each start of scan, the entropy-
 * coded bytes to the next marker (0xFF then a byte that is neither 0 nor a
 * restart). *at is where the walk stopped; 0 while more bytes are needed,
 * SIZE_MAX when the bytes are not a JPEG's structure (then read it all).
 */
static size_t jpeg_end(const uint8_t *p, size_t n, size_t *at, int *in_scan)
{
	size_t i = *at;
	for (;;) {
		if (*in_scan) {
			while (i + 1 < n && !(p[i] == 0xFF && p[i + 1] != 0 &&
					      !(p[i + 1] >= 0xD0 && p[i + 1] <= 0xD7)))
				i++;
			if (i + 1 >= n)
				break;
			*in_scan = 0;
		}
		while (i + 1 < n && p[i] == 0xFF && p[i + 1] == 0xFF)
			i++; /* fill bytes */
		if (i + 2 > n)
			break;
		if (p[i] != 0xFF)
			return SIZE_MAX;
		uint8_t m = p[i + 1];
		if (m == 0xD9)
			return i + 2;
		if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {
			i += 2;
			continue;
		}
		if (i + 4 > n)
			break;
		size_t l = (size_t)p[i + 2] << 8 | p[i + 3];
		if (l < 2)
			return SIZE_MAX;
		i += 2 + l;
		if (m == 0xDA)
			*in_scan = 1;
	}
	*at = i;
	return 0;
}

/*
 * A JPEG read no further than its EOI marker (libjpeg stops there too), so
 * that bytes after it, a sparse tail, cost nothing; *len the bytes kept.
 */
static int read_jpeg(int fd, uint64_t size, struct sprite_sample_buf *buf, size_t *len, char *why)
{
	size_t have = 0, at = 2, end = 0;
	int in_scan = 0;
	while (have < size) {
		size_t want = have + 65536 < size ? have + 65536 : (size_t)size;
		if (want + 1 > buf->cap) {
			size_t ncap = buf->cap ? buf->cap : 65536;
			while (ncap < want + 1)
				ncap *= 2;
			if (ncap > size + 1)
				ncap = (size_t)size + 1;
			uint8_t *nb = realloc(buf->data, ncap);
			if (!nb) {
				snprintf(why, SPRITE_ERR_MAX,
					 "out of memory for a file of %zu bytes", want);
				return -ENOMEM;
			}
			buf->data = nb;
			buf->cap = ncap;
		}
		ssize_t k = read(fd, buf->data + have, want - have);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = errno;
			snprintf(why, SPRITE_ERR_MAX, "read error: %s", strerror(e));
			return -e;
		}
		if (k == 0)
			break; /* shrank while reading: decode what is there */
		have += (size_t)k;
		if (end != SIZE_MAX && (end = jpeg_end(buf->data, have, &at, &in_scan)) != 0 &&
		    end != SIZE_MAX) {
			have = end;
			break;
		}
	}
	*len = have;
	return 0;
}

int sprite_sample_load(const char *path, const struct sprite_sample_spec *sp,
		       struct sprite_sample_buf *buf, uint8_t *tile, struct sprite_sample_got *got,
		       char *why)
{
	struct sprite_sample_buf local = {0};
	struct sprite_sample_got g = {0};
	if (!buf)
		buf = &local;
	if (!got)
		got = &g;
	memset(got, 0, sizeof *got);
	why[0] = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		int e = errno;
		snprintf(why, SPRITE_ERR_MAX, "cannot open: %s", strerror(e));
		return e == ENOMEM ? -EIO : -e;
	}
	struct stat st;
	int r = 0;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(why, SPRITE_ERR_MAX, "not a regular file");
		r = -EINVAL;
	} else if ((uint64_t)st.st_size > SAMPLE_MAX_FILE) {
		snprintf(why, SPRITE_ERR_MAX, "file too large (%lld bytes)", (long long)st.st_size);
		r = -EFBIG;
	} else if (sp->tree && sprite_fd_inside(fd, sp->tree) == 0) {
		snprintf(why, SPRITE_ERR_MAX,
			 "opened out of the source tree (a link swapped in "
			 "after the listing): not read");
		r = -EPERM;
	}
	size_t len = 0;
	if (r == 0) {
		/* PNG and Netpbm by rows, into the fit; the others read whole */
		r = sprite_rows_decode(fd, (uint64_t)st.st_size, sp, tile, got, why);
		if (r != -EAGAIN) {
			close(fd);
			return r;
		}
		why[0] = 0;
		r = lseek(fd, 0, SEEK_SET) < 0 ? -errno : 0;
		if (r < 0)
			snprintf(why, SPRITE_ERR_MAX, "cannot seek: %s", strerror(-r));
	}
	if (r == 0) {
		uint8_t m[3];
		ssize_t k = pread(fd, m, 3, 0);
		int jpeg = k == 3 && m[0] == 0xFF && m[1] == 0xD8 && m[2] == 0xFF;
		r = jpeg ? read_jpeg(fd, (uint64_t)st.st_size, buf, &len, why)
			 : read_all(fd, (uint64_t)st.st_size, buf, &len, why);
	}
	close(fd);
	got->bytes = len;
	struct sprite_image im = {0};
	/* An empty name keeps the path out of the reason: the caller names the file. */
	if (r == 0)
		r = sprite_image_decode_for(buf->data, len, "", sp->whole ? 0 : sp->th, sp->tw,
					    sp->fit, sp->background, &im, why);
	if (r == 0) {
		got->h = im.h;
		got->w = im.w;
		r = sprite_image_fit(&im, sp->th, sp->tw, sp->tc, sp->fit, tile);
		if (r < 0 && r != -ENOMEM)
			snprintf(why, SPRITE_ERR_MAX, "cannot fit to the tile: %s", strerror(-r));
	}
	sprite_image_free(&im);
	if (r == -ENOMEM && !why[0])
		snprintf(why, SPRITE_ERR_MAX, "out of memory");
	free(local.data);
	return r;
}
