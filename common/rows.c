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
 * simplified API (codec.c, for 8-bit images in memory) gives: palette and
 * low bit depths expanded, tRNS to alpha, sRGB output gamma (a file without
 * gamma information taken as sRGB), alpha by the background (sample.h).
 * 16-bit samples are kept and converted here by the 16-bit rule (codec.h),
 * which the simplified API cannot give, so 16-bit PNGs in memory come here
 * too (sprite_png16_decode, the reader on the caller's bytes). A 16-bit
 * gray file is decoded twice: once up to its first sample over 255 (the
 * rule depends on the whole image), then into the fit. An interlaced PNG
 * needs all its passes before a row is whole: -EAGAIN, and sample.c decodes
 * it from memory instead.
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

/* A buffered reader on a descriptor from its start, or on bytes in memory. */
struct reader {
	int fd;	 /* -1: the bytes are at's, len of them */
	int err; /* errno of a failed read */
	size_t pos, len;
	uint64_t total;	   /* the offset in fd read up to */
	uint64_t seen;	   /* the furthest total before a reader_seek */
	const uint8_t *at; /* the bytes being read: buf, or the caller's */
	uint8_t buf[];	   /* 65536 bytes on a descriptor */
};

#define READER_BUF 65536

/* Up to n bytes into dst; returns how many (fewer at end of file or on error). */
static size_t rd(struct reader *r, void *dst, size_t n)
{
	size_t got = 0;
	while (got < n) {
		if (r->pos == r->len) {
			if (r->fd < 0)
				break;
			ssize_t k = read(r->fd, r->buf, READER_BUF);
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
		memcpy((uint8_t *)dst + got, r->at + r->pos, take);
		r->pos += take;
		got += take;
	}
	return got;
}

/* Read again from byte off: 0, or -errno with why set. */
static int reader_seek(struct reader *r, uint64_t off, char *why)
{
	if (r->fd < 0) {
		r->pos = off < r->len ? (size_t)off : r->len;
		return 0;
	}
	if (lseek(r->fd, (off_t)off, SEEK_SET) < 0) {
		int e = errno;
		snprintf(why, SPRITE_ERR_MAX, "cannot seek: %s", strerror(e));
		return -e;
	}
	r->pos = r->len = 0;
	if (r->total > r->seen) /* bytes read again are counted once */
		r->seen = r->total;
	r->total = off;
	return 0;
}

/* ---- Netpbm -------------------------------------------------------------- */

/* One row of n bytes of samples: 0, or -errno with why set. */
static int pnm_read_row(struct reader *r, uint8_t *in, size_t n, char *why)
{
	if (rd(r, in, n) == n)
		return 0;
	sprite_image_err(why, "", r->err ? "read error: %s" : "truncated while read%s",
			 r->err ? strerror(r->err) : "");
	return r->err ? -r->err : -SPRITE_ECORRUPT;
}

static int pnm_rows(struct reader *r, uint64_t size, const struct sprite_sample_spec *sp,
		    uint8_t *tile, struct sprite_sample_got *got, char *why)
{
	/* the header: within the reader's first fill (64 KiB) */
	struct sprite_pnm hd;
	int rc = sprite_pnm_parse(r->at, r->len, "", &hd, why);
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
	/* a gray16 image: rows read once for as8 (up to a sample over 255), then again */
	if (rc == 0 && sprite_pnm_gray16(&hd)) {
		hd.as8 = 1;
		for (uint32_t y = 0; rc == 0 && hd.as8 && y < hd.h; y++)
			if ((rc = pnm_read_row(r, in, (size_t)row, why)) == 0)
				hd.as8 = !sprite_16_over8(in, hd.w, 1, 1);
		if (rc == 0)
			rc = reader_seek(r, hd.data_off, why);
	}
	for (uint32_t y = 0; rc == 0 && y < hd.h; y++) {
		if ((rc = pnm_read_row(r, in, (size_t)row, why)) < 0)
			break;
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
	const char *name; /* in messages: "" on a descriptor */
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
	sprite_image_err(c->why, c->name, "bad PNG: %s", msg);
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
	uint8_t *row, *px; /* a row of the file and one converted; the memory path's image */
	png_bytep *rows;   /* the memory path's row pointers */
	struct sprite_fit_stream *fs;
};

/* The image as the transforms give it. */
struct png_shape {
	uint32_t h, w, ch; /* ch 1-4: gray, gray+alpha, RGB, RGBA */
	int b16;	   /* 16-bit samples, big-endian */
	int gray;	   /* stored gray without alpha: the 16-bit as8 rule applies */
	size_t rowbytes;
};

/*
 * The header and the transforms: palette and low depths expanded, tRNS to
 * alpha, sRGB output gamma (a file without gamma information taken as
 * sRGB), 16 bits kept for the 16-bit rule (codec.h). An interlaced file
 * gets libpng's interlace handling where whole (all passes before a row is
 * whole), else -EAGAIN.
 */
static int png_setup(struct png_ctx *c, struct png_mem *m, int whole, struct png_shape *s)
{
	png_structp png = m->png;
	png_infop info = m->info;
	png_read_info(png, info);
	png_uint_32 w, h;
	int depth, color, interlace;
	png_get_IHDR(png, info, &w, &h, &depth, &color, &interlace, NULL, NULL);
	int rc = sprite_image_check_dims(h, w, c->name, c->why);
	if (rc < 0)
		return rc;
	s->h = h;
	s->w = w;
	if (interlace != PNG_INTERLACE_NONE) {
		if (!whole)
			return -EAGAIN;
		png_set_interlace_handling(png);
	}
	png_set_expand(png);
	png_set_alpha_mode(png, PNG_ALPHA_PNG, PNG_DEFAULT_sRGB);
	png_read_update_info(png, info);
	s->ch = png_get_channels(png, info);
	s->b16 = png_get_bit_depth(png, info) == 16;
	s->gray = color == PNG_COLOR_TYPE_GRAY;
	s->rowbytes = png_get_rowbytes(png, info);
	if (s->ch < 1 || s->ch > 4 || s->rowbytes != (size_t)w * s->ch * (s->b16 ? 2 : 1)) {
		sprite_image_err(c->why, c->name, "bad PNG: unexpected layout");
		return -SPRITE_ECORRUPT;
	}
	return 0;
}

/*
 * A row of 16-bit samples (ch a pixel) to w pixels of 1 or 3 channels by
 * the 16-bit rule: a gray value as it is when as8, else its high byte, as
 * PIL takes 16-bit PNGs; alpha (its high byte) by bg. out may be in: each
 * pixel is read whole before it is written.
 */
static void png16_row(const uint8_t *in, uint32_t w, uint32_t ch, int as8, uint32_t bg,
		      uint8_t *out)
{
	uint32_t oc = ch >= 3 ? 3 : 1, alpha = ch == 2 || ch == 4;
	for (uint32_t i = 0; i < w; i++, in += 2 * ch, out += oc) {
		unsigned v[4];
		for (uint32_t k = 0; k < ch; k++)
			v[k] = (unsigned)in[2 * k] << 8 | in[2 * k + 1];
		for (uint32_t k = 0; k < oc; k++) {
			unsigned v8 = as8 ? v[k] : v[k] >> 8;
			out[k] = alpha ? sprite_over_bg(v8, v[oc] >> 8, bg, oc == 1 ? 3 : k)
				       : (uint8_t)v8;
		}
	}
}

/*
 * The rows into the fit. A 16-bit gray file with *as8 not known (-1) has
 * its rows read up to a sample over 255 to learn it: then 1, for the
 * caller to decode the file again.
 */
static int png_rows_in(struct png_ctx *c, struct png_mem *m, const struct sprite_sample_spec *sp,
		       uint8_t *tile, struct sprite_sample_got *got, int *as8)
{
	png_structp png = m->png;
	struct png_shape s = {0};
	int rc = png_setup(c, m, 0, &s);
	got->h = s.h;
	got->w = s.w;
	if (rc < 0)
		return rc;
	uint32_t oc = s.ch >= 3 ? 3 : 1, alpha = s.ch == 2 || s.ch == 4, conv = alpha || s.b16;
	m->row = malloc(s.rowbytes);
	m->px = conv ? malloc((size_t)s.w * oc) : NULL;
	if (!m->row || (conv && !m->px))
		return -ENOMEM;
	if (s.b16 && s.gray && *as8 < 0) {
		*as8 = 1;
		for (uint32_t y = 0; *as8 && y < s.h; y++) {
			png_read_row(png, m->row, NULL);
			*as8 = !sprite_16_over8(m->row, s.w, s.ch, 1);
		}
		return 1;
	}
	rc = sprite_fit_stream_begin(&m->fs, s.h, s.w, oc, sp->th, sp->tw, sp->tc, sp->fit, tile);
	for (uint32_t y = 0; rc == 0 && y < s.h; y++) {
		png_read_row(png, m->row, NULL);
		if (s.b16)
			png16_row(m->row, s.w, s.ch, s.gray && *as8 == 1, sp->background, m->px);
		else if (alpha)
			for (size_t i = 0; i < s.w; i++)
				for (uint32_t k = 0; k < oc; k++)
					m->px[i * oc + k] = sprite_over_bg(
						m->row[i * s.ch + k], m->row[i * s.ch + oc],
						sp->background, oc == 1 ? 3 : k);
		rc = sprite_fit_stream_row(m->fs, conv ? m->px : m->row);
	}
	if (rc == 0) {
		rc = sprite_fit_stream_end(m->fs);
		m->fs = NULL;
	}
	return rc;
}

/* libpng's structures on c (NULL ones: -ENOMEM follows). */
static void png_open(struct png_ctx *c, struct png_mem *m)
{
	m->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, c, png_error_cb, png_warning_cb);
	m->info = m->png ? png_create_info_struct(m->png) : NULL;
	if (m->info) {
		png_set_read_fn(m->png, c, png_read_cb);
		/* ancillary chunks (iCCP, text, ...) held at most 8 MB each */
		png_set_chunk_malloc_max(m->png, 8000000);
	}
}

static void png_close(struct png_mem *m)
{
	png_destroy_read_struct(m->png ? &m->png : NULL, m->info ? &m->info : NULL, NULL);
	sprite_fit_stream_free(m->fs);
	free(m->row);
	free(m->px);
	free(m->rows);
}

/* One decode of the file from its start: png_rows_in's result. */
static int png_pass(struct reader *r, const struct sprite_sample_spec *sp, uint8_t *tile,
		    struct sprite_sample_got *got, char *why, int *as8)
{
	struct png_ctx c = {.r = r, .name = "", .why = why};
	struct png_mem m = {0};
	int rc;
	png_open(&c, &m);
	if (!m.info)
		rc = -ENOMEM;
	else if (setjmp(c.jmp))
		rc = -SPRITE_ECORRUPT; /* why set by png_error_cb */
	else
		rc = png_rows_in(&c, &m, sp, tile, got, as8);
	png_close(&m);
	if (rc == -ENOMEM)
		snprintf(why, SPRITE_ERR_MAX, "out of memory for a %ux%u image's rows", got->h,
			 got->w);
	return rc;
}

static int png_rows(struct reader *r, const struct sprite_sample_spec *sp, uint8_t *tile,
		    struct sprite_sample_got *got, char *why)
{
	int as8 = -1; /* a 16-bit gray file's: found by a first pass */
	int rc = png_pass(r, sp, tile, got, why, &as8);
	if (rc == 1) { /* as8 found: again, from the start */
		rc = reader_seek(r, 0, why);
		if (rc == 0)
			rc = png_pass(r, sp, tile, got, why, &as8);
	}
	return rc;
}

/* The whole image into m->row, converted in place; see sprite_png16_decode. */
static int png16_whole(struct png_ctx *c, struct png_mem *m, uint32_t bg, struct sprite_image *out)
{
	struct png_shape s = {0};
	int rc = png_setup(c, m, 1, &s);
	if (rc < 0)
		return rc;
	if (!s.b16) {
		sprite_image_err(c->why, c->name, "bad PNG: unexpected layout");
		return -SPRITE_ECORRUPT;
	}
	m->row = malloc(s.h * s.rowbytes);
	m->rows = malloc(s.h * sizeof *m->rows);
	if (!m->row || !m->rows) {
		sprite_image_err(c->why, c->name, "out of memory for %ux%u pixels", s.h, s.w);
		return -ENOMEM;
	}
	for (uint32_t y = 0; y < s.h; y++)
		m->rows[y] = m->row + y * s.rowbytes;
	png_read_image(m->png, m->rows);
	int as8 = s.gray;
	for (uint32_t y = 0; as8 && y < s.h; y++)
		as8 = !sprite_16_over8(m->rows[y], s.w, s.ch, 1);
	uint32_t oc = s.ch >= 3 ? 3 : 1;
	for (uint32_t y = 0; y < s.h; y++)
		png16_row(m->rows[y], s.w, s.ch, as8, bg, m->row + (size_t)y * s.w * oc);
	out->h = s.h;
	out->w = s.w;
	out->c = oc;
	uint8_t *shrunk = realloc(m->row, (size_t)s.h * s.w * oc);
	out->px = shrunk ? shrunk : m->row;
	m->row = NULL;
	return 0;
}

int sprite_png16_decode(const void *data, size_t len, const char *name, uint32_t bg,
			struct sprite_image *out, char *err)
{
	struct reader r = {.fd = -1, .len = len, .at = data};
	struct png_ctx c = {.r = &r, .name = name, .why = err};
	struct png_mem m = {0};
	int rc;
	png_open(&c, &m);
	if (!m.info) {
		sprite_image_err(err, name, "out of memory");
		rc = -ENOMEM;
	} else if (setjmp(c.jmp)) {
		rc = -SPRITE_ECORRUPT; /* err set by png_error_cb */
	} else {
		rc = png16_whole(&c, &m, bg, out);
	}
	png_close(&m);
	return rc;
}

int sprite_rows_decode(int fd, uint64_t size, const struct sprite_sample_spec *sp, uint8_t *tile,
		       struct sprite_sample_got *got, char *why)
{
	struct reader *r = malloc(sizeof *r + READER_BUF);
	if (!r) {
		snprintf(why, SPRITE_ERR_MAX, "out of memory");
		return -ENOMEM;
	}
	memset(r, 0, sizeof *r);
	r->fd = fd;
	r->at = r->buf;
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
	uint64_t total = r->total > r->seen ? r->total : r->seen;
	if (got->bytes < total) /* (TIFF counts its own reads) */
		got->bytes = total;
	free(r);
	return rc;
}
