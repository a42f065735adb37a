/*
 * tiff.c - decode TIFF images and write them (for sprite_image_decode and
 * sprite_tiff_write, image.h).
 *
 * Packing a data set of many small files is dominated by per-file overhead,
 * so the TIFF path is shaped for it: libtiff reads from the caller's memory
 * through a client that "maps" the buffer (no copies, no file handle), and
 * the common layouts (8/16-bit gray, RGB, gray+alpha, RGBA, 8-bit palette,
 * contiguous strips) are decoded strip by strip, straight into the output
 * when no conversion is needed. Anything else (tiles, planar, bilevel, YCbCr,
 * odd orientations) goes through TIFFReadRGBAImageOriented, which is slower
 * but handles every photometric libtiff knows.
 *
 * libtiff reports problems through handlers that print to stderr by default;
 * library code must not print, so each open gets handlers (libtiff >= 4.5
 * TIFFOpenOptions) that capture the first message into a per-call buffer, and
 * the process-wide handlers (used by libtiff before a TIFF* exists) are
 * replaced once by ones that write to a thread-local buffer.
 *
 * Every dimension read from a file is checked against SPRITE_IMAGE_MAX_SIDE
 * and SPRITE_IMAGE_MAX_PIXELS before anything is allocated.
 */
#include "common/image.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tiffio.h>

#include "common/codec.h"
#include "common/rows.h"
#include "common/safe_open.h"
#include "common/store.h"

/* ---- TIFF ------------------------------------------------------------ */

struct tiff_mem {
	const uint8_t *p;
	toff_t len, pos;
};

struct tiff_msg {
	char text[160];
	int set;
	char warn[160]; /* first warning that means lost data */
	int warned;
};

static _Thread_local struct tiff_msg tiff_global_msg;

static tmsize_t tm_read(thandle_t h, void *buf, tmsize_t n)
{
	struct tiff_mem *m = h;
	if (n < 0)
		return -1;
	toff_t left = m->pos < m->len ? m->len - m->pos : 0;
	if ((toff_t)n > left)
		n = (tmsize_t)left;
	memcpy(buf, m->p + m->pos, (size_t)n);
	m->pos += (toff_t)n;
	return n;
}

static tmsize_t tm_write(thandle_t h, void *buf, tmsize_t n)
{
	return -1; /* read-only */
}

static toff_t tm_seek(thandle_t h, toff_t off, int whence)
{
	struct tiff_mem *m = h;
	toff_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? m->pos : m->len;
	if (off > UINT64_MAX - base)
		return (toff_t)-1;
	m->pos = base + off;
	return m->pos;
}

static int tm_close(thandle_t h)
{
	return 0;
}

static toff_t tm_size(thandle_t h)
{
	return ((struct tiff_mem *)h)->len;
}

static int tm_map(thandle_t h, void **base, toff_t *size)
{
	struct tiff_mem *m = h;
	*base = (void *)m->p;
	*size = m->len;
	return 1;
}

static void tm_unmap(thandle_t h, void *base, toff_t size)
{
}

static int tiff_capture(TIFF *t, void *user, const char *module, const char *fmt, va_list ap)
{
	struct tiff_msg *m = user;
	if (m && !m->set) {
		vsnprintf(m->text, sizeof m->text, fmt, ap);
		m->set = 1;
	}
	return 1; /* handled: do not call the global handler */
}

static int tiff_warning(TIFF *t, void *user, const char *module, const char *fmt, va_list ap)
{
	struct tiff_msg *m = user;
	if (!m || m->warned)
		return 1;
	/* Most warnings are harmless (unknown tags); these mean data is gone,
	 * e.g. a file cut in its colour map, which libtiff would decode as gray. */
	vsnprintf(m->warn, sizeof m->warn, fmt, ap);
	if (strstr(m->warn, "IO error") || strstr(m->warn, "lack of data") ||
	    strstr(m->warn, "Premature"))
		m->warned = 1;
	return 1;
}

static void tiff_global_error(const char *module, const char *fmt, va_list ap)
{
	if (!tiff_global_msg.set) {
		vsnprintf(tiff_global_msg.text, sizeof tiff_global_msg.text, fmt, ap);
		tiff_global_msg.set = 1;
	}
}

static pthread_once_t tiff_once = PTHREAD_ONCE_INIT;

static void tiff_init_handlers(void)
{
	TIFFSetErrorHandler(tiff_global_error);
	TIFFSetWarningHandler(NULL);
}

