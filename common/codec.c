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

static int decode_png(const void *data, size_t len, const char *name, struct sprite_image *out,
		      char *err)
{
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
	/* 16-bit files without gamma information are taken as sRGB, as other
	 * tools do (libpng would assume linear and brighten them); libpng then
	 * scales them to 8 bits with rounding rather than >> 8. */
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
			buf[i * c + k] = sprite_over_black(buf[i * cin + k], a);
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
		sprite_image_err(err, name, "cannot start the JPEG decoder");
		return -ENOMEM;
	}
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
	r = sprite_image_check_dims((uint64_t)h, (uint64_t)w, name, err);
	if (r < 0)
		goto done;
	if (cs == TJCS_CMYK || cs == TJCS_YCCK) {
		sprite_image_err(err, name, "CMYK JPEG is not supported");
		r = -ENOTSUP;
		goto done;
	}
	uint32_t c = cs == TJCS_GRAY ? 1 : 3;
	r = sprite_image_alloc(out, (uint32_t)h, (uint32_t)w, c, name, err);
	if (r < 0)
		goto done;
	/* Warnings (e.g. premature end of data) count as errors: a truncated
	 * photo is grey at the bottom and would train on garbage. */
	if (tjDecompress2(tj, data, (unsigned long)len, out->px, w, 0, h,
			  c == 1 ? TJPF_GRAY : TJPF_RGB, 0) < 0) {
		sprite_image_err(err, name, "bad JPEG: %s", tjGetErrorStr2(tj));
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
	size_t bps = maxval > 255 ? 2 : 1;
	uint64_t need = (uint64_t)h * (uint64_t)w * (uint64_t)depth * bps;
	if (need > len - c.pos) {
		sprite_image_err(err, name, "truncated: %llu bytes of samples, %llu present",
				 (unsigned long long)need, (unsigned long long)(len - c.pos));
		return -SPRITE_ECORRUPT;
	}
	uint32_t oc = depth >= 3 ? 3 : 1, alpha = depth == 2 || depth == 4;
	if ((r = sprite_image_alloc(out, (uint32_t)h, (uint32_t)w, oc, name, err)) < 0)
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
				alpha ? sprite_over_black(v[k], v[depth - 1]) : (uint8_t)v[k];
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
		sprite_image_err(err, name, "empty file");
		return -SPRITE_ECORRUPT;
	}
	if (len >= 4 && ((p[0] == 'I' && p[1] == 'I' && (p[2] == 42 || p[2] == 43) && p[3] == 0) ||
			 (p[0] == 'M' && p[1] == 'M' && p[2] == 0 && (p[3] == 42 || p[3] == 43))))
		return sprite_tiff_decode(data, len, name, out, err);
	if (len >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0)
		return decode_png(data, len, name, out, err);
	if (len >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF)
		return decode_jpeg(data, len, name, out, err);
	if (len >= 3 && p[0] == 'P' && (p[1] == '5' || p[1] == '6' || p[1] == '7') &&
	    (p[2] == ' ' || p[2] == '\t' || p[2] == '\n' || p[2] == '\r'))
		return decode_pnm(data, len, name, out, err);
	sprite_image_err(err, name, "not a PNG/TIFF/JPEG/PNM file");
	return -ENOTSUP;
}

int sprite_image_load(const char *path, struct sprite_image *out, char *err)
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
	int r = sprite_image_decode(buf, got, path, out, err);
	if (buf != small)
		free(buf);
	return r;
}

/* ---- writers ----------------------------------------------------------- */

int sprite_png_write(const char *path, const uint8_t *px, uint32_t h, uint32_t w, uint32_t c,
		     char *err)
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
	if (!png_image_write_to_file(&img, path, 0, px, 0, NULL)) {
		sprite_image_err(err, path, "cannot write PNG: %s", img.message);
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
