/*
 * fit.c - fit a decoded image to a tile by the rule in image.h and
 * docs/FORMAT.md: channels first, then size (stretch, crop or pad).
 *
 * Crop and pad resize only the part of the image that lands in the tile:
 * the taps of a crop are those of the output rows and columns inside the
 * window, and a pad writes its resized image at an offset in a tile filled
 * with 0, so neither costs more than a stretch.
 *
 * A resize is separable: per-axis filter taps are computed once per call
 * (area average when shrinking, bilinear when enlarging) and applied to rows,
 * then to columns, so each output pixel costs a few multiply-adds whatever
 * the scale.
 */
#include "common/image.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/codec.h"

/* Per-axis filter taps: out[o] = sum_k wt[o*K+k] * in[idx[o*K+k]]. */
struct taps {
	uint32_t K;
	uint32_t *idx;
	float *wt;
};

/* Taps of outputs first..first+count-1 of a resize of in pixels to out. */
static int make_taps(struct taps *t, uint32_t in, uint32_t out, uint32_t first, uint32_t count)
{
	if (in > out)
		t->K = (in + out - 1) / out + 1; /* a box spans at most ceil(in/out)+1 pixels */
	else
		t->K = 2;
	t->idx = calloc((size_t)count * t->K, sizeof *t->idx);
	t->wt = calloc((size_t)count * t->K, sizeof *t->wt);
	if (!t->idx || !t->wt)
		return -ENOMEM;
	double scale = (double)in / out;
	for (uint32_t o = first; o < first + count; o++) {
		uint32_t *ix = t->idx + (size_t)(o - first) * t->K;
		float *wt = t->wt + (size_t)(o - first) * t->K;
		if (in == out) {
			ix[0] = o;
			wt[0] = 1.0f;
		} else if (in > out) {
			/* Area average: each source pixel weighs by its overlap with
			 * [o*scale, (o+1)*scale). */
			double a = o * scale, b = (o + 1) * scale;
			uint32_t i0 = (uint32_t)a, k = 0;
			for (uint32_t i = i0; i < in && i < b && k < t->K; i++, k++) {
				double lo = i > a ? i : a, hi = i + 1 < b ? i + 1 : b;
				ix[k] = i;
				wt[k] = (float)((hi - lo) / scale);
			}
		} else {
			/* Bilinear with pixel centres at i + 0.5. */
			double s = (o + 0.5) * scale - 0.5;
			if (s < 0)
				s = 0;
			if (s > in - 1)
				s = in - 1;
			uint32_t i0 = (uint32_t)s;
			double f = s - i0;
			ix[0] = i0;
			wt[0] = (float)(1.0 - f);
			ix[1] = i0 + 1 < in ? i0 + 1 : i0;
			wt[1] = (float)f;
		}
	}
	return 0;
}

static void free_taps(struct taps *t)
{
	free(t->idx);
	free(t->wt);
}

static inline uint8_t clamp_u8(float v)
{
	if (v <= 0.0f)
		return 0;
	if (v >= 255.0f)
		return 255;
	return (uint8_t)(v + 0.5f);
}

/*
 * Resize sh x sw to rh x rw and write its rows y0.. and columns x0.. (dh x
 * dw of them) to dst, rows dstride bytes apart.
 */
static int resize(const uint8_t *src, uint32_t sh, uint32_t sw, uint32_t c, uint32_t rh,
		  uint32_t rw, uint32_t y0, uint32_t x0, uint32_t dh, uint32_t dw, uint8_t *dst,
		  size_t dstride)
{
	struct taps ty = {0}, tx = {0};
	float *row = NULL;
	int r = -ENOMEM;
	if (make_taps(&ty, sh, rh, y0, dh) < 0 || make_taps(&tx, sw, rw, x0, dw) < 0)
		goto done;
	row = malloc((size_t)sw * c * sizeof *row);
	if (!row)
		goto done;
	size_t srow = (size_t)sw * c;
	for (uint32_t oy = 0; oy < dh; oy++) {
		/* Vertical pass into one float row, then horizontal into the tile. */
		memset(row, 0, srow * sizeof *row);
		for (uint32_t k = 0; k < ty.K; k++) {
			float wv = ty.wt[(size_t)oy * ty.K + k];
			if (wv == 0.0f)
				continue;
			const uint8_t *s = src + (size_t)ty.idx[(size_t)oy * ty.K + k] * srow;
			for (size_t i = 0; i < srow; i++)
				row[i] += wv * s[i];
		}
		uint8_t *d = dst + (size_t)oy * dstride;
		for (uint32_t ox = 0; ox < dw; ox++) {
			for (uint32_t ch = 0; ch < c; ch++) {
				float acc = 0.0f;
				for (uint32_t k = 0; k < tx.K; k++) {
					float wv = tx.wt[(size_t)ox * tx.K + k];
					if (wv != 0.0f)
						acc += wv *
						       row[(size_t)tx.idx[(size_t)ox * tx.K + k] *
								   c +
							   ch];
				}
				d[(size_t)ox * c + ch] = clamp_u8(acc);
			}
		}
	}
	r = 0;
done:
	free(row);
	free_taps(&ty);
	free_taps(&tx);
	return r;
}