static TIFFOpenOptions *tiff_options(struct tiff_msg *msg)
{
	pthread_once(&tiff_once, tiff_init_handlers);
	msg->set = 0;
	msg->text[0] = 0;
	msg->warned = 0;
	msg->warn[0] = 0;
	tiff_global_msg.set = 0;
	tiff_global_msg.text[0] = 0;
	TIFFOpenOptions *o = TIFFOpenOptionsAlloc();
	if (!o)
		return NULL;
	TIFFOpenOptionsSetErrorHandlerExtR(o, tiff_capture, msg);
	TIFFOpenOptionsSetWarningHandlerExtR(o, tiff_warning, msg);
	TIFFOpenOptionsSetMaxSingleMemAlloc(o, (tmsize_t)1 << 30);
	return o;
}

static const char *tiff_reason(const struct tiff_msg *msg, const char *fallback)
{
	if (msg->set)
		return msg->text;
	if (tiff_global_msg.set)
		return tiff_global_msg.text;
	return fallback;
}

/* How the fast path turns one raw sample row into output pixels. */
struct tiff_layout {
	uint32_t w, h;
	uint16_t bps, spp, photo;
	int alpha;     /* index of the alpha sample, or -1 */
	int unassoc;   /* alpha is unassociated (colours not premultiplied) */
	uint32_t bg;   /* what alpha becomes (SPRITE_BG_*) */
	uint32_t cout; /* 1 or 3 */
	int as8;       /* 16-bit gray, no alpha, every sample <= 255: taken as it is */
	uint8_t cmap[3][256];
};

/* 16-bit gray without alpha: the layouts whose as8 is found before conversion (codec.h). */
static int tiff_gray16(const struct tiff_layout *L)
{
	return L->bps == 16 && L->cout == 1 && L->alpha < 0 && L->photo != PHOTOMETRIC_PALETTE;
}

/*
 * A colour value with alpha a by the background: unassociated colours are
 * as stored or composited; associated (premultiplied) ones are as stored
 * (PIL's convert of "RGBa" keeps them) or get the background's share added.
 */
static inline uint8_t assoc_over(unsigned v, unsigned a, uint32_t bg, unsigned k)
{
	if ((bg >> 24) != 1)
		return (uint8_t)v;
	unsigned o = v + sprite_over_bg(0, a, bg, k);
	return (uint8_t)(o > 255 ? 255 : o);
}

static inline uint8_t over(const struct tiff_layout *L, unsigned v, unsigned a, unsigned k)
{
	return L->unassoc ? sprite_over_bg(v, a, L->bg, k) : assoc_over(v, a, L->bg, k);
}

/* Sample i of a row in 8 bits: a 16-bit one by the 16-bit rule (codec.h): high byte, or as8. */
static inline unsigned sample(const struct tiff_layout *L, const uint8_t *row, uint32_t i)
{
	if (L->bps == 8)
		return row[i];
	uint16_t v;
	memcpy(&v, row + 2 * (size_t)i, 2);
	return L->as8 ? v : v >> 8u;
}

static void tiff_convert_row(const struct tiff_layout *L, const uint8_t *row, uint8_t *out)
{
	uint32_t spp = L->spp;
	for (uint32_t x = 0; x < L->w; x++) {
		uint32_t base = x * spp;
		if (L->photo == PHOTOMETRIC_PALETTE) {
			unsigned i = row[x];
			out[3 * x] = L->cmap[0][i];
			out[3 * x + 1] = L->cmap[1][i];
			out[3 * x + 2] = L->cmap[2][i];
			continue;
		}
		unsigned a = L->alpha >= 0 ? sample(L, row, base + (uint32_t)L->alpha) : 255;
		if (L->cout == 1) {
			unsigned g = sample(L, row, base);
			if (L->photo == PHOTOMETRIC_MINISWHITE)
				g = 255 - g;
			out[x] = over(L, g, a, 3);
		} else {
			for (uint32_t k = 0; k < 3; k++) {
				unsigned v = sample(L, row, base + k);
				out[3 * x + k] = over(L, v, a, k);
			}
		}
	}
}

/*
 * Tiles and separate planes: gather all samples into one contiguous image
 * first (rare layouts, so simplicity over speed), then convert row by row.
 */
