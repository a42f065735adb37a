/*
 * export.c - the trained weights as a numpy .npz (an uncompressed zip of .npy
 * members). zip "stored" entries need only the CRC-32, which zlib gives;
 * numpy reads them with np.load like any savez output. Residual models'
 * members carry torchvision's ResNet names (name_layers).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/util.h"
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
	char name[72];
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

/*
 * Member name prefixes. A sequential model's are "<layer>.<kind>"; a
 * residual one's are torchvision's ResNet names, so that its state_dict
 * loads them: conv1 and bn1 for the stem, layer<stage>.<block>.conv<k> /
 * bn<k> / downsample.0 / downsample.1 in the blocks (a new stage at the
 * first block and at each later block with a projection), fc for the final
 * dense layer; any other layer keeps "<layer>.<kind>".
 */
static void name_layers(const struct hn_model *m, char (*name)[48])
{
	int resnet = 0, stage = 0, block = -1, convs = 0, bns = 0, proj = 0, stem_c = 0, stem_b = 0;
	for (int i = 0; i < m->nlayers; i++)
		resnet |= m->layers[i].kind == HN_LAYER_SAVE;
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		const char *kind = l->kind == HN_LAYER_CONV2D  ? "conv2d"
				   : l->kind == HN_LAYER_DENSE ? "dense"
							       : "batchnorm";
		snprintf(name[i], sizeof name[i], "%d.%s", i, kind);
		if (!resnet)
			continue;
		if (l->kind == HN_LAYER_SAVE) {
			int projected = 0;
			for (int a = i + 1; a < m->nlayers; a++)
				projected |= m->layers[a].from == i + 1;
			if (block < 0 || projected)
				stage++, block = 0;
			else
				block++;
			convs = bns = proj = 0;
			continue;
		}
		if (l->kind == HN_LAYER_ADD)
			proj = -1; /* past the block */
		int conv = l->kind == HN_LAYER_CONV2D, bn = l->kind == HN_LAYER_BATCHNORM;
		if (block < 0 && conv && !stem_c++)
			snprintf(name[i], sizeof name[i], "conv1");
		else if (block < 0 && bn && !stem_b++)
			snprintf(name[i], sizeof name[i], "bn1");
		else if (proj >= 0 && block >= 0 && conv && l->from)
			snprintf(name[i], sizeof name[i], "layer%d.%d.downsample.0", stage, block),
				proj = 1;
		else if (proj >= 0 && block >= 0 && (conv || bn))
			snprintf(name[i], sizeof name[i],
				 proj	? "layer%d.%d.downsample.1"
				 : conv ? "layer%d.%d.conv%d"
					: "layer%d.%d.bn%d",
				 stage, block, conv ? ++convs : ++bns);
		else if (l->kind == HN_LAYER_DENSE && i == m->nlayers - 1)
			snprintf(name[i], sizeof name[i], "fc");
	}
}

int hn_export_npz(const char *path, const struct hn_model *m, const float *params,
		  const float *mean, const float *std, int nch, char *err)
{
	struct member ents[4 * HN_MAX_LAYERS + 2];
	char name[HN_MAX_LAYERS][48];
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
	name_layers(m, name);
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		int ws[4], bs[1], wd;
		if (l->kind == HN_LAYER_CONV2D) {
			ws[0] = l->out_c, ws[1] = l->in_c, ws[2] = ws[3] = l->k, wd = 4;
			bs[0] = l->out_c;
		} else if (l->kind == HN_LAYER_DENSE) {
			ws[0] = l->out_c * l->out_h * l->out_w;
			ws[1] = l->in_c * l->in_h * l->in_w, wd = 2;
			bs[0] = ws[0];
		} else if (l->kind == HN_LAYER_BATCHNORM) {
			ws[0] = bs[0] = l->out_c, wd = 1;
		} else {
			continue;
		}
		snprintf(ents[nents].name, sizeof ents[nents].name, "%s.weight.npy", name[i]);
		npy_member(&b, &ents[nents++], params + l->w_off, ws, wd);
		if (l->b_len) { /* a bias-free conv has none */
			snprintf(ents[nents].name, sizeof ents[nents].name, "%s.bias.npy", name[i]);
			npy_member(&b, &ents[nents++], params + l->b_off, bs, 1);
		}
		if (l->kind == HN_LAYER_BATCHNORM) {
			snprintf(ents[nents].name, sizeof ents[nents].name, "%s.running_mean.npy",
				 name[i]);
			npy_member(&b, &ents[nents++], params + l->s_off, bs, 1);
			snprintf(ents[nents].name, sizeof ents[nents].name, "%s.running_var.npy",
				 name[i]);
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
