/*
 * rows.c - decode a PNG or binary Netpbm file from its descriptor row by
 * row into a fit stream (codec.h), for sample.c: the file is never read
 * whole, the image never held whole.
 *
 * What a file costs is then bounded by its row width and the tile, not by
 * its size: a Netpbm header saying 1x1 in front of a 600 MB body reads the
 * header and one row; a 16000x16000 PNG holds a few rows. Only the bytes
 * the header's pixels need are read (a PNG's chunks up to its last image
 * row: trailing chunks are not read, as libpng's simplified reader does not
 * read them either).
 *
 * PNG goes through libpng's row API with the transforms that give what the
 * simplified API (codec.c, for images in memory) gives: palette and low bit
 * depths expanded, tRNS to alpha, 16 bits scaled to 8 with rounding, sRGB
 * output gamma (a 16-bit file without gamma information taken as sRGB),
 * alpha by the background (sample.h). An interlaced PNG needs all its
 * passes before a row is whole: -EAGAIN, and sample.c decodes it from
 * memory instead.
 */
#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/codec.h"
#include "common/rows.h"
#include "common/store.h"

/* A buffered reader on a descriptor, from its start. */
struct reader {
	int fd;
	int err; /* errno of a failed read */
	size_t pos, len;
	uint64_t total;	    /* bytes read from fd */
	uint8_t buf[65536]; /* last: the fields above are zeroed, not it */
};

/* Up to n bytes into dst; returns how many (fewer at end of file or on error). */
static size_t rd(struct reader *r, void *dst, size_t n)
{
	size_t got = 0;
	while (got < n) {
		if (r->pos == r->len) {
			ssize_t k = read(r->fd, r->buf, sizeof r->buf);
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				if (k < 0)
					r->err = errno;
				break;
			}
			r->pos = 0;
			r->len = (size_t)k;
			r->total += (uint64_t)k;
		}
		size_t take = r->len - r->pos < n - got ? r->len - r->pos : n - got;
		memcpy((uint8_t *)dst + got, r->buf + r->pos, take);
		r->pos += take;
		got += take;
	}
	return got;
}

/* ---- Netpbm -------------------------------------------------------------- */

static int pnm_rows(struct reader *r, uint64_t size, const struct sprite_sample_spec *sp,
		    uint8_t *tile, struct sprite_sample_got *got, char *why)
{
	/* the header: within the reader's first fill (64 KiB) */
	struct sprite_pnm hd;
	int rc = sprite_pnm_parse(r->buf, r->len, "", &hd, why);
	hd.bg = sp->background;
	if (rc < 0)
		return rc;
	got->h = hd.h;
	got->w = hd.w;
	uint64_t row = (uint64_t)hd.w * hd.depth * hd.bps, need = row * hd.h;
	if (need > size - hd.data_off) {
		sprite_image_err(why, "", "truncated: %llu bytes of samples, %llu present",
				 (unsigned long long)need,
				 (unsigned long long)(size - hd.data_off));
		return -SPRITE_ECORRUPT;
	}
	r->pos = hd.data_off;
	uint32_t oc = hd.depth >= 3 ? 3 : 1;
	uint8_t *in = malloc((size_t)row), *px = malloc((size_t)hd.w * oc);
	struct sprite_fit_stream *fs = NULL;
	rc = in && px ? sprite_fit_stream_begin(&fs, hd.h, hd.w, oc, sp->th, sp->tw, sp->tc,
						sp->fit, tile)
		      : -ENOMEM;
	for (uint32_t y = 0; rc == 0 && y < hd.h; y++) {
		if (rd(r, in, (size_t)row) != row) {
			sprite_image_err(why, "",
					 r->err ? "read error: %s" : "truncated while read%s",
					 r->err ? strerror(r->err) : "");
			rc = r->err ? -r->err : -SPRITE_ECORRUPT;
			break;
		}
		sprite_pnm_row(&hd, in, px);
		rc = sprite_fit_stream_row(fs, px);
	}
	if (rc == 0) {
		rc = sprite_fit_stream_end(fs);
		fs = NULL;
	}
	sprite_fit_stream_free(fs);
	free(in);
	free(px);
	if (rc == -ENOMEM)
		snprintf(why, SPRITE_ERR_MAX, "out of memory for a %ux%u image's rows", hd.h, hd.w);
	return rc;
}

/* ---- PNG ------------------------------------------------------------------ */

struct png_ctx {
	struct reader *r;
	char *why;
	jmp_buf jmp;
};

static void png_read_cb(png_structp png, png_bytep data, size_t n)
{
	struct png_ctx *c = png_get_io_ptr(png);
	if (rd(c->r, data, n) != n)
		png_error(png, c->r->err ? strerror(c->r->err) : "read beyond end of data");
}

static void png_error_cb(png_structp png, png_const_charp msg)
{
	struct png_ctx *c = png_get_error_ptr(png);
	sprite_image_err(c->why, "", "bad PNG: %s", msg);
	longjmp(c->jmp, 1);
}

static void png_warning_cb(png_structp png, png_const_charp msg)
{
	(void)png; /* as the simplified reader: a warning does not fail the image */
	(void)msg;
}

/* Everything the setjmp'd part allocates, freed after a longjmp too. */
struct png_mem {
	png_structp png;
	png_infop info;
	uint8_t *row, *px;
	struct sprite_fit_stream *fs;
};