static int tiff_gather(TIFF *t, struct tiff_layout *L, struct tiff_msg *msg, int separate,
		       const char *name, struct sprite_image *out, char *err)
{
	size_t bpsb = L->bps / 8, pix = (size_t)L->spp * bpsb;
	size_t rowbytes = (size_t)L->w * pix;
	uint32_t planes = separate ? L->spp : 1;
	size_t ppix = separate ? bpsb : pix; /* bytes per pixel within one plane */
	uint8_t *full = malloc((size_t)L->h * rowbytes), *buf = NULL;
	int r = 0;
	if (!full) {
		sprite_image_err(err, name, "out of memory for %ux%u pixels", L->h, L->w);
		return -ENOMEM;
	}
	if (TIFFIsTiled(t)) {
		uint32_t tw = 0, th = 0;
		TIFFGetField(t, TIFFTAG_TILEWIDTH, &tw);
		TIFFGetField(t, TIFFTAG_TILELENGTH, &th);
		tmsize_t ts = TIFFTileSize(t);
		if (tw == 0 || th == 0 || ts <= 0 || (uint64_t)ts < (uint64_t)tw * th * ppix) {
			sprite_image_err(err, name, "bad tile size %ux%u", tw, th);
			r = -SPRITE_ECORRUPT;
			goto done;
		}
		buf = malloc((size_t)ts);
		if (!buf) {
			sprite_image_err(err, name, "out of memory for a %ux%u tile", tw, th);
			r = -ENOMEM;
			goto done;
		}
		for (uint32_t s = 0; s < planes && r == 0; s++)
			for (uint32_t ty = 0; ty < L->h && r == 0; ty += th)
				for (uint32_t tx = 0; tx < L->w; tx += tw) {
					uint32_t ti = TIFFComputeTile(t, tx, ty, 0, (uint16_t)s);
					memset(buf, 0, (size_t)ts); /* as tiff_read_strip */
					tmsize_t got = TIFFReadEncodedTile(t, ti, buf, ts);
					if (got < 0 || got < (tmsize_t)((uint64_t)tw * th * ppix)) {
						sprite_image_err(
							err, name, "tile %u: %s", ti,
							got < 0 ? tiff_reason(msg, "read error")
								: "truncated");
						r = -SPRITE_ECORRUPT;
						break;
					}
					for (uint32_t y = 0; y < th && ty + y < L->h; y++)
						for (uint32_t x = 0; x < tw && tx + x < L->w; x++)
							memcpy(full + (size_t)(ty + y) * rowbytes +
								       (size_t)(tx + x) * pix +
								       (separate ? s * bpsb : 0),
							       buf + ((size_t)y * tw + x) * ppix,
							       ppix);
				}
	} else {
		tmsize_t sl = TIFFScanlineSize(t);
		if (sl <= 0 || (uint64_t)sl < (uint64_t)L->w * ppix) {
			sprite_image_err(err, name, "inconsistent scanline size");
			r = -SPRITE_ECORRUPT;
			goto done;
		}
		buf = malloc((size_t)sl);
		if (!buf) {
			sprite_image_err(err, name, "out of memory");
			r = -ENOMEM;
			goto done;
		}
		for (uint32_t s = 0; s < planes && r == 0; s++)
			for (uint32_t y = 0; y < L->h; y++) {
				memset(buf, 0, (size_t)sl); /* as tiff_read_strip */
				if (TIFFReadScanline(t, buf, y, (uint16_t)s) < 0) {
					sprite_image_err(err, name, "plane %u row %u: %s", s, y,
							 tiff_reason(msg, "read error"));
					r = -SPRITE_ECORRUPT;
					break;
				}
				for (uint32_t x = 0; x < L->w; x++)
					memcpy(full + (size_t)y * rowbytes + (size_t)x * pix +
						       s * bpsb,
					       buf + (size_t)x * bpsb, bpsb);
			}
	}
	if (r == 0 && tiff_gray16(L))
		L->as8 = !sprite_16_over8(full, (size_t)L->h * L->w, 1, 0);
	if (r == 0)
		r = sprite_image_alloc(out, L->h, L->w, L->cout, name, err);
	if (r == 0)
		for (uint32_t y = 0; y < L->h; y++)
			tiff_convert_row(L, full + (size_t)y * rowbytes,
					 out->px + (size_t)y * L->w * L->cout);
done:
	free(buf);
	free(full);
	return r;
}

/*
 * The fast path's layouts: 8 or 16 bits, top-left, gray, RGB or palette,
 * with at most one extra sample as alpha. Fills L (cout, alpha, cmap) and
 * *gather (tiles or separate planes: read whole by tiff_gather); 1 when the
 * layout is not one of them.
 */
