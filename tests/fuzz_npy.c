/*
 * fuzz_npy.c - fuzz target: .npy headers (trainer/npy.c), as hntrain reads
 * a spritefs mount's images.npy and labels.npy. A header that passes must
 * promise only what the file holds: a shape of 1-4 dimensions, an item size
 * of 1, 2, 4 or 8, and data_off + items * itemsize within the file (its
 * last byte is read here, for ASan); a refusal must say why.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/fuzz.h"
#include "trainer/backend.h"
#include "trainer/npy.h"

static void broken(const char *what)
{
	fprintf(stderr, "fuzz_npy: %s\n", what);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_path(data, size);
	if (!path)
		return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char err[HN_ERR_MAX] = "";
	struct hn_npy h;
	int rc = hn_npy_read_header(fd, path, &h, err);
	if (rc < 0) {
		if (!err[0] && rc != -ENOMEM)
			broken("refused without a message");
	} else {
		if (h.ndim < 1 || h.ndim > 4 ||
		    (h.itemsize != 1 && h.itemsize != 2 && h.itemsize != 4 && h.itemsize != 8))
			broken("accepted a header outside what it promises");
		uint64_t items = 1;
		for (int i = 0; i < h.ndim; i++)
			items *= h.shape[i];
		uint64_t end = h.data_off + items * (uint64_t)h.itemsize;
		if (end > size || h.data_off > size)
			broken("accepted a header whose data runs past the file");
		uint8_t last = 0;
		if (end > h.data_off && sprite_pread_full(fd, &last, 1, end - 1) < 0)
			broken("cannot read the last byte of the data it accepted");
		fuzz_sink += last + items;
		fuzz_accepted++;
	}
	close(fd);
	return 0;
}

/* A .npy file of version ver with dict and body bytes of data. */
static int npy(struct fuzz_buf *b, const char *name, int ver, const char *dict, size_t body)
{
	size_t pre = ver == 1 ? 10 : 12, dl = strlen(dict);
	size_t hlen = (pre + dl + 1 + 63) / 64 * 64 - pre; /* padded to 64 with '\n' last */
	b->len = pre + hlen + body;
	b->data = malloc(b->len);
	if (!b->data)
		return -1;
	memcpy(b->data, "\x93NUMPY", 6);
	b->data[6] = (uint8_t)ver;
	b->data[7] = 0;
	for (int i = 0; i < (ver == 1 ? 2 : 4); i++)
		b->data[8 + i] = (uint8_t)(hlen >> (8 * i));
	memset(b->data + pre, ' ', hlen);
	memcpy(b->data + pre, dict, dl);
	b->data[pre + hlen - 1] = '\n';
	for (size_t q = 0; q < body; q++)
		b->data[pre + hlen + q] = (uint8_t)(q * 7);
	snprintf(b->name, sizeof b->name, "%s", name);
	return 0;
}

static int seeds(struct fuzz_buf **out, char *err)
{
	struct fuzz_buf *b = calloc(4, sizeof *b);
	if (!b)
		return -1;
	*out = b;
	if (npy(&b[0], "images.npy", 1,
		"{'descr': '|u1', 'fortran_order': False, 'shape': (6, 5, 4), }", 6 * 5 * 4) < 0 ||
	    npy(&b[1], "images-rgb.npy", 2,
		"{'descr': '|u1', 'fortran_order': False, 'shape': (3, 4, 4, 3), }",
		3 * 4 * 4 * 3) < 0 ||
	    npy(&b[2], "labels-u2.npy", 1,
		"{'descr': '<u2', 'fortran_order': False, 'shape': (9,), }", 9 * 2) < 0 ||
	    npy(&b[3], "labels-i8.npy", 3,
		"{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }", 5 * 8) < 0) {
		snprintf(err, 256, "cannot build the .npy seeds");
		return -1;
	}
	return 4;
}

const struct fuzz_target fuzz_target = {"fuzz_npy", seeds, NULL};
