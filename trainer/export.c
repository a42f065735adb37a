/*
 * export.c - the trained weights as a numpy .npz (an uncompressed zip of .npy
 * members). zip "stored" entries need only the CRC-32, which zlib gives;
 * numpy reads them with np.load like any savez output.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/util.h"
#include "trainer/app.h"
#include "trainer/export.h"

struct buf {
	uint8_t *p;
	size_t len, cap;
	int oom;
};

static void put(struct buf *b, const void *src, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, src, n);
	b->len += n;
}

static void put16(struct buf *b, uint16_t v)
{
	uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
	put(b, x, 2);
}

static void put32(struct buf *b, uint32_t v)
{
	put16(b, (uint16_t)v);
	put16(b, (uint16_t)(v >> 16));
}

struct member {
	char name[48];
	uint32_t crc, size, offset;
};

/* The zip local header (and later the central entry) for one member, no time (1980-01-01). */
static void zip_header(struct buf *b, const struct member *e, int central)
{
	put32(b, central ? 0x02014b50 : 0x04034b50);
	if (central)
		put16(b, 20); /* made by: MS-DOS attributes, zip 2.0 */
	put16(b, 20);	      /* needed to extract */
	put16(b, 0);	      /* flags */
	put16(b, 0);	      /* stored */
	put16(b, 0);	      /* time */
	put16(b, 0x21);	      /* date: 1980-01-01 */
	put32(b, e->crc);
	put32(b, e->size);
	put32(b, e->size);
	put16(b, (uint16_t)strlen(e->name));
	put16(b, 0); /* extra */
	if (central) {
		put16(b, 0); /* comment */
		put16(b, 0); /* disk */
		put16(b, 0); /* internal attributes */
		put32(b, 0); /* external attributes */
		put32(b, e->offset);
	}
	put(b, e->name, strlen(e->name));
}

/* One .npy member (format 1.0, '<f4', C order) of count floats and the given shape. */
static void npy_member(struct buf *b, struct member *e, const float *v, const int *shape, int ndim)
{
	char dict[200];
	int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
	size_t count = 1;
	for (int i = 0; i < ndim; i++) {
		n += snprintf(dict + n, sizeof dict - (size_t)n, "%d,%s", shape[i],
			      i + 1 < ndim ? " " : "");
		count *= (size_t)shape[i];
	}
	n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
	/* magic(6) + version(2) + length(2) + dict + spaces + '\n': a multiple of 64 */
	size_t hlen = (10 + (size_t)n + 1 + 63) / 64 * 64 - 10;
	uint8_t head[256];
	memcpy(head, "\x93NUMPY\x01\x00", 8);
	head[8] = (uint8_t)hlen;
	head[9] = (uint8_t)(hlen >> 8);
	memcpy(head + 10, dict, (size_t)n);
	memset(head + 10 + n, ' ', hlen - (size_t)n - 1);
	head[10 + hlen - 1] = '\n';

	size_t data = count * sizeof(float);
	e->offset = (uint32_t)b->len;
	e->size = (uint32_t)(10 + hlen + data);
	uLong crc = crc32(0L, Z_NULL, 0);
	crc = crc32(crc, head, (uInt)(10 + hlen));
	/* the floats as stored: little-endian, as in a checkpoint */
	crc = crc32(crc, (const Bytef *)v, (uInt)data);
	e->crc = (uint32_t)crc;
	zip_header(b, e, 0);
	put(b, head, 10 + hlen);
	put(b, v, data);
}

int hn_export_npz(const char *path, const struct hn_model *m, const float *params,
		  const float *mean, const float *std, int nch, char *err)
{
	struct member ents[4 * HN_MAX_LAYERS + 2];
	int nents = 0;
	struct buf b = {0};

	/* zip32 offsets: refuse what would not fit (a 4 GiB model is not what this writes) */
	if (m->nparams > (UINT32_MAX - 65536 * 4 * HN_MAX_LAYERS) / sizeof(float)) {
		snprintf(err, HN_ERR_MAX, "%s: %zu parameters are too many for a zip32 .npz", path,
			 m->nparams);
		return -EFBIG;
	}
	if (mean && nch > 0) {
		int cs[1] = {nch};
		snprintf(ents[nents].name, sizeof ents[nents].name, "input.mean.npy");
		npy_member(&b, &ents[nents++], mean, cs, 1);
		snprintf(ents[nents].name, sizeof ents[nents].name, "input.std.npy");
		npy_member(&b, &ents[nents++], std, cs, 1);
	}
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		int ws[4], bs[1], wd;
		const char *kind;
		if (l->kind == HN_LAYER_CONV2D) {
			kind = "conv2d";
			ws[0] = l->out_c, ws[1] = l->in_c, ws[2] = ws[3] = l->k, wd = 4;
			bs[0] = l->out_c;
		} else if (l->kind == HN_LAYER_DENSE) {
			kind = "dense";
			ws[0] = l->out_c * l->out_h * l->out_w;
			ws[1] = l->in_c * l->in_h * l->in_w, wd = 2;
			bs[0] = ws[0];
		} else if (l->kind == HN_LAYER_BATCHNORM) {
			kind = "batchnorm";
			ws[0] = bs[0] = l->out_c, wd = 1;
		} else {
			continue;
		}
		snprintf(ents[nents].name, sizeof ents[nents].name, "%d.%s.weight.npy", i, kind);
		npy_member(&b, &ents[nents++], params + l->w_off, ws, wd);
		snprintf(ents[nents].name, sizeof ents[nents].name, "%d.%s.bias.npy", i, kind);
		npy_member(&b, &ents[nents++], params + l->b_off, bs, 1);
		if (l->kind == HN_LAYER_BATCHNORM) {
			snprintf(ents[nents].name, sizeof ents[nents].name,
				 "%d.batchnorm.running_mean.npy", i);
			npy_member(&b, &ents[nents++], params + l->s_off, bs, 1);
			snprintf(ents[nents].name, sizeof ents[nents].name,
				 "%d.batchnorm.running_var.npy", i);
			npy_member(&b, &ents[nents++], params + l->s_off + l->out_c, bs, 1);
		}
	}
	uint32_t cd = (uint32_t)b.len;
	for (int i = 0; i < nents; i++)
		zip_header(&b, &ents[i], 1);
	uint32_t cdlen = (uint32_t)b.len - cd;
	put32(&b, 0x06054b50);
	put16(&b, 0);
	put16(&b, 0);
	put16(&b, (uint16_t)nents);
	put16(&b, (uint16_t)nents);
	put32(&b, cdlen);
	put32(&b, cd);
	put16(&b, 0);
	if (b.oom) {
		free(b.p);
		snprintf(err, HN_ERR_MAX, "%s: out of memory for the archive", path);
		return -ENOMEM;
	}

	char why[SPRITE_ERR_MAX];
	int rc = sprite_write_file_atomic(path, b.p, b.len, why);
	free(b.p);
	if (rc < 0) {
		snprintf(err, HN_ERR_MAX, "cannot write the weights: %.200s", why);
		return rc;
	}
	return 0;
}