static int tiff_fast_layout(TIFF *t, struct tiff_layout *L, int *gather)
{
	uint16_t planar = PLANARCONFIG_CONTIG, orient = ORIENTATION_TOPLEFT;
	uint16_t nextra = 0, *extra = NULL;

	TIFFGetFieldDefaulted(t, TIFFTAG_PLANARCONFIG, &planar);
	TIFFGetFieldDefaulted(t, TIFFTAG_ORIENTATION, &orient);
	TIFFGetFieldDefaulted(t, TIFFTAG_EXTRASAMPLES, &nextra, &extra);
	if (orient != ORIENTATION_TOPLEFT)
		return 1;
	if (L->bps != 8 && L->bps != 16)
		return 1;

	L->alpha = -1;
	L->unassoc = 0;
	switch (L->photo) {
	case PHOTOMETRIC_MINISBLACK:
	case PHOTOMETRIC_MINISWHITE:
		L->cout = 1;
		if (L->spp != 1 && !(L->spp == 2 && nextra == 1))
			return 1;
		break;
	case PHOTOMETRIC_RGB:
		L->cout = 3;
		if (L->spp != 3 && !(L->spp == 4 && nextra == 1))
			return 1;
		break;
	case PHOTOMETRIC_PALETTE: {
		uint16_t *r, *g, *b;
		if (L->spp != 1 || L->bps != 8 || !TIFFGetField(t, TIFFTAG_COLORMAP, &r, &g, &b))
			return 1;
		L->cout = 3;
		/* Old writers store 8-bit colour maps; libtiff guesses the same way. */
		int eight = 1;
		for (int i = 0; i < 256; i++)
			if (r[i] > 255 || g[i] > 255 || b[i] > 255)
				eight = 0;
		for (int i = 0; i < 256; i++) {
			L->cmap[0][i] = (uint8_t)(eight ? r[i] : r[i] >> 8);
			L->cmap[1][i] = (uint8_t)(eight ? g[i] : g[i] >> 8);
			L->cmap[2][i] = (uint8_t)(eight ? b[i] : b[i] >> 8);
		}
		break;
	}
	default:
		return 1;
	}
	if (nextra == 1 && L->spp > 1) {
		L->alpha = (int)L->spp - 1;
		/* Unspecified extra samples are taken as associated, as libtiff does. */
		L->unassoc = extra && extra[0] == EXTRASAMPLE_UNASSALPHA;
	}
	*gather = TIFFIsTiled(t) ? 1 : planar == PLANARCONFIG_SEPARATE && L->spp > 1 ? 2 : 0;
	return 0;
}

/* Contiguous strips: their scanline size and rows per strip, checked; 0 or -SPRITE_ECORRUPT. */
static int tiff_strips(TIFF *t, const struct tiff_layout *L, const char *name, tmsize_t *rowsize,
		       uint32_t *rps_out, char *err)
{
	tmsize_t rs = TIFFScanlineSize(t);
	uint64_t want_row = (uint64_t)L->w * L->spp * (L->bps / 8);
	if (rs <= 0 || (uint64_t)rs != want_row) {
		sprite_image_err(err, name, "inconsistent scanline size");
		return -SPRITE_ECORRUPT;
	}
	uint32_t rps = L->h;
	TIFFGetFieldDefaulted(t, TIFFTAG_ROWSPERSTRIP, &rps);
	if (rps == 0 || rps > L->h)
		rps = L->h;
	uint32_t nstrips = TIFFNumberOfStrips(t);
	if ((uint64_t)nstrips * rps < L->h) {
		sprite_image_err(err, name, "%u strips of %u rows cannot hold %u rows", nstrips,
				 rps, L->h);
		return -SPRITE_ECORRUPT;
	}
	*rowsize = rs;
	*rps_out = rps;
	return 0;
}

/* Strip s of `want` bytes into dst, whole: 0, or -SPRITE_ECORRUPT with err set. */
static int tiff_read_strip(TIFF *t, uint32_t s, uint8_t *dst, tmsize_t want, struct tiff_msg *msg,
			   const char *name, char *err)
{
	/* a strip of no bytes is data lost, not a strip of zeros */
	if (TIFFGetStrileByteCount(t, s) == 0) {
		sprite_image_err(err, name, "strip %u: Invalid strip byte count 0, strip %u", s, s);
		return -SPRITE_ECORRUPT;
	}
	/* libtiff can say a damaged deflate strip is whole and leave its end
	 * unwritten: zeros there, not whatever the buffer held, so that both
	 * decoders give the same tile */
	memset(dst, 0, (size_t)want);
	tmsize_t got = TIFFReadEncodedStrip(t, s, dst, want);
	if (got < 0) {
		sprite_image_err(err, name, "strip %u: %s", s, tiff_reason(msg, "read error"));
		return -SPRITE_ECORRUPT;
	}
	if (got < want) {
		sprite_image_err(err, name, "truncated strip %u (%lld of %lld bytes)", s,
				 (long long)got, (long long)want);
		return -SPRITE_ECORRUPT;
	}
	return 0;
}

