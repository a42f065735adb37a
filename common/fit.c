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
 * the scale. It runs as a stream of rows (sprite_fit_stream_*, codec.h), so
 * that a decoder that gives rows never holds the whole image; a decoded
 * image is fitted by streaming its rows, the same arithmetic.
 */
#include "common/image.h"

#include <errno.h>
#include <stdio.h>
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

int sprite_bg_parse(const char *s, uint32_t *out)
{
	unsigned v[3];
	int n = -1;
	if (!strcmp(s, "none")) {
		*out = SPRITE_BG_STORED;
		return 0;
	}
	if (!strcmp(s, "black") || !strcmp(s, "white")) {
		*out = s[0] == 'b' ? SPRITE_BG_RGB(0, 0, 0) : SPRITE_BG_RGB(255, 255, 255);
		return 0;
	}
	if (s[0] < '0' || s[0] > '9' || sscanf(s, "%3u,%3u,%3u%n", &v[0], &v[1], &v[2], &n) != 3 ||
	    n < 0 || s[n] || v[0] > 255 || v[1] > 255 || v[2] > 255)
		return -EINVAL;
	*out = SPRITE_BG_RGB(v[0], v[1], v[2]);
	return 0;
}

char *sprite_bg_name(uint32_t bg, char *buf, size_t size)
{
	if ((bg >> 24) != 1)
		snprintf(buf, size, "%s", bg == 0 ? "not recorded" : "none");
	else if ((bg & 0xffffff) == 0 || (bg & 0xffffff) == 0xffffff)
		snprintf(buf, size, "%s", bg & 1 ? "white" : "black");
	else
		snprintf(buf, size, "%u,%u,%u", (bg >> 16) & 255, (bg >> 8) & 255, bg & 255);
	return buf;
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

/*
 * The fit as a stream of rows (codec.h): each row is converted to the
 * tile's channels, then either copied (same size) or added, weighted, into
 * the float accumulator of each output row whose vertical taps take it; an
 * output row whose last tap has come is finished at once by its horizontal
 * pass. Only the output rows whose taps are open hold an accumulator, so
 * memory is a few rows of the image's width, not the image: slots rows of
 * iw * tc floats, slots the most output rows one input row feeds (2 or 3
 * when shrinking). The additions happen in the order a whole-image pass
 * would make them (taps in order, zero weights skipped), so the tile is
 * the same to the bit however the rows come.
 */
struct sprite_fit_stream {
	uint32_t ih, iw, ic, th, tw, tc;
	int same;		/* the image is the tile's size: rows copied */
	uint32_t y;		/* input rows taken */
	uint32_t dh, dw;	/* output rows and columns written */
	uint8_t *dst;		/* output row 0, column 0 in the tile */
	size_t dstride;		/* tile row bytes */
	struct taps ty, tx;	/* taps of the dh rows and dw columns */
	uint32_t *first, *last; /* per output row: its first and last input row */
	uint32_t lo, hi;	/* output rows [lo, hi) hold an accumulator */
	uint32_t slots;		/* accumulators, output row oy in slot oy % slots */
	float *acc;		/* slots rows of iw * tc */
	uint8_t *conv;		/* one input row in the tile's channels */
};

/* One pixel of ic channels to tc, by the channel rule. */
static inline void convert_px(const uint8_t *s, uint32_t ic, uint8_t *d, uint32_t tc)
{
	uint8_t rgb[3];
	if (ic == 1) {
		rgb[0] = rgb[1] = rgb[2] = s[0];
	} else if (ic == 4) {
		for (int k = 0; k < 3; k++)
			rgb[k] = sprite_over_bg(s[k], s[3], SPRITE_BG_RGB(0, 0, 0), k);
	} else {
		memcpy(rgb, s, 3);
	}
	if (tc == 1) {
		d[0] = ic == 1 ? s[0] : luma(rgb);
	} else {
		memcpy(d, rgb, 3);
		if (tc == 4)
			d[3] = 255;
	}
}

void sprite_fit_stream_free(struct sprite_fit_stream *fs)
{
	if (!fs)
		return;
	free_taps(&fs->ty);
	free_taps(&fs->tx);
	free(fs->first);
	free(fs->last);
	free(fs->acc);
	free(fs->conv);
	free(fs);
}

int sprite_fit_stream_begin(struct sprite_fit_stream **out, uint32_t ih, uint32_t iw, uint32_t ic,
			    uint32_t th, uint32_t tw, uint32_t tc, enum sprite_fit fit,
			    uint8_t *tile)
{
	*out = NULL;
	if (!tile || ih == 0 || iw == 0 || th == 0 || tw == 0 || (uint32_t)fit > SPRITE_FIT_PAD ||
	    (ic != 1 && ic != 3 && ic != 4) || (tc != 1 && tc != 3 && tc != 4) ||
	    (uint64_t)ih * iw > SPRITE_IMAGE_MAX_PIXELS ||
	    (uint64_t)th * tw > SPRITE_IMAGE_MAX_PIXELS)
		return -EINVAL;
	struct sprite_fit_stream *fs = calloc(1, sizeof *fs);
	if (!fs)
		return -ENOMEM;
	fs->ih = ih;
	fs->iw = iw;
	fs->ic = ic;
	fs->th = th;
	fs->tw = tw;
	fs->tc = tc;
	fs->same = ih == th && iw == tw;
	fs->conv = malloc((size_t)iw * tc);
	if (!fs->conv)
		goto oom;
	*out = fs;
	fs->dst = tile;
	if (fs->same)
		return 0;
	struct sprite_fit_geom g;
	sprite_fit_geometry(ih, iw, th, tw, fit, &g);
	uint32_t y0 = 0, x0 = 0;
	fs->dstride = (size_t)tw * tc;
	if (fit == SPRITE_FIT_PAD) {
		memset(tile, 0, (size_t)th * tw * tc); /* the fill: 0 in every channel */
		fs->dh = g.rh;
		fs->dw = g.rw;
		fs->dst = tile + ((size_t)g.pad_y * tw + g.pad_x) * tc;
	} else {
		y0 = g.crop_y;
		x0 = g.crop_x;
		fs->dh = th;
		fs->dw = tw;
		fs->dst = tile;
	}
	if (make_taps(&fs->ty, ih, g.rh, y0, fs->dh) < 0 ||
	    make_taps(&fs->tx, iw, g.rw, x0, fs->dw) < 0)
		goto oom;
	fs->first = malloc((size_t)fs->dh * sizeof *fs->first);
	fs->last = malloc((size_t)fs->dh * sizeof *fs->last);
	if (!fs->first || !fs->last)
		goto oom;
	for (uint32_t oy = 0; oy < fs->dh; oy++) {
		/* taps with weight; rows are monotonic in oy (area and bilinear alike) */
		uint32_t a = UINT32_MAX, b = 0;
		for (uint32_t k = 0; k < fs->ty.K; k++) {
			size_t t = (size_t)oy * fs->ty.K + k;
			if (fs->ty.wt[t] == 0.0f)
				continue;
			a = fs->ty.idx[t] < a ? fs->ty.idx[t] : a;
			b = fs->ty.idx[t] > b ? fs->ty.idx[t] : b;
		}
		if (a ==
		    UINT32_MAX) /* no weight at all: an all-0 row, finished with its neighbour */
			a = b = oy ? fs->last[oy - 1] : 0;
		if (oy && a < fs->first[oy - 1])
			a = fs->first[oy - 1];
		if (oy && b < fs->last[oy - 1])
			b = fs->last[oy - 1];
		fs->first[oy] = a;
		fs->last[oy] = b;
	}
	/* the most rows open at once: those a row's last input row still reaches */
	for (uint32_t oy = 0, j = 0; oy < fs->dh; oy++) {
		if (j < oy)
			j = oy;
		while (j < fs->dh && fs->first[j] <= fs->last[oy])
			j++;
		if (j - oy > fs->slots)
			fs->slots = j - oy;
	}
	fs->acc = malloc((size_t)fs->slots * iw * tc * sizeof *fs->acc);
	if (!fs->acc)
		goto oom;
	return 0;
oom:
	sprite_fit_stream_free(fs);
	*out = NULL;
	return -ENOMEM;
}

/* Output row oy's horizontal pass, from its accumulator into the tile. */
static void finish_row(struct sprite_fit_stream *fs, uint32_t oy)
{
	const float *row = fs->acc + (size_t)(oy % fs->slots) * fs->iw * fs->tc;
	uint8_t *d = fs->dst + (size_t)oy * fs->dstride;
	const uint32_t c = fs->tc, K = fs->tx.K;
	for (uint32_t ox = 0; ox < fs->dw; ox++) {
		for (uint32_t ch = 0; ch < c; ch++) {
			float acc = 0.0f;
			for (uint32_t k = 0; k < K; k++) {
				float wv = fs->tx.wt[(size_t)ox * K + k];
				if (wv != 0.0f)
					acc += wv *
					       row[(size_t)fs->tx.idx[(size_t)ox * K + k] * c + ch];
			}
			d[(size_t)ox * c + ch] = clamp_u8(acc);
		}
	}
}

int sprite_fit_stream_row(struct sprite_fit_stream *fs, const uint8_t *row)
{
	if (fs->y >= fs->ih)
		return -EINVAL;
	const uint32_t y = fs->y++, tc = fs->tc;
	const size_t srow = (size_t)fs->iw * tc;
	uint8_t *conv = fs->same ? fs->dst + (size_t)y * srow : fs->conv;
	if (fs->ic == tc)
		memcpy(conv, row, srow);
	else
		for (uint32_t x = 0; x < fs->iw; x++)
			convert_px(row + (size_t)x * fs->ic, fs->ic, conv + (size_t)x * tc, tc);
	if (fs->same)
		return 0;
	while (fs->hi < fs->dh && fs->first[fs->hi] <= y) {
		memset(fs->acc + (size_t)(fs->hi % fs->slots) * srow, 0, srow * sizeof *fs->acc);
		fs->hi++;
	}
	for (uint32_t oy = fs->lo; oy < fs->hi; oy++) {
		float *acc = fs->acc + (size_t)(oy % fs->slots) * srow;
		/* An area row's taps are consecutive rows from its first: look the
		 * one for y up rather than scan K of them (K is ih / th: thousands
		 * for a tall image). Only area rows have K > 2 (make_taps); bilinear
		 * and copied rows (K = 2) are scanned. */
		size_t base = (size_t)oy * fs->ty.K;
		uint32_t k0 = 0, k1 = fs->ty.K;
		if (fs->ty.K > 2) {
			uint32_t d = y - fs->ty.idx[base]; /* wraps when y is before */
			k0 = d < fs->ty.K ? d : 0;
			k1 = d < fs->ty.K ? d + 1 : 0;
		}
		for (uint32_t k = k0; k < k1; k++) {
			size_t t = base + k;
			float wv = fs->ty.wt[t];
			if (wv == 0.0f || fs->ty.idx[t] != y)
				continue;
			for (size_t i = 0; i < srow; i++)
				acc[i] += wv * conv[i];
		}
	}
	while (fs->lo < fs->hi && fs->last[fs->lo] <= y)
		finish_row(fs, fs->lo++);
	return 0;
}

int sprite_fit_stream_end(struct sprite_fit_stream *fs)
{
	int r = fs->y == fs->ih ? 0 : -EINVAL;
	/* (rows that never opened: only when the image ended early, an error above) */
	while (r == 0 && fs->lo < fs->hi)
		finish_row(fs, fs->lo++);
	sprite_fit_stream_free(fs);
	return r;
}

size_t sprite_fit_stream_bytes(const struct sprite_fit_stream *fs)
{
	return sizeof *fs + (size_t)fs->iw * fs->tc +
	       (size_t)fs->slots * fs->iw * fs->tc * sizeof(float) +
	       ((size_t)fs->ty.K * fs->dh + (size_t)fs->tx.K * fs->dw) * 8 + (size_t)fs->dh * 8;
}

int sprite_image_fit(const struct sprite_image *im, uint32_t h, uint32_t w, uint32_t c,
		     enum sprite_fit fit, uint8_t *tile)
{
	if (!im || !im->px)
		return -EINVAL;
	struct sprite_fit_stream *fs;
	int r = sprite_fit_stream_begin(&fs, im->h, im->w, im->c, h, w, c, fit, tile);
	if (r < 0)
		return r;
	const size_t stride = (size_t)im->w * im->c;
	for (uint32_t y = 0; y < im->h && r == 0; y++)
		r = sprite_fit_stream_row(fs, im->px + y * stride);
	if (r < 0) {
		sprite_fit_stream_free(fs);
		return r;
	}
	return sprite_fit_stream_end(fs);
}
