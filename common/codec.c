/*
 * codec.c - find an encoded image's kind from its magic bytes and decode it
 * (PNG, JPEG, binary Netpbm here; TIFF in tiff.c), read image files, and
 * write PNG and Netpbm headers; the messages all image code gives.
 *
 * libpng and libturbojpeg parse from the caller's memory; every dimension
 * read from a file is checked against SPRITE_IMAGE_MAX_SIDE and
 * SPRITE_IMAGE_MAX_PIXELS before anything is allocated. Tile fitting is in
 * fit.c and IDX files in idx.c.
 */
#include "common/image.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <png.h>
#include <turbojpeg.h>

#include "common/codec.h"
#include "common/safe_open.h"
#include "common/store.h"
#include "common/util.h"

/* An encoded file larger than this is refused before it is read. */
#define IMAGE_MAX_FILE (1ull << 30)

void sprite_image_err(char *err, const char *name, const char *fmt, ...)
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

int sprite_image_check_dims(uint64_t h, uint64_t w, const char *name, char *err)
{
	if (h == 0 || w == 0) {
		sprite_image_err(err, name, "image has no pixels (%llux%llu)",
				 (unsigned long long)h, (unsigned long long)w);
		return -SPRITE_ECORRUPT;
	}
	if (h > SPRITE_IMAGE_MAX_SIDE || w > SPRITE_IMAGE_MAX_SIDE ||
	    h * w > SPRITE_IMAGE_MAX_PIXELS) {
		sprite_image_err(err, name, "image too large (%llux%llu)", (unsigned long long)h,
				 (unsigned long long)w);
		return -SPRITE_ECORRUPT;
	}
	return 0;
}

int sprite_image_alloc(struct sprite_image *out, uint32_t h, uint32_t w, uint32_t c,
		       const char *name, char *err)
{
	out->h = h;
	out->w = w;
	out->c = c;
	out->px = malloc((size_t)h * w * c);
	if (!out->px) {
		sprite_image_err(err, name, "out of memory for %ux%ux%u pixels", h, w, c);
		return -ENOMEM;
	}
	return 0;
}

/* ---- PNG ------------------------------------------------------------- */

static int decode_png(const void *data, size_t len, const char *name, uint32_t bg,
		      struct sprite_image *out, char *err)
{
	/* 16 bits in IHDR (its first chunk): the row decoder's libpng transforms and 16-bit
	 * rule, which libpng's simplified API cannot give */
	const uint8_t *p = data;
	if (len > 24 && !memcmp(p + 12, "IHDR", 4) && p[24] == 16)
		return sprite_png16_decode(data, len, name, bg, out, err);
	png_image img;
	memset(&img, 0, sizeof img);
	img.version = PNG_IMAGE_VERSION;
	if (!png_image_begin_read_from_memory(&img, data, len)) {
		sprite_image_err(err, name, "bad PNG: %s", img.message);
		png_image_free(&img);
		return -SPRITE_ECORRUPT;
	}
	int r = sprite_image_check_dims(img.height, img.width, name, err);
	if (r < 0) {
		png_image_free(&img);
		return r;
	}
	int alpha = (img.format & PNG_FORMAT_FLAG_ALPHA) != 0;
	int color = (img.format & PNG_FORMAT_FLAG_COLOR) != 0;
	uint32_t c = color ? 3 : 1, cin = c + (alpha ? 1 : 0);
	img.format = color ? (alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB)
			   : (alpha ? PNG_FORMAT_GA : PNG_FORMAT_GRAY);
	/* (16-bit files, were any to reach here: without gamma information
	 * taken as sRGB, as other tools do, not as linear) */
	img.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
	uint32_t h = img.height, w = img.width;
	uint8_t *buf = malloc((size_t)h * w * cin);
	if (!buf) {
		png_image_free(&img);
		sprite_image_err(err, name, "out of memory for %ux%u pixels", h, w);
		return -ENOMEM;
	}
	if (!png_image_finish_read(&img, NULL, buf, 0, NULL)) {
		sprite_image_err(err, name, "bad PNG: %s", img.message);
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
			buf[i * c + k] = sprite_over_bg(buf[i * cin + k], a, bg, c == 1 ? 3 : k);
	}
	out->h = h;
	out->w = w;
	out->c = c;
	uint8_t *shrunk = realloc(buf, n * c);
	out->px = shrunk ? shrunk : buf;
	return 0;
}

