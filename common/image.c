/*
 * image.c - decode TIFF / PNG / JPEG / IDX, fit images to tiles, write TIFF,
 * PNG and PNM.
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
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <png.h>
#include <tiffio.h>
#include <turbojpeg.h>
#include <zlib.h>

#include "common/store.h"
#include "common/util.h"

/* An encoded file larger than this is refused before it is read. */
#define IMAGE_MAX_FILE (1ull << 30)

static void seterr(char *err, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void seterr(char *err, const char *name, const char *fmt, ...)
{
	if (!err)
		return;
	char msg[SPRITE_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* The name as it shows (sprite_escape); only its last bytes can fit. */
	char shown[4 * SPRITE_ERR_MAX + 4];
	size_t nl = name ? strlen(name) : 0;
	if (nl) {
		name = sprite_escape(nl > SPRITE_ERR_MAX ? name + nl - SPRITE_ERR_MAX : name, shown,
				     sizeof shown);
		nl = strlen(name);
	}
	size_t ml = strlen(msg), at = 0;
	if (nl) {
		/* Keep the reason whole; shorten the name from the left. */
		size_t room = SPRITE_ERR_MAX - 1 > ml + 2 ? SPRITE_ERR_MAX - 1 - ml - 2 : 0;
		if (nl > room) {
			size_t keep = room > 3 ? room - 3 : 0;
			memcpy(err, "...", room > 3 ? 3 : 0);
			at = room > 3 ? 3 : 0;
			name += nl - keep;
			nl = keep;
			while (nl && (*name & 0xc0) == 0x80) { /* not inside a character */
				name++;
				nl--;
			}
		}
		memcpy(err + at, name, nl);
		at += nl;
		memcpy(err + at, ": ", 2);
		at += 2;
	}
	if (ml > SPRITE_ERR_MAX - 1 - at)
		ml = SPRITE_ERR_MAX - 1 - at;
	memcpy(err + at, msg, ml);
	err[at + ml] = 0;
}

void sprite_image_free(struct sprite_image *im)
{
	if (!im)
		return;
	free(im->px);
	im->px = NULL;
}

static int check_dims(uint64_t h, uint64_t w, const char *name, char *err)
{
	if (h == 0 || w == 0) {
		seterr(err, name, "image has no pixels (%llux%llu)", (unsigned long long)h,
		       (unsigned long long)w);
		return -SPRITE_ECORRUPT;
	}
	if (h > SPRITE_IMAGE_MAX_SIDE || w > SPRITE_IMAGE_MAX_SIDE ||
	    h * w > SPRITE_IMAGE_MAX_PIXELS) {
		seterr(err, name, "image too large (%llux%llu)", (unsigned long long)h,
		       (unsigned long long)w);
		return -SPRITE_ECORRUPT;
	}
	return 0;
}

static int alloc_image(struct sprite_image *out, uint32_t h, uint32_t w, uint32_t c,
		       const char *name, char *err)
{
	out->h = h;
	out->w = w;
	out->c = c;
	out->px = malloc((size_t)h * w * c);
	if (!out->px) {
		seterr(err, name, "out of memory for %ux%ux%u pixels", h, w, c);
		return -ENOMEM;
	}
	return 0;
}

/* Composite a colour value on black with 8-bit alpha, rounded. */
static inline uint8_t over_black(unsigned v, unsigned a)
{
	return (uint8_t)((v * a + 127) / 255);
}

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
	uint32_t cout; /* 1 or 3 */
	uint8_t cmap[3][256];
};

static inline unsigned sample(const uint8_t *row, uint32_t i, uint16_t bps)
{
	if (bps == 8)
		return row[i];
	uint16_t v;
	memcpy(&v, row + 2 * (size_t)i, 2);
	return v >> 8;
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
		unsigned a = L->alpha >= 0 ? sample(row, base + (uint32_t)L->alpha, L->bps) : 255;
		if (L->cout == 1) {
			unsigned g = sample(row, base, L->bps);
			if (L->photo == PHOTOMETRIC_MINISWHITE)
				g = 255 - g;
			out[x] = L->unassoc ? over_black(g, a) : (uint8_t)g;
		} else {
			for (uint32_t k = 0; k < 3; k++) {
				unsigned v = sample(row, base + k, L->bps);
				out[3 * x + k] = L->unassoc ? over_black(v, a) : (uint8_t)v;
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
		seterr(err, name, "out of memory for %ux%u pixels", L->h, L->w);
		return -ENOMEM;
	}
	if (TIFFIsTiled(t)) {
		uint32_t tw = 0, th = 0;
		TIFFGetField(t, TIFFTAG_TILEWIDTH, &tw);
		TIFFGetField(t, TIFFTAG_TILELENGTH, &th);
		tmsize_t ts = TIFFTileSize(t);
		if (tw == 0 || th == 0 || ts <= 0 || (uint64_t)ts < (uint64_t)tw * th * ppix) {
			seterr(err, name, "bad tile size %ux%u", tw, th);
			r = -SPRITE_ECORRUPT;
			goto done;
		}
		buf = malloc((size_t)ts);
		if (!buf) {
			seterr(err, name, "out of memory for a %ux%u tile", tw, th);
			r = -ENOMEM;
			goto done;
		}
		for (uint32_t s = 0; s < planes && r == 0; s++)
			for (uint32_t ty = 0; ty < L->h && r == 0; ty += th)
				for (uint32_t tx = 0; tx < L->w; tx += tw) {
					uint32_t ti = TIFFComputeTile(t, tx, ty, 0, (uint16_t)s);
					tmsize_t got = TIFFReadEncodedTile(t, ti, buf, ts);
					if (got < 0 || got < (tmsize_t)((uint64_t)tw * th * ppix)) {
						seterr(err, name, "tile %u: %s", ti,
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
			seterr(err, name, "inconsistent scanline size");
			r = -SPRITE_ECORRUPT;
			goto done;
		}
		buf = malloc((size_t)sl);
		if (!buf) {
			seterr(err, name, "out of memory");
			r = -ENOMEM;
			goto done;
		}
		for (uint32_t s = 0; s < planes && r == 0; s++)
			for (uint32_t y = 0; y < L->h; y++) {
				if (TIFFReadScanline(t, buf, y, (uint16_t)s) < 0) {
					seterr(err, name, "plane %u row %u: %s", s, y,
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
	if (r == 0)
		r = alloc_image(out, L->h, L->w, L->cout, name, err);
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
 * Fast path: contiguous strips, 8 or 16 bits. Returns 1 when the layout is
 * not one it handles (the caller falls back), 0 on success, < 0 on error.
 */
static int tiff_fast(TIFF *t, struct tiff_layout *L, struct tiff_msg *msg, const char *name,
		     struct sprite_image *out, char *err)
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

	if (TIFFIsTiled(t) || (planar == PLANARCONFIG_SEPARATE && L->spp > 1))
		return tiff_gather(t, L, msg, planar == PLANARCONFIG_SEPARATE && L->spp > 1, name,
				   out, err);

	tmsize_t rowsize = TIFFScanlineSize(t);
	uint64_t want_row = (uint64_t)L->w * L->spp * (L->bps / 8);
	if (rowsize <= 0 || (uint64_t)rowsize != want_row) {
		seterr(err, name, "inconsistent scanline size");
		return -SPRITE_ECORRUPT;
	}
	uint32_t rps = L->h;
	TIFFGetFieldDefaulted(t, TIFFTAG_ROWSPERSTRIP, &rps);
	if (rps == 0 || rps > L->h)
		rps = L->h;
	uint32_t nstrips = TIFFNumberOfStrips(t);
	if ((uint64_t)nstrips * rps < L->h) {
		seterr(err, name, "%u strips of %u rows cannot hold %u rows", nstrips, rps, L->h);
		return -SPRITE_ECORRUPT;
	}

	int r = alloc_image(out, L->h, L->w, L->cout, name, err);
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
			seterr(err, name, "out of memory for a strip of %u rows", rps);
			return -ENOMEM;
		}
	}
	for (uint32_t s = 0, y = 0; y < L->h; s++, y += rps) {
		uint32_t rows = L->h - y < rps ? L->h - y : rps;
		tmsize_t want = (tmsize_t)rows * rowsize;
		uint8_t *dst = direct ? out->px + (size_t)y * rowsize : buf;
		tmsize_t got = TIFFReadEncodedStrip(t, s, dst, want);
		if (got < 0) {
			seterr(err, name, "strip %u: %s", s, tiff_reason(msg, "read error"));
			r = -SPRITE_ECORRUPT;
			break;
		}
		if (got < want) {
			seterr(err, name, "truncated strip %u (%lld of %lld bytes)", s,
			       (long long)got, (long long)want);
			r = -SPRITE_ECORRUPT;
			break;
		}
		if (direct)
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

static int tiff_rgba(TIFF *t, const struct tiff_layout *L, struct tiff_msg *msg, const char *name,
		     struct sprite_image *out, char *err)
{
	char emsg[1024] = "";
	if (!TIFFRGBAImageOK(t, emsg)) {
		seterr(err, name, "unsupported TIFF: %s", emsg);
		return -ENOTSUP;
	}
	uint32_t *raster = malloc((size_t)L->w * L->h * sizeof *raster);
	if (!raster) {
		seterr(err, name, "out of memory for %ux%u pixels", L->h, L->w);
		return -ENOMEM;
	}
	if (!TIFFReadRGBAImageOriented(t, L->w, L->h, raster, ORIENTATION_TOPLEFT, 1)) {
		seterr(err, name, "%s", tiff_reason(msg, "decode error"));
		free(raster);
		return -SPRITE_ECORRUPT;
	}
	/* libtiff premultiplies unassociated alpha: the colours are already on black. */
	uint32_t c =
		(L->photo == PHOTOMETRIC_MINISBLACK || L->photo == PHOTOMETRIC_MINISWHITE) ? 1 : 3;
	int r = alloc_image(out, L->h, L->w, c, name, err);
	if (r < 0) {
		free(raster);
		return r;
	}
	size_t n = (size_t)L->w * L->h;
	for (size_t i = 0; i < n; i++) {
		uint32_t p = raster[i];
		if (c == 1) {
			out->px[i] = (uint8_t)TIFFGetR(p);
		} else {
			out->px[3 * i] = (uint8_t)TIFFGetR(p);
			out->px[3 * i + 1] = (uint8_t)TIFFGetG(p);
			out->px[3 * i + 2] = (uint8_t)TIFFGetB(p);
		}
	}
	free(raster);
	return 0;
}

static int decode_tiff(const void *data, size_t len, const char *name, struct sprite_image *out,
		       char *err)
{
	struct tiff_mem mem = {data, len, 0};
	struct tiff_msg msg;
	TIFFOpenOptions *opts = tiff_options(&msg);
	if (!opts) {
		seterr(err, name, "out of memory");
		return -ENOMEM;
	}
	TIFF *t = TIFFClientOpenExt(name, "r", &mem, tm_read, tm_write, tm_seek, tm_close, tm_size,
				    tm_map, tm_unmap, opts);
	TIFFOpenOptionsFree(opts);
	if (!t) {
		seterr(err, name, "bad TIFF: %s", tiff_reason(&msg, "cannot parse header"));
		return -SPRITE_ECORRUPT;
	}
	struct tiff_layout *L = calloc(1, sizeof *L);
	int r = -ENOMEM;
	if (!L) {
		seterr(err, name, "out of memory");
		goto done;
	}
	uint32_t w = 0, h = 0;
	TIFFGetField(t, TIFFTAG_IMAGEWIDTH, &w);
	TIFFGetField(t, TIFFTAG_IMAGELENGTH, &h);
	r = check_dims(h, w, name, err);
	if (r < 0)
		goto done;
	L->w = w;
	L->h = h;
	L->bps = 1;
	L->spp = 1;
	TIFFGetFieldDefaulted(t, TIFFTAG_BITSPERSAMPLE, &L->bps);
	TIFFGetFieldDefaulted(t, TIFFTAG_SAMPLESPERPIXEL, &L->spp);
	if (!TIFFGetField(t, TIFFTAG_PHOTOMETRIC, &L->photo))
		L->photo = L->spp >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK;
	if (L->spp == 0 || L->spp > 16) {
		seterr(err, name, "bad samples per pixel %u", L->spp);
		r = -SPRITE_ECORRUPT;
		goto done;
	}
	r = tiff_fast(t, L, &msg, name, out, err);
	if (r == 1)
		r = tiff_rgba(t, L, &msg, name, out, err);
	if (r == 0 && msg.warned) {
		sprite_image_free(out);
		seterr(err, name, "damaged TIFF: %s", msg.warn);
		r = -SPRITE_ECORRUPT;
	}
done:
	free(L);
	TIFFClose(t);
	return r;
}

/* ---- PNG ------------------------------------------------------------- */

static int decode_png(const void *data, size_t len, const char *name, struct sprite_image *out,
		      char *err)
{
	png_image img;
	memset(&img, 0, sizeof img);
	img.version = PNG_IMAGE_VERSION;
	if (!png_image_begin_read_from_memory(&img, data, len)) {
		seterr(err, name, "bad PNG: %s", img.message);
		png_image_free(&img);
		return -SPRITE_ECORRUPT;
	}
	int r = check_dims(img.height, img.width, name, err);
	if (r < 0) {
		png_image_free(&img);
		return r;
	}
	int alpha = (img.format & PNG_FORMAT_FLAG_ALPHA) != 0;
	int color = (img.format & PNG_FORMAT_FLAG_COLOR) != 0;
	uint32_t c = color ? 3 : 1, cin = c + (alpha ? 1 : 0);
	img.format = color ? (alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB)
			   : (alpha ? PNG_FORMAT_GA : PNG_FORMAT_GRAY);
	/* 16-bit files without gamma information are taken as sRGB, as other
	 * tools do (libpng would assume linear and brighten them); libpng then
	 * scales them to 8 bits with rounding rather than >> 8. */
	img.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
	uint32_t h = img.height, w = img.width;
	uint8_t *buf = malloc((size_t)h * w * cin);
	if (!buf) {
		png_image_free(&img);
		seterr(err, name, "out of memory for %ux%u pixels", h, w);
		return -ENOMEM;
	}
	if (!png_image_finish_read(&img, NULL, buf, 0, NULL)) {
		seterr(err, name, "bad PNG: %s", img.message);
		png_image_free(&img);
		free(buf);
		return -SPRITE_ECORRUPT;
	}
	png_image_free(&img);
	if (!alpha) {
		out->h = h;
		out->w = w;
		out->c = c;
		out->px = buf;
		return 0;
	}
	size_t n = (size_t)h * w;
	for (size_t i = 0; i < n; i++) {
		unsigned a = buf[i * cin + c];
		for (uint32_t k = 0; k < c; k++)
			buf[i * c + k] = over_black(buf[i * cin + k], a);
	}
	out->h = h;
	out->w = w;
	out->c = c;
	uint8_t *shrunk = realloc(buf, n * c);
	out->px = shrunk ? shrunk : buf;
	return 0;
}

/* ---- JPEG ------------------------------------------------------------ */

static int decode_jpeg(const void *data, size_t len, const char *name, struct sprite_image *out,
		       char *err)
{
	tjhandle tj = tjInitDecompress();
	if (!tj) {
		seterr(err, name, "cannot start the JPEG decoder");
		return -ENOMEM;
	}
	int w = 0, h = 0, sub = 0, cs = 0, r;
	if (len > (size_t)1 << 31) {
		seterr(err, name, "JPEG file too large");
		r = -SPRITE_ECORRUPT;
		goto done;
	}
	if (tjDecompressHeader3(tj, data, (unsigned long)len, &w, &h, &sub, &cs) < 0) {
		seterr(err, name, "bad JPEG: %s", tjGetErrorStr2(tj));
		r = -SPRITE_ECORRUPT;
		goto done;
	}
	if (w <= 0 || h <= 0) {
		seterr(err, name, "bad JPEG: no pixels");
		r = -SPRITE_ECORRUPT;
		goto done;
	}
	r = check_dims((uint64_t)h, (uint64_t)w, name, err);
	if (r < 0)
		goto done;
	if (cs == TJCS_CMYK || cs == TJCS_YCCK) {
		seterr(err, name, "CMYK JPEG is not supported");
		r = -ENOTSUP;
		goto done;
	}
	uint32_t c = cs == TJCS_GRAY ? 1 : 3;
	r = alloc_image(out, (uint32_t)h, (uint32_t)w, c, name, err);
	if (r < 0)
		goto done;
	/* Warnings (e.g. premature end of data) count as errors: a truncated
	 * photo is grey at the bottom and would train on garbage. */
	if (tjDecompress2(tj, data, (unsigned long)len, out->px, w, 0, h,
			  c == 1 ? TJPF_GRAY : TJPF_RGB, 0) < 0) {
		seterr(err, name, "bad JPEG: %s", tjGetErrorStr2(tj));
		sprite_image_free(out);
		r = -SPRITE_ECORRUPT;
	}
done:
	tjDestroy(tj);
	return r;
}

/* ---- Netpbm (P5, P6, P7) ------------------------------------------------ */

/*
 * The binary Netpbm forms spritefs itself serves under by-class/ and
 * sheets/, and spritefs-pack --export --format pgm writes: P5 (gray), P6
 * (RGB) and P7 (PAM: depth 1-4, alpha composited on black). There is no
 * well-kept decoding library for these in Debian that reports errors
 * instead of exiting (libnetpbm calls exit), and the format is a text
 * header in front of raw samples, so it is read here, every field bounded.
 */
struct pnm_cursor {
	const uint8_t *p;
	size_t len, pos;
};

static void pnm_skip_space(struct pnm_cursor *c)
{
	while (c->pos < c->len) {
		uint8_t ch = c->p[c->pos];
		if (ch == '#') {
			while (c->pos < c->len && c->p[c->pos] != '\n')
				c->pos++;
		} else if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' ||
			   ch == '\f') {
			c->pos++;
		} else {
			break;
		}
	}
}

/* A decimal number of at most 9 digits; -1 when there is none. */
static long pnm_number(struct pnm_cursor *c)
{
	pnm_skip_space(c);
	long v = 0;
	int digits = 0;
	while (c->pos < c->len && c->p[c->pos] >= '0' && c->p[c->pos] <= '9') {
		if (++digits > 9)
			return -1;
		v = v * 10 + (c->p[c->pos++] - '0');
	}
	return digits ? v : -1;
}

/* PAM header lines up to ENDHDR; 0, or -1 when malformed. */
static int pam_header(struct pnm_cursor *c, long *w, long *h, long *depth, long *maxval)
{
	*w = *h = *depth = *maxval = -1;
	for (int lines = 0; lines < 64; lines++) {
		pnm_skip_space(c);
		size_t start = c->pos;
		while (c->pos < c->len && c->p[c->pos] >= 'A' && c->p[c->pos] <= 'Z')
			c->pos++;
		size_t kl = c->pos - start;
		const char *k = (const char *)c->p + start;
		if (kl == 6 && !memcmp(k, "ENDHDR", 6)) {
			if (c->pos >= c->len || c->p[c->pos] != '\n')
				return -1;
			c->pos++;
			return 0;
		}
		long *dst = kl == 5 && !memcmp(k, "WIDTH", 5)	 ? w
			    : kl == 6 && !memcmp(k, "HEIGHT", 6) ? h
			    : kl == 5 && !memcmp(k, "DEPTH", 5)	 ? depth
			    : kl == 6 && !memcmp(k, "MAXVAL", 6) ? maxval
								 : NULL;
		if (dst) {
			if ((*dst = pnm_number(c)) < 0)
				return -1;
		} else if (kl == 8 && !memcmp(k, "TUPLTYPE", 8)) {
			while (c->pos < c->len && c->p[c->pos] != '\n')
				c->pos++; /* DEPTH says what we need */
		} else {
			return -1;
		}
	}
	return -1;
}

static int decode_pnm(const void *data, size_t len, const char *name, struct sprite_image *out,
		      char *err)
{
	struct pnm_cursor c = {data, len, 2};
	char kind = (char)c.p[1];
	long w, h, depth, maxval;
	if (kind == '7') {
		if (pam_header(&c, &w, &h, &depth, &maxval) < 0 || w < 0 || h < 0 || depth < 0 ||
		    maxval < 0) {
			seterr(err, name, "bad PAM header");
			return -SPRITE_ECORRUPT;
		}
	} else {
		depth = kind == '5' ? 1 : 3;
		w = pnm_number(&c);
		h = pnm_number(&c);
		maxval = pnm_number(&c);
		/* one whitespace byte ends the header */
		if (w < 0 || h < 0 || maxval < 0 || c.pos >= c.len ||
		    !(c.p[c.pos] == ' ' || c.p[c.pos] == '\t' || c.p[c.pos] == '\n' ||
		      c.p[c.pos] == '\r')) {
			seterr(err, name, "bad P%c header", kind);
			return -SPRITE_ECORRUPT;
		}
		c.pos++;
	}
	if (depth < 1 || depth > 4 || maxval < 1 || maxval > 65535) {
		seterr(err, name, "unsupported Netpbm image: depth %ld, maxval %ld", depth, maxval);
		return -ENOTSUP;
	}
	int r = check_dims((uint64_t)h, (uint64_t)w, name, err);
	if (r < 0)
		return r;
	size_t bps = maxval > 255 ? 2 : 1;
	uint64_t need = (uint64_t)h * (uint64_t)w * (uint64_t)depth * bps;
	if (need > len - c.pos) {
		seterr(err, name, "truncated: %llu bytes of samples, %llu present",
		       (unsigned long long)need, (unsigned long long)(len - c.pos));
		return -SPRITE_ECORRUPT;
	}
	uint32_t oc = depth >= 3 ? 3 : 1, alpha = depth == 2 || depth == 4;
	if ((r = alloc_image(out, (uint32_t)h, (uint32_t)w, oc, name, err)) < 0)
		return r;
	const uint8_t *s = c.p + c.pos;
	size_t npx = (size_t)h * (size_t)w;
	for (size_t i = 0; i < npx; i++) {
		unsigned v[4];
		for (long k = 0; k < depth; k++, s += bps) {
			unsigned x = bps == 2 ? (unsigned)s[0] << 8 | s[1] : s[0];
			if (x > (unsigned)maxval)
				x = (unsigned)maxval;
			/* to 8 bits: 255 as it is, 65535 >> 8 as 16-bit TIFF and PNG, others scaled
			 */
			v[k] = maxval == 255 ? x
			       : maxval == 65535
				       ? x >> 8
				       : (x * 255u + (unsigned)maxval / 2) / (unsigned)maxval;
		}
		for (uint32_t k = 0; k < oc; k++)
			out->px[i * oc + k] =
				alpha ? over_black(v[k], v[depth - 1]) : (uint8_t)v[k];
	}
	return 0;
}

/* ---- entry points ------------------------------------------------------ */

int sprite_image_decode(const void *data, size_t len, const char *name, struct sprite_image *out,
			char *err)
{
	const uint8_t *p = data;
	out->px = NULL;
	out->h = out->w = out->c = 0;
	if (len == 0) {
		seterr(err, name, "empty file");
		return -SPRITE_ECORRUPT;
	}
	if (len >= 4 && ((p[0] == 'I' && p[1] == 'I' && (p[2] == 42 || p[2] == 43) && p[3] == 0) ||
			 (p[0] == 'M' && p[1] == 'M' && p[2] == 0 && (p[3] == 42 || p[3] == 43))))
		return decode_tiff(data, len, name, out, err);
	if (len >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0)
		return decode_png(data, len, name, out, err);
	if (len >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF)
		return decode_jpeg(data, len, name, out, err);
	if (len >= 3 && p[0] == 'P' && (p[1] == '5' || p[1] == '6' || p[1] == '7') &&
	    (p[2] == ' ' || p[2] == '\t' || p[2] == '\n' || p[2] == '\r'))
		return decode_pnm(data, len, name, out, err);
	seterr(err, name, "not a PNG/TIFF/JPEG/PNM file");
	return -ENOTSUP;
}

int sprite_image_load(const char *path, struct sprite_image *out, char *err)
{
	out->px = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		seterr(err, path, "cannot open: %s", strerror(e));
		return -e;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		seterr(err, path, "cannot stat: %s", strerror(e));
		return -e;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		seterr(err, path, "not a regular file");
		return -EINVAL;
	}
	if ((uint64_t)st.st_size > IMAGE_MAX_FILE) {
		close(fd);
		seterr(err, path, "file too large (%lld bytes)", (long long)st.st_size);
		return -EFBIG;
	}
	size_t len = (size_t)st.st_size;
	/* Small files (the common case) are read into the stack. */
	uint8_t small[16384];
	uint8_t *buf = len <= sizeof small ? small : malloc(len ? len : 1);
	if (!buf) {
		close(fd);
		seterr(err, path, "out of memory");
		return -ENOMEM;
	}
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			if (buf != small)
				free(buf);
			seterr(err, path, "read error: %s", strerror(e));
			return -e;
		}
		if (n == 0)
			break; /* shrank while reading: decode what is there */
		got += (size_t)n;
	}
	close(fd);
	int r = sprite_image_decode(buf, got, path, out, err);
	if (buf != small)
		free(buf);
	return r;
}

/* ---- fit ------------------------------------------------------------- */

/* Per-axis filter taps: out[o] = sum_k wt[o*K+k] * in[idx[o*K+k]]. */
struct taps {
	uint32_t K;
	uint32_t *idx;
	float *wt;
};

static int make_taps(struct taps *t, uint32_t in, uint32_t out)
{
	if (in > out)
		t->K = (in + out - 1) / out + 1; /* a box spans at most ceil(in/out)+1 pixels */
	else
		t->K = 2;
	t->idx = calloc((size_t)out * t->K, sizeof *t->idx);
	t->wt = calloc((size_t)out * t->K, sizeof *t->wt);
	if (!t->idx || !t->wt)
		return -ENOMEM;
	double scale = (double)in / out;
	for (uint32_t o = 0; o < out; o++) {
		uint32_t *ix = t->idx + (size_t)o * t->K;
		float *wt = t->wt + (size_t)o * t->K;
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

static int resize(const uint8_t *src, uint32_t sh, uint32_t sw, uint32_t c, uint8_t *dst,
		  uint32_t dh, uint32_t dw)
{
	struct taps ty = {0}, tx = {0};
	float *row = NULL;
	int r = -ENOMEM;
	if (make_taps(&ty, sh, dh) < 0 || make_taps(&tx, sw, dw) < 0)
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
		uint8_t *d = dst + (size_t)oy * dw * c;
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

int sprite_image_fit(const struct sprite_image *im, uint32_t h, uint32_t w, uint32_t c,
		     uint8_t *tile)
{
	if (!im || !im->px || !tile || im->h == 0 || im->w == 0 || h == 0 || w == 0)
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
					rgb[k] = over_black(s[k], s[3]);
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
	} else {
		r = resize(src, im->h, im->w, c, tile, h, w);
	}
	if (conv && conv != tile)
		free(conv);
	return r;
}

/* ---- IDX ------------------------------------------------------------- */

static int idx_read_header(gzFile f, const char *path, uint8_t nd, uint32_t *dims, char *err)
{
	uint8_t hdr[16];
	unsigned want = 4 + 4u * nd;
	int n = 0, k;
	/* The magic is checked before the dims are read, so that a wrong kind
	 * of file is named as such rather than as truncated. */
	for (unsigned part = 0; part < 2; part++) {
		unsigned from = part ? 4 : 0, len = part ? 4u * nd : 4;
		k = gzread(f, hdr + from, len);
		if (k < 0) {
			int e;
			seterr(err, path, "read error: %s", gzerror(f, &e));
			return -EIO;
		}
		n += k;
		if ((unsigned)k < len) {
			seterr(err, path, "truncated IDX header (%d of %u bytes)", n, want);
			return -SPRITE_ETRUNC;
		}
		if (part == 0) {
			uint32_t magic = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
					 (uint32_t)hdr[2] << 8 | hdr[3];
			uint32_t expect = 0x00000800u | nd;
			if (magic != expect) {
				seterr(err, path, "bad IDX magic 0x%08x (expected 0x%08x)", magic,
				       expect);
				return -SPRITE_EBADMAGIC;
			}
		}
	}
	for (unsigned i = 0; i < nd; i++) {
		const uint8_t *p = hdr + 4 + 4 * i;
		dims[i] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
	}
	return 0;
}

/*
 * Read exactly total bytes. The buffer grows as data arrives so that a header
 * claiming billions of items costs memory only if the data is really there.
 */
static int idx_read_body(gzFile f, const char *path, uint64_t total, uint8_t **out, char *err)
{
	size_t cap = total < (1u << 20) ? (size_t)total : (1u << 20), got = 0;
	uint8_t *buf = malloc(cap ? cap : 1);
	if (!buf) {
		seterr(err, path, "out of memory");
		return -ENOMEM;
	}
	while (got < total) {
		if (got == cap) {
			size_t ncap = cap * 2 < total ? cap * 2 : (size_t)total;
			uint8_t *nb = realloc(buf, ncap);
			if (!nb) {
				free(buf);
				seterr(err, path, "out of memory for %llu bytes",
				       (unsigned long long)total);
				return -ENOMEM;
			}
			buf = nb;
			cap = ncap;
		}
		size_t chunk = cap - got;
		if (chunk > (1u << 30))
			chunk = 1u << 30;
		int n = gzread(f, buf + got, (unsigned)chunk);
		if (n < 0) {
			int e;
			seterr(err, path, "read error: %s", gzerror(f, &e));
			free(buf);
			return -EIO;
		}
		if (n == 0) {
			seterr(err, path, "truncated: %llu of %llu data bytes",
			       (unsigned long long)got, (unsigned long long)total);
			free(buf);
			return -SPRITE_ETRUNC;
		}
		got += (size_t)n;
	}
	*out = buf;
	return 0;
}

static gzFile idx_open(const char *path, char *err, int *rc)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		*rc = -errno;
		seterr(err, path, "cannot open: %s", strerror(errno));
		return NULL;
	}
	gzFile f = gzdopen(fd, "rb");
	if (!f) {
		close(fd);
		*rc = -ENOMEM;
		seterr(err, path, "out of memory");
		return NULL;
	}
	gzbuffer(f, 1u << 18);
	return f;
}

int64_t sprite_idx_load_images(const char *path, uint32_t *h, uint32_t *w, uint8_t **px, char *err)
{
	int r = 0;
	gzFile f = idx_open(path, err, &r);
	if (!f)
		return r;
	uint32_t d[3];
	r = idx_read_header(f, path, 3, d, err);
	if (r < 0)
		goto done;
	if (d[1] == 0 || d[2] == 0 || d[1] > SPRITE_IMAGE_MAX_SIDE ||
	    d[2] > SPRITE_IMAGE_MAX_SIDE || (uint64_t)d[1] * d[2] > SPRITE_IMAGE_MAX_PIXELS) {
		seterr(err, path, "bad IDX image size %ux%u", d[1], d[2]);
		r = -SPRITE_ECORRUPT;
		goto done;
	}
	uint64_t total = (uint64_t)d[0] * d[1] * d[2]; /* < 2^60: no overflow */
	if (total > SIZE_MAX / 2) {
		seterr(err, path, "IDX data too large");
		r = -SPRITE_ECORRUPT;
		goto done;
	}
	r = idx_read_body(f, path, total, px, err);
	if (r < 0)
		goto done;
	*h = d[1];
	*w = d[2];
	gzclose(f);
	return (int64_t)d[0];
done:
	gzclose(f);
	return r;
}

int64_t sprite_idx_load_labels(const char *path, uint8_t **labels, char *err)
{
	int r = 0;
	gzFile f = idx_open(path, err, &r);
	if (!f)
		return r;
	uint32_t n;
	r = idx_read_header(f, path, 1, &n, err);
	if (r == 0)
		r = idx_read_body(f, path, n, labels, err);
	gzclose(f);
	return r < 0 ? r : (int64_t)n;
}

/* ---- writers ----------------------------------------------------------- */

int sprite_tiff_write(const char *path, const uint8_t *px, uint32_t h, uint32_t w, uint32_t c,
		      int compression, char *err)
{
	if (!px || h == 0 || w == 0 || (c != 1 && c != 3 && c != 4) ||
	    (uint64_t)h * w > SPRITE_IMAGE_MAX_PIXELS) {
		seterr(err, path, "bad image shape %ux%ux%u", h, w, c);
		return -EINVAL;
	}
	if (!TIFFIsCODECConfigured((uint16_t)compression)) {
		seterr(err, path, "TIFF compression %d not available", compression);
		return -ENOTSUP;
	}
	struct tiff_msg msg;
	TIFFOpenOptions *opts = tiff_options(&msg);
	if (!opts) {
		seterr(err, path, "out of memory");
		return -ENOMEM;
	}
	TIFF *t = TIFFOpenExt(path, "w", opts);
	TIFFOpenOptionsFree(opts);
	if (!t) {
		seterr(err, path, "cannot create: %s", tiff_reason(&msg, strerror(errno)));
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
			seterr(err, path, "write error: %s", tiff_reason(&msg, "strip"));
			r = -EIO;
			break;
		}
	}
	if (r == 0 && !TIFFWriteDirectory(t)) {
		seterr(err, path, "write error: %s", tiff_reason(&msg, "directory"));
		r = -EIO;
	}
	TIFFClose(t);
	if (r < 0)
		unlink(path);
	return r;
}

int sprite_png_write(const char *path, const uint8_t *px, uint32_t h, uint32_t w, uint32_t c,
		     char *err)
{
	if (!px || h == 0 || w == 0 || (c != 1 && c != 3 && c != 4) ||
	    (uint64_t)h * w > SPRITE_IMAGE_MAX_PIXELS) {
		seterr(err, path, "bad image shape %ux%ux%u", h, w, c);
		return -EINVAL;
	}
	png_image img;
	memset(&img, 0, sizeof img);
	img.version = PNG_IMAGE_VERSION;
	img.width = w;
	img.height = h;
	img.format = c == 1 ? PNG_FORMAT_GRAY : c == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_RGBA;
	if (!png_image_write_to_file(&img, path, 0, px, 0, NULL)) {
		seterr(err, path, "cannot write PNG: %s", img.message);
		png_image_free(&img);
		unlink(path);
		return -EIO;
	}
	return 0;
}

int sprite_pnm_header(char *buf, size_t cap, uint32_t h, uint32_t w, uint32_t c)
{
	int n;
	if (c == 1 || c == 3)
		n = snprintf(buf, cap, "P%c\n%u %u\n255\n", c == 1 ? '5' : '6', w, h);
	else if (c == 2 || c == 4)
		n = snprintf(buf, cap,
			     "P7\nWIDTH %u\nHEIGHT %u\nDEPTH %u\nMAXVAL 255\nTUPLTYPE %s\nENDHDR\n",
			     w, h, c, c == 2 ? "GRAYSCALE_ALPHA" : "RGB_ALPHA");
	else
		return -EINVAL;
	if (n < 0 || (size_t)n >= cap)
		return -ENOSPC;
	return n;
}

const char *sprite_pnm_ext(uint32_t c)
{
	return c == 1 ? ".pgm" : c == 3 ? ".ppm" : ".pam";
}