/*
 * L->as8 of a 16-bit gray image in contiguous strips, read into buf (a
 * strip's bytes) up to the first sample over 255, before the strips are
 * read again to be converted; both decoders call it, so they agree. 0, or
 * tiff_read_strip's error.
 */
static int tiff_strips_as8(TIFF *t, struct tiff_layout *L, struct tiff_msg *msg, tmsize_t rowsize,
			   uint32_t rps, uint8_t *buf, const char *name, char *err)
{
	L->as8 = 1;
	for (uint32_t s = 0, y = 0; L->as8 && y < L->h; s++, y += rps) {
		uint32_t rows = L->h - y < rps ? L->h - y : rps;
		int r = tiff_read_strip(t, s, buf, (tmsize_t)rows * rowsize, msg, name, err);
		if (r < 0)
			return r;
		L->as8 = !sprite_16_over8(buf, (size_t)rows * L->w, 1, 0);
	}
	return 0;
}

/*
 * Fast path: contiguous strips, 8 or 16 bits. Returns 1 when the layout is
 * not one it handles (the caller falls back), 0 on success, < 0 on error.
 */
static int tiff_fast(TIFF *t, struct tiff_layout *L, struct tiff_msg *msg, const char *name,
		     struct sprite_image *out, char *err)
{
	int gather;
	if (tiff_fast_layout(t, L, &gather) == 1)
		return 1;
	if (gather)
		return tiff_gather(t, L, msg, gather == 2, name, out, err);
	tmsize_t rowsize;
	uint32_t rps;
	int r = tiff_strips(t, L, name, &rowsize, &rps, err);
	if (r < 0)
		return r;
	r = sprite_image_alloc(out, L->h, L->w, L->cout, name, err);
	if (r < 0)
		return r;
	/* Samples that are already output bytes are decoded in place. */
	int direct = L->bps == 8 && L->photo == PHOTOMETRIC_MINISBLACK && L->spp == L->cout &&
		     L->photo != PHOTOMETRIC_PALETTE;
	if (L->photo == PHOTOMETRIC_RGB && L->bps == 8 && L->spp == 3)
		direct = 1;
	uint8_t *buf = NULL;
	if (!direct) {
		buf = malloc((size_t)rowsize * rps);
		if (!buf) {
			sprite_image_free(out);
			sprite_image_err(err, name, "out of memory for a strip of %u rows", rps);
			return -ENOMEM;
		}
	}
	if (tiff_gray16(L))
		r = tiff_strips_as8(t, L, msg, rowsize, rps, buf, name, err);
	for (uint32_t s = 0, y = 0; r == 0 && y < L->h; s++, y += rps) {
		uint32_t rows = L->h - y < rps ? L->h - y : rps;
		uint8_t *dst = direct ? out->px + (size_t)y * rowsize : buf;
		r = tiff_read_strip(t, s, dst, (tmsize_t)rows * rowsize, msg, name, err);
		if (r < 0 || direct)
			continue;
		for (uint32_t k = 0; k < rows; k++)
			tiff_convert_row(L, buf + (size_t)k * rowsize,
					 out->px + (size_t)(y + k) * L->w * L->cout);
	}
	free(buf);
	if (r < 0)
		sprite_image_free(out);
	return r;
}

/* A premultiplied value of TIFFReadRGBAImage's raster by the background. */
static uint8_t rgba_value(const struct tiff_layout *L, unsigned v, unsigned a, unsigned k)
{
	if ((L->bg >> 24) == 1 || !L->unassoc || a == 255)
		return assoc_over(v, a, L->bg, k);
	if (a == 0)
		return 0;
	unsigned o = (v * 255 + a / 2) / a;
	return (uint8_t)(o > 255 ? 255 : o);
}

