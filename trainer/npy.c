/*
 * npy.c - reads and checks .npy headers (contract in npy.h).
 *
 * The header is a Python dict literal; rather than a Python parser this
 * looks for the three keys NumPy always writes and reads their values
 * strictly, refusing what it does not understand. It reads with pread, so
 * the same fd can be shared with threads gathering samples.
 */
#include "trainer/npy.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "trainer/backend.h"

/* The dict: descr like '|u1', '<u2', '<i8'; fortran_order; shape (N, ...). */
static int parse_dict(const char *h, const char *path, uint64_t hlen, uint64_t hoff,
		      uint64_t file_size, struct hn_npy *out, char *err)
{
	const char *d = strstr(h, "'descr'"), *f = strstr(h, "'fortran_order'"),
		   *sh = strstr(h, "'shape'");
	if (!d || !f || !sh)
		return sprite_fail(err, -EINVAL, "%s: .npy header lacks descr/fortran_order/shape",
				   path);
	d = strchr(d + 7, '\'');
	if (!d || !d[1] || !d[2] || !d[3])
		return sprite_fail(err, -EINVAL, "%s: bad .npy descr", path);
	char endian = d[1], type = d[2];
	int size = d[3] - '0';
	if ((endian != '|' && endian != '<' && endian != '=') || (type != 'u' && type != 'i') ||
	    (size != 1 && size != 2 && size != 4 && size != 8) || d[4] != '\'')
		return sprite_fail(err, -EINVAL,
				   "%s: .npy dtype %.6s is not a little-endian integer", path, d);
	if (strstr(f, "True") && strstr(f, "True") < sh && strstr(f, "True") - f < 24)
		return sprite_fail(err, -EINVAL, "%s: fortran-ordered .npy not supported", path);
	const char *p = strchr(sh, '(');
	if (!p)
		return sprite_fail(err, -EINVAL, "%s: bad .npy shape", path);
	p++;
	int nd = 0;
	while (*p && *p != ')') {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == ')')
			break;
		if (!isdigit((unsigned char)*p) || nd == 4)
			return sprite_fail(err, -EINVAL, "%s: bad .npy shape", path);
		char *e;
		errno = 0;
		unsigned long long v = strtoull(p, &e, 10);
		if (errno || v > (1ull << 40))
			return sprite_fail(err, -EINVAL, "%s: .npy dimension out of range", path);
		out->shape[nd++] = v;
		p = e;
	}
	if (*p != ')' || nd == 0)
		return sprite_fail(err, -EINVAL, "%s: bad .npy shape", path);
	uint64_t items = 1;
	for (int i = 0; i < nd; i++) {
		if (out->shape[i] && items > UINT64_MAX / out->shape[i] / 8)
			return sprite_fail(err, -EINVAL, "%s: .npy shape too large", path);
		items *= out->shape[i];
	}
	out->data_off = hoff + hlen;
	if (out->data_off + items * (uint64_t)size > file_size)
		return sprite_fail(err, -EINVAL, "%s: .npy data shorter than its shape", path);
	out->ndim = nd;
	out->itemsize = size;
	out->is_signed = type == 'i';
	return 0;
}

int hn_npy_read_header(int fd, const char *path, struct hn_npy *out, char *err)
{
	uint8_t pre[12];
	struct stat st;
	if (fstat(fd, &st) < 0)
		return sprite_fail(err, -errno, "%s: %s", path, strerror(errno));
	int r = sprite_pread_full(fd, pre, sizeof pre, 0);
	if (r < 0 && r != -ENODATA)
		return sprite_fail(err, r, "%s: %s", path, strerror(-r));
	if (r < 0 || memcmp(pre, "\x93NUMPY", 6))
		return sprite_fail(err, -EINVAL, "%s: not a .npy file", path);
	uint64_t hlen, hoff;
	if (pre[6] == 1) {
		hlen = pre[8] | (uint64_t)pre[9] << 8;
		hoff = 10;
	} else if (pre[6] == 2 || pre[6] == 3) {
		hlen = pre[8] | (uint64_t)pre[9] << 8 | (uint64_t)pre[10] << 16 |
		       (uint64_t)pre[11] << 24;
		hoff = 12;
	} else {
		return sprite_fail(err, -EINVAL, "%s: .npy version %u not supported", path, pre[6]);
	}
	if (hlen == 0 || hlen > 65536 || hoff + hlen > (uint64_t)st.st_size)
		return sprite_fail(err, -EINVAL, "%s: bad .npy header length %" PRIu64, path, hlen);
	char *h = malloc(hlen + 1);
	if (!h)
		return -ENOMEM;
	if ((r = sprite_pread_full(fd, h, hlen, hoff)) < 0) {
		free(h);
		if (r != -ENODATA)
			return sprite_fail(err, r, "%s: %s", path, strerror(-r));
		return sprite_fail(err, -EINVAL, "%s: short .npy header", path);
	}
	h[hlen] = 0;
	r = parse_dict(h, path, hlen, hoff, (uint64_t)st.st_size, out, err);
	free(h);
	return r;
}
