/*
 * codec.h - private to common/: what the image files (codec.c, tiff.c, fit.c,
 * idx.c) share behind the public image.h. Not installed, not for callers
 * outside common/.
 */
#ifndef SPRITE_CODEC_H
#define SPRITE_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/image.h"

/*
 * The message "NAME: REASON" into err (SPRITE_ERR_MAX bytes; NULL: nothing),
 * NAME escaped (sprite_escape) and shortened from the left so that the
 * reason always shows whole; no "NAME: " when name is NULL or empty.
 */
void sprite_image_err(char *err, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * 0 when an h*w image is within SPRITE_IMAGE_MAX_SIDE and
 * SPRITE_IMAGE_MAX_PIXELS and not empty; else -SPRITE_ECORRUPT, err set.
 * Called on every size read from a file before anything is allocated.
 */
int sprite_image_check_dims(uint64_t h, uint64_t w, const char *name, char *err);

/* out set to h*w*c and its pixels malloc'd (uninitialised); 0, or -ENOMEM with err set. */
int sprite_image_alloc(struct sprite_image *out, uint32_t h, uint32_t w, uint32_t c,
		       const char *name, char *err);

/*
 * Channel k (0-2 R, G, B; 3 a grey value) of a pixel with 8-bit alpha a by
 * the background bg (SPRITE_BG_*, format.h): the value as stored, or
 * composited on the background's colour (its grey by the fit rule's luma).
 */
static inline uint8_t sprite_over_bg(unsigned v, unsigned a, uint32_t bg, unsigned k)
{
	if ((bg >> 24) != 1)
		return (uint8_t)v;
	unsigned b =
		k < 3 ? (bg >> (16 - 8 * k)) & 255
		      : (((bg >> 16) & 255) * 299 + ((bg >> 8) & 255) * 587 + (bg & 255) * 114 +
			 500) / 1000;
	return (uint8_t)((v * a + b * (255 - a) + 127) / 255);
}

/*
 * 16-bit samples to 8 bits (docs/FORMAT.md, "The tile fit rule"). A gray
 * image without alpha whose samples are all 255 or less keeps them as they
 * are ("as8": PIL's convert("L") shows such a file so, where scaling would
 * make it black); other 16-bit samples are scaled by the declared depth:
 * their high byte for PNG and TIFF (as PIL takes 16-bit colour), rounded
 * by maxval for Netpbm. sprite_16_over8: whether any of n 16-bit samples,
 * one every step samples from p (big-endian when be, else native), is
 * above 255: a decoder finds as8 with it over the whole image before it
 * converts a row.
 */
static inline int sprite_16_over8(const uint8_t *p, size_t n, size_t step, int be)
{
	for (size_t i = 0; i < n; i++, p += 2 * step) {
		uint16_t v;
		if (be)
			v = (uint16_t)(p[0] << 8 | p[1]);
		else
			memcpy(&v, p, 2);
		if (v > 255)
			return 1;
	}
	return 0;
}

/*
 * The fit of image.h as a stream of rows (fit.c): begin with the image's
 * size and channels (ic 1, 3, or 4 for RGBA composited on black: the
 * decoders apply the background and give 1 or 3), give its ih rows top to
 * bottom (iw * ic bytes each), end. The tile is written as rows come and is
 * whole after end, the same bytes
 * sprite_image_fit gives for the whole image. The stream holds a few rows
 * of iw * tc floats (sprite_fit_stream_bytes), not the image. 0 or -errno
 * (-EINVAL for bad shapes or a row count that is not ih); free() an unended
 * stream with sprite_fit_stream_free.
 */
struct sprite_fit_stream;
int sprite_fit_stream_begin(struct sprite_fit_stream **out, uint32_t ih, uint32_t iw, uint32_t ic,
			    uint32_t th, uint32_t tw, uint32_t tc, enum sprite_fit fit,
			    uint8_t *tile);
int sprite_fit_stream_row(struct sprite_fit_stream *fs, const uint8_t *row);
int sprite_fit_stream_end(struct sprite_fit_stream *fs); /* frees fs */
void sprite_fit_stream_free(struct sprite_fit_stream *fs);
size_t sprite_fit_stream_bytes(const struct sprite_fit_stream *fs);

/*
 * A binary Netpbm header (P5, P6, P7) from the first len bytes of a file:
 * sizes checked (sprite_image_check_dims), depth 1-4, maxval 1-65535;
 * data_off where the samples start. sprite_pnm_row turns one row of samples
 * (w * depth * bps bytes) into w pixels of 1 or 3 channels (alpha by bg,
 * which the caller sets after parsing), as the decoder does. A gray image
 * of maxval 65535 (sprite_pnm_gray16) needs as8 set first: whether all its
 * samples are 255 or less (sprite_16_over8 over the whole image, big-endian).
 */
struct sprite_pnm {
	uint32_t w, h, depth, maxval, bps;
	size_t data_off;
	uint32_t bg;  /* SPRITE_BG_*: what alpha becomes (0 from parse: as stored) */
	uint32_t as8; /* a gray16 image's samples are taken as they are (0 from parse) */
};
static inline int sprite_pnm_gray16(const struct sprite_pnm *hd)
{
	return hd->depth == 1 && hd->maxval == 65535;
}
int sprite_pnm_parse(const uint8_t *p, size_t len, const char *name, struct sprite_pnm *hd,
		     char *err);
void sprite_pnm_row(const struct sprite_pnm *hd, const uint8_t *s, uint8_t *out);

/* The WebP decoder (webp.c), as sprite_image_decode calls it on RIFF....WEBP. */
int sprite_webp_decode(const void *data, size_t len, const char *name, uint32_t bg,
		       struct sprite_image *out, char *err);

/*
 * A 16-bit PNG (rows.c, with the row decoder's transforms), as
 * sprite_image_decode calls it on a PNG whose IHDR says 16 bits: interlaced
 * or not, converted by the 16-bit rule above, alpha by bg.
 */
int sprite_png16_decode(const void *data, size_t len, const char *name, uint32_t bg,
			struct sprite_image *out, char *err);

/* The TIFF decoder (tiff.c), as sprite_image_decode calls it on TIFF magic. */
int sprite_tiff_decode(const void *data, size_t len, const char *name, uint32_t bg,
		       struct sprite_image *out, char *err);

#endif