/* ---- JPEG ------------------------------------------------------------ */

/* Big- or little-endian 16 and 32-bit reads inside the TIFF block of EXIF. */
static unsigned exif_u16(const uint8_t *p, int be)
{
	return be ? (unsigned)p[0] << 8 | p[1] : (unsigned)p[1] << 8 | p[0];
}

static uint32_t exif_u32(const uint8_t *p, int be)
{
	return be ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
		  : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* The Orientation (0x0112) of IFD0 in an EXIF block, or 1 when absent or malformed. */
static int exif_orientation(const uint8_t *p, size_t n)
{
	if (n < 6 + 8 || memcmp(p, "Exif\0\0", 6) != 0)
		return 1;
	p += 6;
	n -= 6;
	int be;
	if (!memcmp(p, "MM\0*", 4))
		be = 1;
	else if (!memcmp(p, "II*\0", 4))
		be = 0;
	else
		return 1;
	uint32_t ifd = exif_u32(p + 4, be);
	if (ifd < 8 || (uint64_t)ifd + 2 > n)
		return 1;
	unsigned count = exif_u16(p + ifd, be);
	for (unsigned i = 0; i < count; i++) {
		uint64_t at = (uint64_t)ifd + 2 + 12ull * i;
		if (at + 12 > n)
			return 1;
		const uint8_t *e = p + at;
		if (exif_u16(e, be) == 0x0112) {
			/* SHORT, one value, held in the first two bytes of the value field */
			unsigned v = exif_u16(e + 8, be);
			if (exif_u16(e + 2, be) != 3 || exif_u32(e + 4, be) != 1 || v < 1 || v > 8)
				return 1;
			return (int)v;
		}
	}
	return 1;
}

/*
 * The EXIF orientation of a JPEG (1..8), from the APP1 segments before the
 * first scan; 1 when there is none or it cannot be read: a bad EXIF block
 * leaves the image as it is stored.
 */
static int jpeg_orientation(const uint8_t *p, size_t len)
{
	size_t at = 2;
	for (int seg = 0; seg < 64 && at + 4 <= len; seg++) {
		if (p[at] != 0xFF)
			return 1;
		uint8_t m = p[at + 1];
		if (m == 0xFF) { /* fill byte */
			at++;
			continue;
		}
		if (m == 0xDA || m == 0xD9) /* start of scan, end of image */
			return 1;
		size_t sl = (size_t)p[at + 2] << 8 | p[at + 3];
		if (sl < 2 || at + 2 + sl > len)
			return 1;
		if (m == 0xE1 && sl - 2 >= 6 && !memcmp(p + at + 4, "Exif\0\0", 6))
			return exif_orientation(p + at + 4, sl - 2);
		at += 2 + sl;
	}
	return 1;
}

/*
 * Turn the h x w x c pixels of src as EXIF orientation o says (the
 * transform that shows the image upright, as PIL's ImageOps.exif_transpose
 * does) into dst; orientations 5-8 swap the sides.
 */
static void orient(const uint8_t *src, uint32_t h, uint32_t w, uint32_t c, int o, uint8_t *dst)
{
	uint32_t oh = o >= 5 ? w : h, ow = o >= 5 ? h : w;
	for (uint32_t r = 0; r < oh; r++) {
		for (uint32_t q = 0; q < ow; q++) {
			uint32_t sy = r, sx = q;
			switch (o) {
			case 2: /* mirrored left-right */
				sx = w - 1 - q;
				break;
			case 3: /* rotated 180 */
				sy = h - 1 - r;
				sx = w - 1 - q;
				break;
			case 4: /* mirrored top-bottom */
				sy = h - 1 - r;
				break;
			case 5: /* transposed */
				sy = q;
				sx = r;
				break;
			case 6: /* turned 90 degrees clockwise to show */
				sy = h - 1 - q;
				sx = r;
				break;
			case 7: /* transversed */
				sy = h - 1 - q;
				sx = w - 1 - r;
				break;
			case 8: /* turned 90 degrees anticlockwise to show */
				sy = q;
				sx = w - 1 - r;
				break;
			}
			memcpy(dst + ((size_t)r * ow + q) * c, src + ((size_t)sy * w + sx) * c, c);
		}
	}
}

static int decode_jpeg(const void *data, size_t len, const char *name, uint32_t th, uint32_t tw,
		       enum sprite_fit fit, struct sprite_image *out, char *err)
{
	tjhandle tj = tjInitDecompress();
	if (!tj) {
		sprite_image_err(err, name, "cannot start the JPEG decoder");
		return -ENOMEM;
	}
	uint8_t *buf = NULL;
	int w = 0, h = 0, sub = 0, cs = 0, r;
	if (len > (size_t)1 << 31) {
		sprite_image_err(err, name, "JPEG file too large");
		r = -SPRITE_ECORRUPT;
		goto done;
	}
	if (tjDecompressHeader3(tj, data, (unsigned long)len, &w, &h, &sub, &cs) < 0) {
		sprite_image_err(err, name, "bad JPEG: %s", tjGetErrorStr2(tj));
		r = -SPRITE_ECORRUPT;
		goto done;
	}
	if (w <= 0 || h <= 0) {
		sprite_image_err(err, name, "bad JPEG: no pixels");
		r = -SPRITE_ECORRUPT;
		goto done;
	}
	/* The size the header declares, checked before anything is allocated. */
	r = sprite_image_check_dims((uint64_t)h, (uint64_t)w, name, err);
	if (r < 0)
		goto done;
	int o = jpeg_orientation(data, len);
	int cmyk = cs == TJCS_CMYK || cs == TJCS_YCCK;
	uint32_t c = cs == TJCS_GRAY ? 1 : 3, cin = cmyk ? 4 : c;
	int sw = w, sh = h;
	if (th && tw) {
		/* What the fit resizes to, turned back to the stored orientation. */
		struct sprite_fit_geom g;
		sprite_fit_geometry(o >= 5 ? (uint32_t)w : (uint32_t)h,
				    o >= 5 ? (uint32_t)h : (uint32_t)w, th, tw, fit, &g);
		uint32_t need_h = o >= 5 ? g.rw : g.rh, need_w = o >= 5 ? g.rh : g.rw;
		/* h/d >= need_h unrounded, as PIL's draft() picks its scale */
		for (int d = 8; d >= 2; d /= 2) {
			tjscalingfactor f = {1, d};
			if ((uint64_t)need_h * d <= (uint64_t)h &&
			    (uint64_t)need_w * d <= (uint64_t)w) {
				sh = TJSCALED(h, f);
				sw = TJSCALED(w, f);
				break;
			}
		}
	}
	buf = malloc((size_t)sh * sw * cin);
	if (!buf) {
		sprite_image_err(err, name, "out of memory for %dx%d pixels", sh, sw);
		r = -ENOMEM;
		goto done;
	}
	/* Warnings (e.g. premature end of data) count as errors: a truncated
	 * photo is grey at the bottom and would train on garbage. */
	if (tjDecompress2(tj, data, (unsigned long)len, buf, sw, 0, sh,
			  cmyk	   ? TJPF_CMYK
			  : c == 1 ? TJPF_GRAY
				   : TJPF_RGB,
			  0) < 0) {
		sprite_image_err(err, name, "bad JPEG: %s", tjGetErrorStr2(tj));
		r = -SPRITE_ECORRUPT;
		goto done;
	}
	size_t n = (size_t)sh * sw;
	if (cmyk) {
		/*
		 * CMYK and YCCK JPEGs hold inverted inks (Photoshop's convention,
		 * which PIL assumes too): C' = 255 - C, K' = 255 - K are stored,
		 * so R = (255-C)(255-K)/255 = C'K'/255, rounded to nearest (a
		 * product of two bytes over 255 is never a half). No colour
		 * profile is applied.
		 */
		for (size_t i = 0; i < n; i++) {
			const uint8_t *s = buf + i * 4;
			unsigned k = s[3];
			uint8_t rgb[3];
			for (int j = 0; j < 3; j++)
				rgb[j] = (uint8_t)((s[j] * k + 127) / 255);
			memcpy(buf + i * 3, rgb, 3);
		}
	}
	if (o == 1) {
		/* upright as stored: the buffer is the image */
		uint8_t *shrunk = cmyk ? realloc(buf, n * c) : buf;
		out->px = shrunk ? shrunk : buf;
		out->h = (uint32_t)sh;
		out->w = (uint32_t)sw;
		out->c = c;
		buf = NULL;
		goto done;
	}
	r = sprite_image_alloc(out, o >= 5 ? (uint32_t)sw : (uint32_t)sh,
			       o >= 5 ? (uint32_t)sh : (uint32_t)sw, c, name, err);
	if (r < 0)
		goto done;
	orient(buf, (uint32_t)sh, (uint32_t)sw, c, o, out->px);
done:
	free(buf);
	tjDestroy(tj);
	return r;
}

/* ---- Netpbm (P5, P6, P7) ------------------------------------------------ */

/*
 * The binary Netpbm forms spritefs itself serves under by-class/ and
 * sheets/, and spritefs-pack --export --format pgm writes: P5 (gray), P6
 * (RGB) and P7 (PAM: depth 1-4, alpha by the background). There is no
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

int sprite_pnm_parse(const uint8_t *p, size_t len, const char *name, struct sprite_pnm *hd,
		     char *err)
{
	struct pnm_cursor c = {p, len, 2};
	char kind = len >= 2 ? (char)c.p[1] : 0;
	long w, h, depth, maxval;
	if (kind == '7') {
		if (pam_header(&c, &w, &h, &depth, &maxval) < 0 || w < 0 || h < 0 || depth < 0 ||
		    maxval < 0) {
			sprite_image_err(err, name, "bad PAM header");
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
			sprite_image_err(err, name, "bad P%c header", kind);
			return -SPRITE_ECORRUPT;
		}
		c.pos++;
	}
	if (depth < 1 || depth > 4 || maxval < 1 || maxval > 65535) {
		sprite_image_err(err, name, "unsupported Netpbm image: depth %ld, maxval %ld",
				 depth, maxval);
		return -ENOTSUP;
	}
	int r = sprite_image_check_dims((uint64_t)h, (uint64_t)w, name, err);
	if (r < 0)
		return r;
	hd->w = (uint32_t)w;
	hd->h = (uint32_t)h;
	hd->depth = (uint32_t)depth;
	hd->maxval = (uint32_t)maxval;
	hd->bps = maxval > 255 ? 2 : 1;
	hd->data_off = c.pos;
	hd->bg = 0;
	hd->as8 = 0;
	return 0;
}

/*
 * A sample of maxval 256..65535 to 8 bits: round(x * 255 / maxval), a half
 * to even, which is PIL's round(x / maxval * 255) for every x and maxval
 * (its PPM decoder's rule; the float and this agree on every half).
 */
static unsigned pnm_scale16(unsigned x, unsigned maxval)
{
	unsigned n = x * 255u, q = n / maxval, r = n % maxval;
	return q + (2 * r > maxval || (2 * r == maxval && (q & 1)));
}

void sprite_pnm_row(const struct sprite_pnm *hd, const uint8_t *s, uint8_t *out)
{
	uint32_t oc = hd->depth >= 3 ? 3 : 1, alpha = hd->depth == 2 || hd->depth == 4;
	for (uint32_t i = 0; i < hd->w; i++) {
		unsigned v[4];
		for (uint32_t k = 0; k < hd->depth; k++, s += hd->bps) {
			unsigned x = hd->bps == 2 ? (unsigned)s[0] << 8 | s[1] : s[0];
			if (x > hd->maxval)
				x = hd->maxval;
			/* to 8 bits: 255 (and a gray16 image's as8) as it is, others scaled */
			v[k] = hd->maxval == 255 || hd->as8 ? x
			       : hd->maxval < 255 ? (x * 255u + hd->maxval / 2) / hd->maxval
						  : pnm_scale16(x, hd->maxval);
		}
		for (uint32_t k = 0; k < oc; k++)
			out[i * oc + k] = alpha ? sprite_over_bg(v[k], v[hd->depth - 1], hd->bg,
								 oc == 1 ? 3 : k)
						: (uint8_t)v[k];
	}
}

static int decode_pnm(const void *data, size_t len, const char *name, uint32_t bg,
		      struct sprite_image *out, char *err)
{
	struct sprite_pnm hd;
	int r = sprite_pnm_parse(data, len, name, &hd, err);
	if (r < 0)
		return r;
	hd.bg = bg;
	uint64_t row = (uint64_t)hd.w * hd.depth * hd.bps, need = row * hd.h;
	if (need > len - hd.data_off) {
		sprite_image_err(err, name, "truncated: %llu bytes of samples, %llu present",
				 (unsigned long long)need, (unsigned long long)(len - hd.data_off));
		return -SPRITE_ECORRUPT;
	}
	uint32_t oc = hd.depth >= 3 ? 3 : 1;
	if ((r = sprite_image_alloc(out, hd.h, hd.w, oc, name, err)) < 0)
		return r;
	const uint8_t *s = (const uint8_t *)data + hd.data_off;
	if (sprite_pnm_gray16(&hd))
		hd.as8 = !sprite_16_over8(s, (size_t)hd.h * hd.w, 1, 1);
	for (uint32_t y = 0; y < hd.h; y++)
		sprite_pnm_row(&hd, s + y * row, out->px + (size_t)y * hd.w * oc);
	return 0;
}

/* ---- entry points ------------------------------------------------------ */

/*
 * Image kinds users have that are not decoded, named so that the reason
 * says which (an SVG is a drawing, not pixels); NULL for anything else.
 */
static const char *unsupported_kind(const uint8_t *p, size_t len)
{
	size_t i = 0;
	if (len >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF)
		i = 3; /* UTF-8 byte order mark */
	while (i < len && i < 64 && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
		i++;
	const char *t = (const char *)p + i;
	size_t n = len - i;
	if ((n >= 4 && !memcmp(t, "<svg", 4)) ||
	    (n >= 5 && !memcmp(t, "<?xml", 5) && memmem(t, n < 4096 ? n : 4096, "<svg", 4)))
		return "SVG (a vector drawing)";
	if (len >= 6 && (!memcmp(p, "GIF87a", 6) || !memcmp(p, "GIF89a", 6)))
		return "GIF";
	if (len >= 2 && p[0] == 'B' && p[1] == 'M')
		return "BMP";
	if (len >= 12 && !memcmp(p + 4, "ftyp", 4) &&
	    (!memcmp(p + 8, "heic", 4) || !memcmp(p + 8, "heix", 4) || !memcmp(p + 8, "avif", 4) ||
	     !memcmp(p + 8, "mif1", 4)))
		return "HEIF/AVIF";
	return NULL;
}

int sprite_image_decode(const void *data, size_t len, const char *name, struct sprite_image *out,
			char *err)
{
	return sprite_image_decode_for(data, len, name, 0, 0, SPRITE_FIT_STRETCH, 0, out, err);
}

int sprite_image_decode_for(const void *data, size_t len, const char *name, uint32_t th,
			    uint32_t tw, enum sprite_fit fit, uint32_t bg, struct sprite_image *out,
			    char *err)
{
	const uint8_t *p = data;
	out->px = NULL;
	out->h = out->w = out->c = 0;
	if (len == 0) {
		sprite_image_err(err, name, "empty file");
		return -SPRITE_ECORRUPT;
	}
	if (len >= 4 && ((p[0] == 'I' && p[1] == 'I' && (p[2] == 42 || p[2] == 43) && p[3] == 0) ||
			 (p[0] == 'M' && p[1] == 'M' && p[2] == 0 && (p[3] == 42 || p[3] == 43))))
		return sprite_tiff_decode(data, len, name, bg, out, err);
	if (len >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0)
		return decode_png(data, len, name, bg, out, err);
	if (len >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF)
		return decode_jpeg(data, len, name, th, tw, fit, out, err);
	if (len >= 3 && p[0] == 'P' && (p[1] == '5' || p[1] == '6' || p[1] == '7') &&
	    (p[2] == ' ' || p[2] == '\t' || p[2] == '\n' || p[2] == '\r'))
		return decode_pnm(data, len, name, bg, out, err);
	if (len >= 12 && !memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4))
		return sprite_webp_decode(data, len, name, bg, out, err);
	const char *kind = unsupported_kind(p, len);
	if (kind)
		sprite_image_err(err, name, "%s: not supported (PNG, TIFF, JPEG, WebP, PNM are)",
				 kind);
	else
		sprite_image_err(err, name, "not a PNG/TIFF/JPEG/PNM file");
	return -ENOTSUP;
}

int sprite_image_load(const char *path, struct sprite_image *out, char *err)
{
	return sprite_image_load_for(path, 0, 0, SPRITE_FIT_STRETCH, 0, out, err);
}

int sprite_image_load_for(const char *path, uint32_t th, uint32_t tw, enum sprite_fit fit,
			  uint32_t bg, struct sprite_image *out, char *err)
{
	out->px = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		sprite_image_err(err, path, "cannot open: %s", strerror(e));
		return -e;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		sprite_image_err(err, path, "cannot stat: %s", strerror(e));
		return -e;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		sprite_image_err(err, path, "not a regular file");
		return -EINVAL;
	}
	if ((uint64_t)st.st_size > IMAGE_MAX_FILE) {
		close(fd);
		sprite_image_err(err, path, "file too large (%lld bytes)", (long long)st.st_size);
		return -EFBIG;
	}
	size_t len = (size_t)st.st_size;
	/* Small files (the common case) are read into the stack. */
	uint8_t small[16384];
	uint8_t *buf = len <= sizeof small ? small : malloc(len ? len : 1);
	if (!buf) {
		close(fd);
		sprite_image_err(err, path, "out of memory");
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
			sprite_image_err(err, path, "read error: %s", strerror(e));
			return -e;
		}
		if (n == 0)
			break; /* shrank while reading: decode what is there */
		got += (size_t)n;
	}
	close(fd);
	int r = sprite_image_decode_for(buf, got, path, th, tw, fit, bg, out, err);
	if (buf != small)
		free(buf);
	return r;
}