static int tiff_rgba(TIFF *t, const struct tiff_layout *L, struct tiff_msg *msg, const char *name,
		     struct sprite_image *out, char *err)
{
	char emsg[1024] = "";
	if (!TIFFRGBAImageOK(t, emsg)) {
		sprite_image_err(err, name, "unsupported TIFF: %s", emsg);
		return -ENOTSUP;
	}
	uint32_t *raster = malloc((size_t)L->w * L->h * sizeof *raster);
	if (!raster) {
		sprite_image_err(err, name, "out of memory for %ux%u pixels", L->h, L->w);
		return -ENOMEM;
	}
	if (!TIFFReadRGBAImageOriented(t, L->w, L->h, raster, ORIENTATION_TOPLEFT, 1)) {
		sprite_image_err(err, name, "%s", tiff_reason(msg, "decode error"));
		free(raster);
		return -SPRITE_ECORRUPT;
	}
	/*
	 * libtiff premultiplies unassociated alpha: as stored, the colours are
	 * divided back (exact where alpha is 255, within a level or so where
	 * it is small, 0 where it is 0); on a colour, its share is added.
	 */
	uint32_t c =
		(L->photo == PHOTOMETRIC_MINISBLACK || L->photo == PHOTOMETRIC_MINISWHITE) ? 1 : 3;
	int r = sprite_image_alloc(out, L->h, L->w, c, name, err);
	if (r < 0) {
		free(raster);
		return r;
	}
	size_t n = (size_t)L->w * L->h;
	for (size_t i = 0; i < n; i++) {
		uint32_t p = raster[i];
		unsigned a = TIFFGetA(p), v[3] = {TIFFGetR(p), TIFFGetG(p), TIFFGetB(p)};
		for (uint32_t k = 0; k < c; k++)
			out->px[c * i + k] = rgba_value(L, v[k], a, c == 1 ? 3 : k);
	}
	free(raster);
	return 0;
}

/* Size, samples and photometric of the first directory into L, checked. */
static int tiff_layout_read(TIFF *t, struct tiff_layout *L, const char *name, char *err)
{
	uint32_t w = 0, h = 0;
	TIFFGetField(t, TIFFTAG_IMAGEWIDTH, &w);
	TIFFGetField(t, TIFFTAG_IMAGELENGTH, &h);
	int r = sprite_image_check_dims(h, w, name, err);
	if (r < 0)
		return r;
	L->w = w;
	L->h = h;
	L->bps = 1;
	L->spp = 1;
	TIFFGetFieldDefaulted(t, TIFFTAG_BITSPERSAMPLE, &L->bps);
	TIFFGetFieldDefaulted(t, TIFFTAG_SAMPLESPERPIXEL, &L->spp);
	if (!TIFFGetField(t, TIFFTAG_PHOTOMETRIC, &L->photo))
		L->photo = L->spp >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK;
	if (L->spp == 0 || L->spp > 16) {
		sprite_image_err(err, name, "bad samples per pixel %u", L->spp);
		return -SPRITE_ECORRUPT;
	}
	return 0;
}

/* ---- TIFF by strips from a descriptor ------------------------------------ */

/* libtiff's I/O on a descriptor by pread: only the strips asked for are read. */
struct tiff_fd {
	int fd;
	toff_t size, pos;
	uint64_t bytes; /* read */
};

static tmsize_t tf_read(thandle_t h, void *buf, tmsize_t n)
{
	struct tiff_fd *f = h;
	if (n < 0 || f->pos >= f->size)
		return n < 0 ? -1 : 0;
	tmsize_t got = 0;
	while (got < n) {
		ssize_t k = pread(f->fd, (uint8_t *)buf + got, (size_t)(n - got), (off_t)f->pos);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += k;
		f->pos += (toff_t)k;
	}
	f->bytes += (uint64_t)got;
	return got;
}

static tmsize_t tf_write(thandle_t h, void *buf, tmsize_t n)
{
	(void)h;
	(void)buf;
	(void)n;
	return -1;
}

static toff_t tf_seek(thandle_t h, toff_t off, int whence)
{
	struct tiff_fd *f = h;
	toff_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? f->pos : f->size;
	f->pos = base + off;
	return f->pos;
}

static int tf_close(thandle_t h)
{
	(void)h;
	return 0;
}

static toff_t tf_size(thandle_t h)
{
	return ((struct tiff_fd *)h)->size;
}

static int tf_map(thandle_t h, void **base, toff_t *size)
{
	(void)h;
	(void)base;
	(void)size;
	return 0;
}

static void tf_unmap(thandle_t h, void *base, toff_t size)
{
	(void)h;
	(void)base;
	(void)size;
}