static inline uint8_t luma(const uint8_t *p)
{
	return (uint8_t)((299u * p[0] + 587u * p[1] + 114u * p[2] + 500u) / 1000u);
}

const char *sprite_fit_name(uint32_t fit)
{
	return fit == SPRITE_FIT_STRETCH ? "stretch"
	       : fit == SPRITE_FIT_CROP	 ? "crop"
	       : fit == SPRITE_FIT_PAD	 ? "pad"
					 : NULL;
}

int sprite_fit_parse(const char *s, enum sprite_fit *out)
{
	for (uint32_t f = 0; f <= SPRITE_FIT_PAD; f++)
		if (!strcmp(s, sprite_fit_name(f))) {
			*out = (enum sprite_fit)f;
			return 0;
		}
	return -EINVAL;
}

/*
 * The arithmetic docs/FORMAT.md states, all in integers (64-bit products):
 * the image is "wider" than the tile when w*th >= h*tw. Crop scales the
 * sides so that the image covers the tile, the longer side truncated as
 * torchvision's Resize(int) does; pad so that it fits inside, the shorter
 * side truncated but at least 1. Offsets centre, rounding down.
 */
void sprite_fit_geometry(uint32_t h, uint32_t w, uint32_t th, uint32_t tw, enum sprite_fit fit,
			 struct sprite_fit_geom *g)
{
	int wider = (uint64_t)w * th >= (uint64_t)h * tw;
	memset(g, 0, sizeof *g);
	if (fit == SPRITE_FIT_STRETCH || h == 0 || w == 0) {
		g->rh = th;
		g->rw = tw;
	} else if (fit == SPRITE_FIT_CROP) {
		if (wider) {
			g->rh = th;
			g->rw = (uint32_t)((uint64_t)w * th / h); /* >= tw as w*th >= h*tw */
		} else {
			g->rw = tw;
			g->rh = (uint32_t)((uint64_t)h * tw / w);
		}
		g->crop_y = (g->rh - th) / 2;
		g->crop_x = (g->rw - tw) / 2;
	} else {
		if (wider) {
			g->rw = tw;
			g->rh = (uint32_t)((uint64_t)h * tw / w); /* <= th */
		} else {
			g->rh = th;
			g->rw = (uint32_t)((uint64_t)w * th / h);
		}
		if (g->rh == 0)
			g->rh = 1;
		if (g->rw == 0)
			g->rw = 1;
		g->pad_y = (th - g->rh) / 2;
		g->pad_x = (tw - g->rw) / 2;
	}
}

int sprite_image_fit(const struct sprite_image *im, uint32_t h, uint32_t w, uint32_t c,
		     enum sprite_fit fit, uint8_t *tile)
{
	if (!im || !im->px || !tile || im->h == 0 || im->w == 0 || h == 0 || w == 0 ||
	    (uint32_t)fit > SPRITE_FIT_PAD)
		return -EINVAL;
	if ((im->c != 1 && im->c != 3 && im->c != 4) || (c != 1 && c != 3 && c != 4))
		return -EINVAL;
	if ((uint64_t)im->h * im->w > SPRITE_IMAGE_MAX_PIXELS ||
	    (uint64_t)h * w > SPRITE_IMAGE_MAX_PIXELS)
		return -EINVAL;
	size_t n = (size_t)im->h * im->w;
	const uint8_t *src = im->px;
	uint8_t *conv = NULL;
	int same_size = im->h == h && im->w == w;
	struct sprite_fit_geom g;
	sprite_fit_geometry(im->h, im->w, h, w, fit, &g);
	if (im->c != c) {
		/* Convert channels first, into the tile itself when no resize follows. */
		conv = same_size ? tile : malloc(n * c);
		if (!conv)
			return -ENOMEM;
		const uint8_t *s = im->px;
		for (size_t i = 0; i < n; i++, s += im->c) {
			uint8_t *d = conv + i * c;
			uint8_t rgb[3];
			if (im->c == 1) {
				rgb[0] = rgb[1] = rgb[2] = s[0];
			} else if (im->c == 4) {
				for (int k = 0; k < 3; k++)
					rgb[k] = sprite_over_black(s[k], s[3]);
			} else {
				memcpy(rgb, s, 3);
			}
			if (c == 1) {
				d[0] = im->c == 1 ? s[0] : luma(rgb);
			} else {
				memcpy(d, rgb, 3);
				if (c == 4)
					d[3] = 255;
			}
		}
		src = conv;
	}
	int r = 0;
	if (same_size) {
		if (src != tile)
			memcpy(tile, src, n * c);
	} else if (fit == SPRITE_FIT_PAD) {
		memset(tile, 0, (size_t)h * w * c); /* the fill: 0 in every channel */
		r = resize(src, im->h, im->w, c, g.rh, g.rw, 0, 0, g.rh, g.rw,
			   tile + ((size_t)g.pad_y * w + g.pad_x) * c, (size_t)w * c);
	} else {
		r = resize(src, im->h, im->w, c, g.rh, g.rw, g.crop_y, g.crop_x, h, w, tile,
			   (size_t)w * c);
	}
	if (conv && conv != tile)
		free(conv);
	return r;
}