/* ---- writers ----------------------------------------------------------- */

int sprite_png_write(const char *path, const uint8_t *px, uint32_t h, uint32_t w, uint32_t c,
		     char *err)
{
	struct sprite_outfile o;
	int r = sprite_outfile_open(&o, path, 0644, SPRITE_OUT_NOSYNC, err);
	if (r < 0)
		return r;
	r = sprite_png_write_fd(o.fd, path, px, h, w, c, err);
	if (r < 0) {
		sprite_outfile_abort(&o);
		return r;
	}
	return sprite_outfile_commit(&o, err);
}

int sprite_png_write_fd(int fd, const char *path, const uint8_t *px, uint32_t h, uint32_t w,
			uint32_t c, char *err)
{
	if (!px || h == 0 || w == 0 || (c != 1 && c != 3 && c != 4) ||
	    (uint64_t)h * w > SPRITE_IMAGE_MAX_PIXELS) {
		sprite_image_err(err, path, "bad image shape %ux%ux%u", h, w, c);
		return -EINVAL;
	}
	png_image img;
	memset(&img, 0, sizeof img);
	img.version = PNG_IMAGE_VERSION;
	img.width = w;
	img.height = h;
	img.format = c == 1 ? PNG_FORMAT_GRAY : c == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_RGBA;
	int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0); /* fclose closes it */
	FILE *f = dfd < 0 ? NULL : fdopen(dfd, "wb");
	if (!f) {
		int e = errno;
		if (dfd >= 0)
			close(dfd);
		sprite_image_err(err, path, "cannot write PNG: %s", strerror(e));
		return -e;
	}
	int ok = png_image_write_to_stdio(&img, f, 0, px, 0, NULL);
	if (!ok)
		sprite_image_err(err, path, "cannot write PNG: %s", img.message);
	png_image_free(&img);
	if (fclose(f) != 0 && ok) {
		sprite_image_err(err, path, "cannot write PNG: %s", strerror(errno));
		ok = 0;
	}
	return ok ? 0 : -EIO;
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