/* The strips of t, converted row by row into a fit stream of sp's tile. */
static int tiff_strip_rows(TIFF *t, struct tiff_layout *L, struct tiff_msg *msg,
			   const struct sprite_sample_spec *sp, uint8_t *tile, char *why)
{
	tmsize_t rowsize;
	uint32_t rps;
	int r = tiff_strips(t, L, "", &rowsize, &rps, why);
	if (r < 0)
		return r;
	uint8_t *buf = malloc((size_t)rowsize * rps), *row = malloc((size_t)L->w * L->cout);
	struct sprite_fit_stream *fs = NULL;
	r = buf && row ? sprite_fit_stream_begin(&fs, L->h, L->w, L->cout, sp->th, sp->tw, sp->tc,
						 sp->fit, tile)
		       : -ENOMEM;
	if (r == 0 && tiff_gray16(L)) {
		struct tiff_fd *f = TIFFClientdata(t);
		uint64_t before = f->bytes; /* the strips read again are counted once */
		r = tiff_strips_as8(t, L, msg, rowsize, rps, buf, "", why);
		f->bytes = before;
	}
	for (uint32_t s = 0, y = 0; r == 0 && y < L->h; s++, y += rps) {
		uint32_t rows = L->h - y < rps ? L->h - y : rps;
		/* as the whole-file path says it */
		r = tiff_read_strip(t, s, buf, (tmsize_t)rows * rowsize, msg, "", why);
		for (uint32_t k = 0; r == 0 && k < rows; k++) {
			tiff_convert_row(L, buf + (size_t)k * rowsize, row);
			r = sprite_fit_stream_row(fs, row);
		}
	}
	if (r == 0) {
		r = sprite_fit_stream_end(fs);
		fs = NULL;
	}
	sprite_fit_stream_free(fs);
	free(buf);
	free(row);
	if (r == -ENOMEM)
		snprintf(why, SPRITE_ERR_MAX, "out of memory for a strip of %u rows", rps);
	return r;
}

int sprite_tiff_rows(int fd, uint64_t size, const struct sprite_sample_spec *sp, uint8_t *tile,
		     struct sprite_sample_got *got, char *why)
{
	struct tiff_fd f = {fd, (toff_t)size, 0, 0};
	struct tiff_msg msg;
	TIFFOpenOptions *opts = tiff_options(&msg);
	if (!opts) {
		snprintf(why, SPRITE_ERR_MAX, "out of memory");
		return -ENOMEM;
	}
	/* "m": no memory map, strips read as asked; strip chopping splits a one-strip image */
	TIFF *t = TIFFClientOpenExt("", "rm", &f, tf_read, tf_write, tf_seek, tf_close, tf_size,
				    tf_map, tf_unmap, opts);
	TIFFOpenOptionsFree(opts);
	if (!t) {
		sprite_image_err(why, "", "bad TIFF: %s", tiff_reason(&msg, "cannot parse header"));
		got->bytes = f.bytes;
		return -SPRITE_ECORRUPT;
	}
	struct tiff_layout *L = calloc(1, sizeof *L);
	int r = L ? tiff_layout_read(t, L, "", why) : -ENOMEM, gather = 0;
	if (r == 0) {
		L->bg = sp->background;
		got->h = L->h;
		got->w = L->w;
		/* other layouts (tiles, planes, orientations, odd depths): read whole */
		r = tiff_fast_layout(t, L, &gather) == 1 || gather ? -EAGAIN : 0;
	}
	if (r == 0)
		r = tiff_strip_rows(t, L, &msg, sp, tile, why);
	if (r == 0 && msg.warned) {
		sprite_image_err(why, "", "damaged TIFF: %s", msg.warn);
		r = -SPRITE_ECORRUPT;
	}
	if (r == -ENOMEM && !why[0])
		snprintf(why, SPRITE_ERR_MAX, "out of memory");
	free(L);
	TIFFClose(t);
	got->bytes = f.bytes;
	return r;
}