static int png_rows_in(struct png_ctx *c, struct png_mem *m, const struct sprite_sample_spec *sp,
		       uint8_t *tile, struct sprite_sample_got *got)
{
	png_structp png = m->png;
	png_infop info = m->info;
	png_read_info(png, info);
	png_uint_32 w, h;
	int depth, color, interlace;
	png_get_IHDR(png, info, &w, &h, &depth, &color, &interlace, NULL, NULL);
	int rc = sprite_image_check_dims(h, w, "", c->why);
	if (rc < 0)
		return rc;
	got->h = h;
	got->w = w;
	if (interlace != PNG_INTERLACE_NONE)
		return -EAGAIN;
	png_set_expand(png);
	if (depth == 16)
		png_set_scale_16(png);
	png_set_alpha_mode(png, PNG_ALPHA_PNG, PNG_DEFAULT_sRGB);
	png_read_update_info(png, info);
	uint32_t ch = png_get_channels(png, info);
	size_t rowbytes = png_get_rowbytes(png, info);
	if (ch < 1 || ch > 4 || rowbytes != (size_t)w * ch) {
		sprite_image_err(c->why, "", "bad PNG: unexpected layout");
		return -SPRITE_ECORRUPT;
	}
	uint32_t oc = ch >= 3 ? 3 : 1, alpha = ch == 2 || ch == 4;
	m->row = malloc(rowbytes);
	m->px = alpha ? malloc((size_t)w * oc) : NULL;
	if (!m->row || (alpha && !m->px))
		return -ENOMEM;
	rc = sprite_fit_stream_begin(&m->fs, h, w, oc, sp->th, sp->tw, sp->tc, sp->fit, tile);
	for (png_uint_32 y = 0; rc == 0 && y < h; y++) {
		png_read_row(png, m->row, NULL);
		if (alpha)
			for (size_t i = 0; i < w; i++)
				for (uint32_t k = 0; k < oc; k++)
					m->px[i * oc + k] = sprite_over_bg(
						m->row[i * ch + k], m->row[i * ch + oc],
						sp->background, oc == 1 ? 3 : k);
		rc = sprite_fit_stream_row(m->fs, alpha ? m->px : m->row);
	}
	if (rc == 0) {
		rc = sprite_fit_stream_end(m->fs);
		m->fs = NULL;
	}
	return rc;
}

static int png_rows(struct reader *r, const struct sprite_sample_spec *sp, uint8_t *tile,
		    struct sprite_sample_got *got, char *why)
{
	struct png_ctx c = {.r = r, .why = why};
	struct png_mem m = {0};
	int rc;
	m.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &c, png_error_cb, png_warning_cb);
	m.info = m.png ? png_create_info_struct(m.png) : NULL;
	if (!m.info) {
		rc = -ENOMEM;
	} else if (setjmp(c.jmp)) {
		rc = -SPRITE_ECORRUPT; /* why set by png_error_cb */
	} else {
		png_set_read_fn(m.png, &c, png_read_cb);
		/* ancillary chunks (iCCP, text, ...) held at most 8 MB each */
		png_set_chunk_malloc_max(m.png, 8000000);
		rc = png_rows_in(&c, &m, sp, tile, got);
	}
	png_destroy_read_struct(m.png ? &m.png : NULL, m.info ? &m.info : NULL, NULL);
	sprite_fit_stream_free(m.fs);
	free(m.row);
	free(m.px);
	if (rc == -ENOMEM)
		snprintf(why, SPRITE_ERR_MAX, "out of memory for a %ux%u image's rows", got->h,
			 got->w);
	return rc;
}

int sprite_rows_decode(int fd, uint64_t size, const struct sprite_sample_spec *sp, uint8_t *tile,
		       struct sprite_sample_got *got, char *why)
{
	struct reader *r = malloc(sizeof *r);
	if (!r) {
		snprintf(why, SPRITE_ERR_MAX, "out of memory");
		return -ENOMEM;
	}
	memset(r, 0, offsetof(struct reader, buf));
	r->fd = fd;
	uint8_t head[8];
	size_t n = rd(r, head, sizeof head);
	r->pos = 0; /* the first fill holds them still: read again from the start */
	int rc;
	if (n >= 8 && !memcmp(head, "\x89PNG\r\n\x1a\n", 8))
		rc = png_rows(r, sp, tile, got, why);
	else if (n >= 4 && ((head[0] == 'I' && head[1] == 'I' && (head[2] == 42 || head[2] == 43) &&
			     head[3] == 0) ||
			    (head[0] == 'M' && head[1] == 'M' && head[2] == 0 &&
			     (head[3] == 42 || head[3] == 43))))
		rc = sprite_tiff_rows(fd, size, sp, tile, got, why);
	else if (n >= 3 && head[0] == 'P' && (head[1] == '5' || head[1] == '6' || head[1] == '7') &&
		 (head[2] == ' ' || head[2] == '\t' || head[2] == '\n' || head[2] == '\r'))
		rc = pnm_rows(r, size, sp, tile, got, why);
	else
		rc = -EAGAIN;
	if (got->bytes < r->total) /* (TIFF counts its own reads) */
		got->bytes = r->total;
	free(r);
	return rc;
}