int sprite_tiff_decode(const void *data, size_t len, const char *name, uint32_t bg,
		       struct sprite_image *out, char *err)
{
	struct tiff_mem mem = {data, len, 0};
	struct tiff_msg msg;
	TIFFOpenOptions *opts = tiff_options(&msg);
	if (!opts) {
		sprite_image_err(err, name, "out of memory");
		return -ENOMEM;
	}
	/* "m": not mapped, so libtiff reads damaged strips exactly as it does from
	 * a descriptor (sprite_tiff_rows) and both paths agree on every file */
	TIFF *t = TIFFClientOpenExt(name, "rm", &mem, tm_read, tm_write, tm_seek, tm_close, tm_size,
				    tm_map, tm_unmap, opts);
	TIFFOpenOptionsFree(opts);
	if (!t) {
		sprite_image_err(err, name, "bad TIFF: %s",
				 tiff_reason(&msg, "cannot parse header"));
		return -SPRITE_ECORRUPT;
	}
	struct tiff_layout *L = calloc(1, sizeof *L);
	int r = -ENOMEM;
	if (!L) {
		sprite_image_err(err, name, "out of memory");
		goto done;
	}
	r = tiff_layout_read(t, L, name, err);
	if (r < 0)
		goto done;
	L->bg = bg;
	r = tiff_fast(t, L, &msg, name, out, err);
	if (r == 1)
		r = tiff_rgba(t, L, &msg, name, out, err);
	if (r == 0 && msg.warned) {
		sprite_image_free(out);
		sprite_image_err(err, name, "damaged TIFF: %s", msg.warn);
		r = -SPRITE_ECORRUPT;
	}
done:
	free(L);
	TIFFClose(t);
	return r;
}

/* ---- writer ------------------------------------------------------------ */

int sprite_tiff_write(const char *path, const uint8_t *px, uint32_t h, uint32_t w, uint32_t c,
		      int compression, char *err)
{
	struct sprite_outfile o;
	int r = sprite_outfile_open(&o, path, 0644, SPRITE_OUT_NOSYNC, err);
	if (r < 0)
		return r;
	r = sprite_tiff_write_fd(o.fd, path, px, h, w, c, compression, err);
	if (r < 0) {
		sprite_outfile_abort(&o);
		return r;
	}
	return sprite_outfile_commit(&o, err);
}

int sprite_tiff_write_fd(int fd, const char *path, const uint8_t *px, uint32_t h, uint32_t w,
			 uint32_t c, int compression, char *err)
{
	if (!px || h == 0 || w == 0 || (c != 1 && c != 3 && c != 4) ||
	    (uint64_t)h * w > SPRITE_IMAGE_MAX_PIXELS) {
		sprite_image_err(err, path, "bad image shape %ux%ux%u", h, w, c);
		return -EINVAL;
	}
	if (!TIFFIsCODECConfigured((uint16_t)compression)) {
		sprite_image_err(err, path, "TIFF compression %d not available", compression);
		return -ENOTSUP;
	}
	struct tiff_msg msg;
	TIFFOpenOptions *opts = tiff_options(&msg);
	if (!opts) {
		sprite_image_err(err, path, "out of memory");
		return -ENOMEM;
	}
	int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0); /* TIFFClose closes it */
	TIFF *t = dfd < 0 ? NULL : TIFFFdOpenExt(dfd, path, "w", opts);
	TIFFOpenOptionsFree(opts);
	if (!t && dfd >= 0)
		close(dfd);
	if (!t) {
		sprite_image_err(err, path, "cannot create: %s",
				 tiff_reason(&msg, strerror(errno)));
		return -EIO;
	}
	size_t rowsize = (size_t)w * c;
	uint32_t rps = rowsize >= 65536 ? 1 : (uint32_t)(65536 / rowsize);
	if (rps > h)
		rps = h;
	TIFFSetField(t, TIFFTAG_IMAGEWIDTH, w);
	TIFFSetField(t, TIFFTAG_IMAGELENGTH, h);
	TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 8);
	TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, c);
	TIFFSetField(t, TIFFTAG_PHOTOMETRIC, c == 1 ? PHOTOMETRIC_MINISBLACK : PHOTOMETRIC_RGB);
	if (c == 4) {
		uint16_t ex = EXTRASAMPLE_UNASSALPHA;
		TIFFSetField(t, TIFFTAG_EXTRASAMPLES, 1, &ex);
	}
	TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
	TIFFSetField(t, TIFFTAG_COMPRESSION, compression);
	TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, rps);
	int r = 0;
	for (uint32_t y = 0, s = 0; y < h; y += rps, s++) {
		uint32_t rows = h - y < rps ? h - y : rps;
		if (TIFFWriteEncodedStrip(t, s, (void *)(px + (size_t)y * rowsize),
					  (tmsize_t)(rows * rowsize)) < 0) {
			sprite_image_err(err, path, "write error: %s", tiff_reason(&msg, "strip"));
			r = -EIO;
			break;
		}
	}
	if (r == 0 && !TIFFWriteDirectory(t)) {
		sprite_image_err(err, path, "write error: %s", tiff_reason(&msg, "directory"));
		r = -EIO;
	}
	TIFFClose(t);
	return r;
}
