/*
 * test_image.c - the image decoders, the fit rule, IDX loading and the
 * writers (common/image.h).
 *
 * Files are made here with libtiff, libpng and libturbojpeg themselves, for
 * every TIFF layout spritefs-pack promises (8/16 bit; gray, min-is-white,
 * RGB, gray+alpha, RGBA associated/unassociated, palette; none, LZW, Deflate,
 * PackBits; strips of several rows, tiles, separate planes), PNG gray / gray+
 * alpha / RGB / RGBA, JPEG gray / RGB, and Netpbm P5/P6/P7 (written here
 * byte by byte: depth 1-4, maxval 255, 65535 and 15), and decoded pixels are compared
 * with the values the test wrote (exactly for lossless formats, within a
 * tolerance for JPEG). Truncated and corrupt copies of every file must give
 * an error naming the file, never a crash or a silent success.
 */
#include <errno.h>
#include <fcntl.h>
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

#include "common/image.h"
#include "common/store.h"

static int failures;
static char tmpdir[256];

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "FAIL: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	failures++;
}

static void tpath(char *buf, size_t cap, const char *name)
{
	snprintf(buf, cap, "%s/%s", tmpdir, name);
}

static uint8_t *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return b;
}

static void write_all(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(1);
	}
	fclose(f);
}

/* The 8-bit value the test puts at (y, x, channel). */
static uint8_t pat(uint32_t y, uint32_t x, uint32_t ch)
{
	return (uint8_t)(x * 17 + y * 29 + ch * 71 + (x * y) % 13);
}

/* Alpha that varies, with fully opaque and fully clear pixels included. */
static uint8_t alpha_at(uint32_t y, uint32_t x)
{
	uint32_t v = (x * 31 + y * 7) % 300;
	return v > 255 ? 255 : (uint8_t)v;
}

static uint8_t over_black(unsigned v, unsigned a)
{
	return (uint8_t)((v * a + 127) / 255);
}

/* ---- TIFF matrix -------------------------------------------------------- */

enum kind { K_GRAY, K_WHITE, K_GRAYA, K_RGB, K_RGBA_U, K_RGBA_A, K_PALETTE, NKIND };
static const char *const kind_name[] = {"gray",		"min-is-white", "gray+alpha", "rgb",
					"rgba-unassoc", "rgba-assoc",	"palette"};

struct tcase {
	enum kind kind;
	int bps;
	int comp;
	int tiled;
	int separate;
	uint32_t rps;
};

static int kind_spp(enum kind k)
{
	switch (k) {
	case K_GRAY:
	case K_WHITE:
	case K_PALETTE:
		return 1;
	case K_GRAYA:
		return 2;
	case K_RGB:
		return 3;
	default:
		return 4;
	}
}

/* Expected decoded image (c 1 or 3) for a case. */
static void expected(const struct tcase *tc, uint32_t h, uint32_t w, uint8_t *out, uint32_t *c)
{
	*c = (tc->kind == K_GRAY || tc->kind == K_WHITE || tc->kind == K_GRAYA) ? 1 : 3;
	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++)
			for (uint32_t ch = 0; ch < *c; ch++) {
				uint8_t v = pat(y, x, ch);
				if (tc->kind == K_PALETTE)
					v = pat(0, pat(y, x, 0), ch); /* colour map entry */
				if (tc->kind == K_GRAYA || tc->kind == K_RGBA_U ||
				    tc->kind == K_RGBA_A)
					v = over_black(v, alpha_at(y, x));
				out[(y * w + x) * *c + ch] = v;
			}
}

static int write_case(const char *path, const struct tcase *tc, uint32_t h, uint32_t w)
{
	TIFF *t = TIFFOpen(path, "w");
	if (!t)
		return -1;
	int spp = kind_spp(tc->kind), bps = tc->bps;
	TIFFSetField(t, TIFFTAG_IMAGEWIDTH, w);
	TIFFSetField(t, TIFFTAG_IMAGELENGTH, h);
	TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, bps);
	TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, spp);
	TIFFSetField(t, TIFFTAG_COMPRESSION, tc->comp);
	TIFFSetField(t, TIFFTAG_PLANARCONFIG,
		     tc->separate ? PLANARCONFIG_SEPARATE : PLANARCONFIG_CONTIG);
	uint16_t photo = tc->kind == K_WHITE	 ? PHOTOMETRIC_MINISWHITE
			 : tc->kind == K_PALETTE ? PHOTOMETRIC_PALETTE
			 : spp >= 3		 ? PHOTOMETRIC_RGB
						 : PHOTOMETRIC_MINISBLACK;
	TIFFSetField(t, TIFFTAG_PHOTOMETRIC, photo);
	if (spp == 2 || spp == 4) {
		uint16_t ex =
			tc->kind == K_RGBA_A ? EXTRASAMPLE_ASSOCALPHA : EXTRASAMPLE_UNASSALPHA;
		TIFFSetField(t, TIFFTAG_EXTRASAMPLES, 1, &ex);
	}
	if (tc->kind == K_PALETTE) {
		uint16_t r[256], g[256], b[256];
		for (int i = 0; i < 256; i++) {
			r[i] = (uint16_t)(pat(0, (uint32_t)i, 0) * 257);
			g[i] = (uint16_t)(pat(0, (uint32_t)i, 1) * 257);
			b[i] = (uint16_t)(pat(0, (uint32_t)i, 2) * 257);
		}
		TIFFSetField(t, TIFFTAG_COLORMAP, r, g, b);
	}
	/* Samples: the pattern; alpha in the last channel; 16 bit puts noise in
	 * the low byte, which decoding must drop (>> 8). */
	size_t bpsb = (size_t)bps / 8;
	size_t rowbytes = (size_t)w * spp * bpsb;
	uint8_t *img = calloc(h, rowbytes);
	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++)
			for (int ch = 0; ch < spp; ch++) {
				unsigned v;
				if ((spp == 2 || spp == 4) && ch == spp - 1)
					v = alpha_at(y, x);
				else if (tc->kind == K_RGBA_A)
					v = over_black(pat(y, x, (uint32_t)ch), alpha_at(y, x));
				else if (tc->kind == K_WHITE)
					v = 255 - pat(y, x, 0);
				else
					v = pat(y, x, (uint32_t)ch);
				size_t at = (size_t)y * w * spp + (size_t)x * spp + (size_t)ch;
				if (bps == 8) {
					img[at] = (uint8_t)v;
				} else {
					uint16_t v16 = (uint16_t)(v << 8 | ((x * 37 + y) & 0xff));
					memcpy(img + 2 * at, &v16, 2);
				}
			}
	int ok = 1;
	if (tc->tiled) {
		uint32_t tw = 16, th = 16;
		TIFFSetField(t, TIFFTAG_TILEWIDTH, tw);
		TIFFSetField(t, TIFFTAG_TILELENGTH, th);
		uint8_t *tile = calloc(1, TIFFTileSize(t));
		for (uint32_t ty = 0; ty < h; ty += th)
			for (uint32_t tx = 0; tx < w; tx += tw) {
				memset(tile, 0, TIFFTileSize(t));
				for (uint32_t y = 0; y < th && ty + y < h; y++)
					for (uint32_t x = 0; x < tw && tx + x < w; x++)
						memcpy(tile + ((size_t)y * tw + x) * spp * bpsb,
						       img + (size_t)(ty + y) * rowbytes +
							       (size_t)(tx + x) * spp * bpsb,
						       spp * bpsb);
				if (TIFFWriteTile(t, tile, tx, ty, 0, 0) < 0)
					ok = 0;
			}
		free(tile);
	} else if (tc->separate) {
		TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, tc->rps);
		uint8_t *row = malloc((size_t)w * bpsb);
		for (int s = 0; s < spp; s++)
			for (uint32_t y = 0; y < h; y++) {
				for (uint32_t x = 0; x < w; x++)
					memcpy(row + x * bpsb,
					       img + (size_t)y * rowbytes +
						       ((size_t)x * spp + s) * bpsb,
					       bpsb);
				if (TIFFWriteScanline(t, row, y, (uint16_t)s) < 0)
					ok = 0;
			}
		free(row);
	} else {
		TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, tc->rps);
		for (uint32_t y = 0; y < h; y++)
			if (TIFFWriteScanline(t, img + (size_t)y * rowbytes, y, 0) < 0)
				ok = 0;
	}
	TIFFClose(t);
	free(img);
	return ok ? 0 : -1;
}

static void check_image(const char *what, const struct sprite_image *im, const uint8_t *want,
			uint32_t h, uint32_t w, uint32_t c, int tol)
{
	if (im->h != h || im->w != w || im->c != c) {
		fail("%s: shape %ux%ux%u, want %ux%ux%u", what, im->h, im->w, im->c, h, w, c);
		return;
	}
	for (size_t i = 0; i < (size_t)h * w * c; i++) {
		int d = (int)im->px[i] - (int)want[i];
		if (d < -tol || d > tol) {
			fail("%s: pixel %zu (y %zu x %zu ch %zu) is %u, want %u", what, i,
			     i / c / w, i / c % w, i % c, im->px[i], want[i]);
			return;
		}
	}
}

/* Every truncation point and a few corruptions must give an error. */
static void check_damage(const char *what, const char *path, int lossy_tail_ok)
{
	size_t len;
	uint8_t *b = read_all(path, &len);
	if (!b) {
		fail("%s: cannot read back %s", what, path);
		return;
	}
	char dpath[512], err[SPRITE_ERR_MAX];
	tpath(dpath, sizeof dpath, "damaged");
	struct sprite_image im;
	/* Truncations: header only, one third, two thirds. */
	size_t cuts[] = {8, len / 3, 2 * len / 3};
	for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
		if (cuts[k] >= len)
			continue;
		write_all(dpath, b, cuts[k]);
		err[0] = 0;
		int r = sprite_image_load(dpath, &im, err);
		if (r == 0) {
			sprite_image_free(&im);
			if (!lossy_tail_ok)
				fail("%s: truncated to %zu of %zu bytes decodes without error",
				     what, cuts[k], len);
		} else if (!strstr(err, dpath)) {
			fail("%s: error '%s' does not name the file", what, err);
		}
	}
	/* Random bytes after the magic: must not crash (an error or, rarely, a
	 * decodable image are both fine for garbage). */
	uint8_t *g = malloc(len);
	memcpy(g, b, len);
	srand(7);
	for (size_t i = 8; i < len; i++)
		g[i] = (uint8_t)rand();
	write_all(dpath, g, len);
	if (sprite_image_load(dpath, &im, err) == 0)
		sprite_image_free(&im);
	/* Flipped bytes everywhere, one at a time in a stride. */
	for (size_t i = 0; i < len; i += len / 40 + 1) {
		memcpy(g, b, len);
		g[i] ^= 0xA5;
		write_all(dpath, g, len);
		if (sprite_image_load(dpath, &im, err) == 0)
			sprite_image_free(&im);
	}
	free(g);
	free(b);
}

static void test_tiff_matrix(void)
{
	static const int comps[] = {COMPRESSION_NONE, COMPRESSION_LZW, COMPRESSION_ADOBE_DEFLATE,
				    COMPRESSION_PACKBITS};
	static const char *const comp_name[] = {"none", "lzw", "deflate", "packbits"};
	const uint32_t h = 37, w = 45;
	uint8_t *want = malloc((size_t)h * w * 3);
	char path[512], what[160], err[SPRITE_ERR_MAX];
	int n = 0;
	for (int k = 0; k < NKIND; k++)
		for (int bps = 8; bps <= 16; bps += 8)
			for (int ci = 0; ci < 4; ci++)
				for (int layout = 0; layout < 4; layout++) {
					/* layout: 0 one strip, 1 strips of 5 rows, 2 tiles,
					 * 3 separate planes (multi-sample only). */
					struct tcase tc = {(enum kind)k, bps,
							   comps[ci],	 layout == 2,
							   layout == 3,	 layout == 1 ? 5 : h};
					if (k == K_PALETTE && bps == 16)
						continue;
					if (layout == 3 && kind_spp(tc.kind) == 1)
						continue;
					snprintf(what, sizeof what, "tiff %s %d-bit %s %s",
						 kind_name[k], bps, comp_name[ci],
						 layout == 0   ? "strip"
						 : layout == 1 ? "strips"
						 : layout == 2 ? "tiled"
							       : "planar");
					tpath(path, sizeof path, "case.tif");
					if (write_case(path, &tc, h, w) < 0) {
						fail("%s: cannot write the test file", what);
						continue;
					}
					uint32_t c;
					expected(&tc, h, w, want, &c);
					struct sprite_image im;
					err[0] = 0;
					if (sprite_image_load(path, &im, err) < 0) {
						fail("%s: %s", what, err);
						continue;
					}
					int tol = 0;
					check_image(what, &im, want, h, w, c, tol);
					sprite_image_free(&im);
					if (layout == 1 && ci != 1)
						check_damage(what, path, 0);
					n++;
				}
	printf("tiff: %d variants decoded\n", n);
	free(want);
}

/* ---- PNG / JPEG ---------------------------------------------------------- */

static void test_png(void)
{
	const uint32_t h = 23, w = 31;
	static const struct {
		uint32_t fmt, cin, cout;
		const char *name;
	} cases[] = {
		{PNG_FORMAT_GRAY, 1, 1, "gray"},
		{PNG_FORMAT_GA, 2, 1, "gray+alpha"},
		{PNG_FORMAT_RGB, 3, 3, "rgb"},
		{PNG_FORMAT_RGBA, 4, 3, "rgba"},
	};
	char path[512], err[SPRITE_ERR_MAX], what[64];
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		uint32_t cin = cases[k].cin, cout = cases[k].cout;
		uint8_t *px = malloc((size_t)h * w * cin), *want = malloc((size_t)h * w * cout);
		for (uint32_t y = 0; y < h; y++)
			for (uint32_t x = 0; x < w; x++) {
				uint8_t a = alpha_at(y, x);
				for (uint32_t ch = 0; ch < cout; ch++) {
					px[(y * w + x) * cin + ch] = pat(y, x, ch);
					want[(y * w + x) * cout + ch] =
						cin > cout ? over_black(pat(y, x, ch), a)
							   : pat(y, x, ch);
				}
				if (cin > cout)
					px[(y * w + x) * cin + cout] = a;
			}
		png_image img;
		memset(&img, 0, sizeof img);
		img.version = PNG_IMAGE_VERSION;
		img.width = w;
		img.height = h;
		img.format = cases[k].fmt;
		tpath(path, sizeof path, "case.png");
		snprintf(what, sizeof what, "png %s", cases[k].name);
		if (!png_image_write_to_file(&img, path, 0, px, 0, NULL)) {
			fail("%s: cannot write: %s", what, img.message);
			continue;
		}
		struct sprite_image im;
		if (sprite_image_load(path, &im, err) < 0) {
			fail("%s: %s", what, err);
		} else {
			check_image(what, &im, want, h, w, cout, 0);
			sprite_image_free(&im);
		}
		check_damage(what, path, 0);
		free(px);
		free(want);
	}
}

/* A 16-bit gray PNG written with libpng's full API (no gamma chunk). */
static void test_png16(void)
{
	const uint32_t h = 9, w = 11;
	char path[512], err[SPRITE_ERR_MAX];
	uint8_t want[9 * 11];
	tpath(path, sizeof path, "g16.png");
	FILE *f = fopen(path, "wb");
	png_structp pp = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop pi = png_create_info_struct(pp);
	if (!f || !pp || !pi || setjmp(png_jmpbuf(pp))) {
		fail("png16: cannot write");
		return;
	}
	png_init_io(pp, f);
	png_set_IHDR(pp, pi, w, h, 16, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
		     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	png_write_info(pp, pi);
	uint8_t row[11 * 2];
	for (uint32_t y = 0; y < h; y++) {
		for (uint32_t x = 0; x < w; x++) {
			uint8_t v = pat(y, x, 0);
			want[y * w + x] = v;
			row[2 * x] = v; /* big-endian: high byte first */
			row[2 * x + 1] = (uint8_t)(x * 23 + y);
		}
		png_write_row(pp, row);
	}
	png_write_end(pp, NULL);
	png_destroy_write_struct(&pp, &pi);
	fclose(f);
	struct sprite_image im;
	if (sprite_image_load(path, &im, err) < 0) {
		fail("png16: %s", err);
		return;
	}
	check_image("png 16-bit gray", &im, want, h, w, 1, 1);
	sprite_image_free(&im);
}

static void test_jpeg(void)
{
	const int h = 40, w = 48;
	char path[512], err[SPRITE_ERR_MAX], what[64];
	for (int c = 1; c <= 3; c += 2) {
		uint8_t *px = malloc((size_t)h * w * c);
		/* Smooth content: JPEG keeps it within a few levels. */
		for (int y = 0; y < h; y++)
			for (int x = 0; x < w; x++)
				for (int ch = 0; ch < c; ch++)
					px[(y * w + x) * c + ch] =
						(uint8_t)(20 + x * 2 + y * 2 + ch * 20);
		tjhandle tj = tjInitCompress();
		unsigned char *jpg = NULL;
		unsigned long jl = 0;
		if (tjCompress2(tj, px, w, 0, h, c == 1 ? TJPF_GRAY : TJPF_RGB, &jpg, &jl,
				c == 1 ? TJSAMP_GRAY : TJSAMP_444, 95, 0) < 0) {
			fail("jpeg: cannot encode: %s", tjGetErrorStr2(tj));
			tjDestroy(tj);
			free(px);
			continue;
		}
		tjDestroy(tj);
		tpath(path, sizeof path, "case.jpg");
		write_all(path, jpg, jl);
		tjFree(jpg);
		snprintf(what, sizeof what, "jpeg %s", c == 1 ? "gray" : "rgb");
		struct sprite_image im;
		if (sprite_image_load(path, &im, err) < 0) {
			fail("%s: %s", what, err);
		} else {
			check_image(what, &im, px, (uint32_t)h, (uint32_t)w, (uint32_t)c, 10);
			sprite_image_free(&im);
		}
		check_damage(what, path, 0);
		free(px);
	}
}

static void test_garbage(void)
{
	char path[512], err[SPRITE_ERR_MAX];
	struct sprite_image im;
	static const struct {
		const char *name, *data;
		size_t len;
		const char *want;
	} cases[] = {
		{"empty.tif", "", 0, "empty"},
		{"text.png", "hello, world\n", 13, "not a PNG/TIFF/JPEG/PNM"},
		{"magic-only.pgm", "P5\n", 3, "bad P5 header"},
		{"no-maxval.pgm", "P5 2 2\n", 7, "bad P5 header"},
		{"maxval0.pgm", "P5 1 1 0\n\x00", 10, "maxval 0"},
		{"maxval-big.pgm", "P5 1 1 65536\n\x00\x00", 15, "maxval 65536"},
		{"huge.ppm", "P6 100000 100000 255\n", 21, "too large"},
		{"long-number.pgm", "P5 1234567890 1 255\n", 20, "bad P5 header"},
		{"short.ppm", "P6 2 2 255\n\x01\x02\x03", 14, "truncated"},
		{"pam-depth5.pam",
		 "P7\nWIDTH 1\nHEIGHT 1\nDEPTH 5\nMAXVAL 255\nENDHDR\n\x00\x00\x00\x00\x00", 49,
		 "depth 5"},
		{"pam-no-end.pam", "P7\nWIDTH 1\nHEIGHT 1\nDEPTH 1\nMAXVAL 255\n", 37,
		 "bad PAM header"},
		{"pam-bad-key.pam", "P7\nWIDTH 1\nCOLOUR 3\nENDHDR\n", 28, "bad PAM header"},
		{"magic-only.tif", "II*\0", 4, "TIFF"},
		{"magic-only.png", "\x89PNG\r\n\x1a\n", 8, "PNG"},
		{"magic-only.jpg", "\xff\xd8\xff", 3, "JPEG"},
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		tpath(path, sizeof path, cases[k].name);
		write_all(path, cases[k].data, cases[k].len);
		err[0] = 0;
		if (sprite_image_load(path, &im, err) == 0) {
			fail("%s decodes", cases[k].name);
			sprite_image_free(&im);
		} else if (!strstr(err, path) || !strstr(err, cases[k].want)) {
			fail("%s: error '%s' should name the file and say '%s'", cases[k].name, err,
			     cases[k].want);
		}
	}
	/* A TIFF whose header claims 100000x100000 pixels: refused before any
	 * allocation of that size. */
	tpath(path, sizeof path, "huge.tif");
	TIFF *t = TIFFOpen(path, "w");
	TIFFSetField(t, TIFFTAG_IMAGEWIDTH, 100000);
	TIFFSetField(t, TIFFTAG_IMAGELENGTH, 100000);
	TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 8);
	TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, 1);
	TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
	TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 1);
	uint8_t row[16] = {0};
	TIFFWriteRawStrip(t, 0, row, sizeof row);
	TIFFClose(t);
	err[0] = 0;
	if (sprite_image_load(path, &im, err) == 0) {
		fail("huge.tif decodes");
		sprite_image_free(&im);
	} else if (!strstr(err, "too large")) {
		fail("huge.tif: error '%s' should say too large", err);
	}
	tpath(path, sizeof path, "missing.png");
	if (sprite_image_load(path, &im, err) != -ENOENT)
		fail("a missing file should give -ENOENT");
}

/* ---- Netpbm ------------------------------------------------------------ */

/*
 * P5, P6 and P7 (depth 1-4) at maxval 255, 65535 and 15, with comments in
 * the header: each against the pixels it encodes (alpha composited on black,
 * 16-bit >> 8, other maxvals scaled with rounding); then damage.
 */
static void test_pnm(void)
{
	const uint32_t h = 5, w = 7;
	char path[512], err[SPRITE_ERR_MAX];
	static const struct {
		const char *name;
		int kind, depth; /* kind 5, 6 or 7 */
		unsigned maxval;
	} cases[] = {
		{"gray.pgm", 5, 1, 255}, {"rgb.ppm", 6, 3, 255},  {"gray16.pgm", 5, 1, 65535},
		{"rgb15.ppm", 6, 3, 15}, {"gray.pam", 7, 1, 255}, {"graya.pam", 7, 2, 255},
		{"rgb.pam", 7, 3, 255},	 {"rgba.pam", 7, 4, 255}, {"rgba16.pam", 7, 4, 65535},
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		int d = cases[k].depth, bps = cases[k].maxval > 255 ? 2 : 1;
		unsigned mv = cases[k].maxval;
		uint8_t buf[512 + 5 * 7 * 4 * 2], want[5 * 7 * 3];
		int n = cases[k].kind == 7
				? snprintf((char *)buf, 512,
					   "P7\n# a comment\nWIDTH %u\nHEIGHT %u\nDEPTH %d\n"
					   "MAXVAL %u\nTUPLTYPE ANY\nENDHDR\n",
					   w, h, d, mv)
				: snprintf((char *)buf, 512,
					   "P%d\n# made by test_image\n%u %u\n%u\n", cases[k].kind,
					   w, h, mv);
		size_t len = (size_t)n;
		uint32_t oc = d >= 3 ? 3 : 1;
		for (uint32_t y = 0; y < h; y++)
			for (uint32_t x = 0; x < w; x++) {
				unsigned v8[4];
				for (int ch = 0; ch < d; ch++) {
					int is_alpha = (d == 2 || d == 4) && ch == d - 1;
					unsigned v =
						is_alpha ? alpha_at(y, x) : pat(y, x, (uint32_t)ch);
					unsigned s = mv == 255	   ? v
						     : mv == 65535 ? v * 257 + (x & 1) * 3
								   : v * mv / 255;
					v8[ch] = mv == 255     ? s
						 : mv == 65535 ? s >> 8
							       : (s * 255 + mv / 2) / mv;
					if (bps == 2)
						buf[len++] = (uint8_t)(s >> 8);
					buf[len++] = (uint8_t)s;
				}
				for (uint32_t ch = 0; ch < oc; ch++)
					want[(y * w + x) * oc + ch] =
						d == 2 || d == 4 ? over_black(v8[ch], v8[d - 1])
								 : (uint8_t)v8[ch];
			}
		tpath(path, sizeof path, cases[k].name);
		write_all(path, buf, len);
		struct sprite_image im;
		err[0] = 0;
		if (sprite_image_load(path, &im, err) < 0) {
			fail("%s: %s", cases[k].name, err);
			continue;
		}
		check_image(cases[k].name, &im, want, h, w, oc, 0);
		sprite_image_free(&im);
		check_damage(cases[k].name, path, 0);
	}
}

/* ---- fit --------------------------------------------------------------- */

static void test_fit(void)
{
	uint8_t tile[64];
	/* gray -> RGB replicates */
	uint8_t g[4] = {0, 100, 200, 255};
	struct sprite_image im = {2, 2, 1, g};
	if (sprite_image_fit(&im, 2, 2, 3, SPRITE_FIT_STRETCH, tile) < 0)
		fail("fit gray->rgb failed");
	for (int i = 0; i < 4; i++)
		if (tile[3 * i] != g[i] || tile[3 * i + 1] != g[i] || tile[3 * i + 2] != g[i])
			fail("fit gray->rgb pixel %d: %u %u %u", i, tile[3 * i], tile[3 * i + 1],
			     tile[3 * i + 2]);
	/* RGB -> gray by BT.601 luma */
	uint8_t rgb[12] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 200, 30};
	struct sprite_image im3 = {2, 2, 3, rgb};
	static const uint8_t lum[4] = {76, 150, 29, 124}; /* .299*255, .587*255, .114*255, ... */
	if (sprite_image_fit(&im3, 2, 2, 1, SPRITE_FIT_STRETCH, tile) < 0)
		fail("fit rgb->gray failed");
	for (int i = 0; i < 4; i++)
		if (tile[i] != lum[i])
			fail("fit rgb->gray pixel %d: %u want %u", i, tile[i], lum[i]);
	/* Shrink 4x4 -> 2x2: each output is the mean of a 2x2 block. */
	uint8_t s4[16];
	for (int i = 0; i < 16; i++)
		s4[i] = (uint8_t)(i * 16);
	struct sprite_image im4 = {4, 4, 1, s4};
	if (sprite_image_fit(&im4, 2, 2, 1, SPRITE_FIT_STRETCH, tile) < 0)
		fail("fit shrink failed");
	for (int oy = 0; oy < 2; oy++)
		for (int ox = 0; ox < 2; ox++) {
			int a = oy * 8 + ox * 2;
			int sum = s4[a] + s4[a + 1] + s4[a + 4] + s4[a + 5];
			int want = (sum + 2) / 4;
			if (abs(tile[oy * 2 + ox] - want) > 0)
				fail("fit shrink (%d,%d): %u want %d", oy, ox, tile[oy * 2 + ox],
				     want);
		}
	/* Shrink 1x3 -> 1x2: area weights (0, 90*.5)/1.5 and (90*.5, 180)/1.5. */
	uint8_t s3[3] = {0, 90, 180};
	struct sprite_image im5 = {1, 3, 1, s3};
	sprite_image_fit(&im5, 1, 2, 1, SPRITE_FIT_STRETCH, tile);
	if (tile[0] != 30 || tile[1] != 150)
		fail("fit area 3->2: %u %u want 30 150", tile[0], tile[1]);
	/* Enlarge 1x2 -> 1x4 bilinear with pixel centres: 0 64 191 255. */
	uint8_t s2[2] = {0, 255};
	struct sprite_image im6 = {1, 2, 1, s2};
	sprite_image_fit(&im6, 1, 4, 1, SPRITE_FIT_STRETCH, tile);
	if (tile[0] != 0 || tile[1] != 64 || tile[2] != 191 || tile[3] != 255)
		fail("fit bilinear 2->4: %u %u %u %u want 0 64 191 255", tile[0], tile[1], tile[2],
		     tile[3]);
	/* A constant image stays constant whatever the resize. */
	uint8_t cst[5 * 7 * 3];
	memset(cst, 77, sizeof cst);
	struct sprite_image im7 = {5, 7, 3, cst};
	uint8_t big[8 * 3 * 3];
	sprite_image_fit(&im7, 8, 3, 3, SPRITE_FIT_STRETCH, big);
	for (size_t i = 0; i < sizeof big; i++)
		if (big[i] != 77) {
			fail("fit constant 5x7 -> 8x3: byte %zu is %u", i, big[i]);
			break;
		}
	/* Bad arguments. */
	if (sprite_image_fit(&im, 0, 2, 1, SPRITE_FIT_STRETCH, tile) != -EINVAL ||
	    sprite_image_fit(&im, 2, 2, 2, SPRITE_FIT_STRETCH, tile) != -EINVAL)
		fail("fit accepts a bad tile shape");
}

/* ---- IDX --------------------------------------------------------------- */

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void test_idx(void)
{
	const uint32_t n = 5, h = 4, w = 3;
	uint8_t buf[16 + 5 * 4 * 3];
	put_be32(buf, 0x803);
	put_be32(buf + 4, n);
	put_be32(buf + 8, h);
	put_be32(buf + 12, w);
	for (uint32_t i = 0; i < n * h * w; i++)
		buf[16 + i] = (uint8_t)(i * 3);
	uint8_t lab[8 + 5];
	put_be32(lab, 0x801);
	put_be32(lab + 4, n);
	for (uint32_t i = 0; i < n; i++)
		lab[8 + i] = (uint8_t)(i % 3);
	char path[512], gzp[512], err[SPRITE_ERR_MAX];
	for (int gz = 0; gz < 2; gz++) {
		tpath(path, sizeof path, "x-images-idx3-ubyte");
		tpath(gzp, sizeof gzp, "x-images-idx3-ubyte.gz");
		if (gz) {
			gzFile f = gzopen(gzp, "wb");
			gzwrite(f, buf, sizeof buf);
			gzclose(f);
		} else {
			write_all(path, buf, sizeof buf);
		}
		uint32_t hh = 0, ww = 0;
		uint8_t *px = NULL;
		int64_t got = sprite_idx_load_images(gz ? gzp : path, &hh, &ww, &px, err);
		if (got != n || hh != h || ww != w) {
			fail("idx%s: got %lld %ux%u (%s)", gz ? ".gz" : "", (long long)got, hh, ww,
			     got < 0 ? err : "");
		} else if (memcmp(px, buf + 16, n * h * w)) {
			fail("idx%s: pixels differ", gz ? ".gz" : "");
		}
		free(px);
	}
	tpath(path, sizeof path, "x-labels-idx1-ubyte");
	write_all(path, lab, sizeof lab);
	uint8_t *l = NULL;
	if (sprite_idx_load_labels(path, &l, err) != n || memcmp(l, lab + 8, n))
		fail("idx labels: wrong");
	free(l);
	/* Labels file given as images: bad magic. */
	uint8_t *px = NULL;
	uint32_t hh, ww;
	if (sprite_idx_load_images(path, &hh, &ww, &px, err) != -SPRITE_EBADMAGIC ||
	    !strstr(err, "magic"))
		fail("idx: labels read as images should be bad magic (%s)", err);
	/* Truncated data. */
	tpath(path, sizeof path, "trunc-idx3-ubyte");
	write_all(path, buf, sizeof buf - 7);
	if (sprite_idx_load_images(path, &hh, &ww, &px, err) >= 0 || !strstr(err, "truncated"))
		fail("idx: truncated file not reported (%s)", err);
	/* A header claiming 2^32-1 images of 65536x65536 in a 16-byte file. */
	uint8_t lie[16];
	put_be32(lie, 0x803);
	put_be32(lie + 4, 0xffffffffu);
	put_be32(lie + 8, 16384);
	put_be32(lie + 12, 16384);
	tpath(path, sizeof path, "lie-idx3-ubyte");
	write_all(path, lie, sizeof lie);
	if (sprite_idx_load_images(path, &hh, &ww, &px, err) >= 0)
		fail("idx: lying header accepted");
	write_all(path, lie, 10);
	if (sprite_idx_load_images(path, &hh, &ww, &px, err) >= 0 || !strstr(err, "header"))
		fail("idx: short header not reported (%s)", err);
}

/* ---- writers ------------------------------------------------------------ */

static void test_writers(void)
{
	const uint32_t h = 19, w = 26;
	char path[512], err[SPRITE_ERR_MAX];
	for (uint32_t c = 1; c <= 3; c += 2) {
		uint8_t *px = malloc((size_t)h * w * c);
		for (uint32_t y = 0; y < h; y++)
			for (uint32_t x = 0; x < w; x++)
				for (uint32_t ch = 0; ch < c; ch++)
					px[(y * w + x) * c + ch] = pat(y, x, ch);
		static const int comps[] = {COMPRESSION_NONE, COMPRESSION_LZW,
					    COMPRESSION_ADOBE_DEFLATE};
		for (int k = 0; k < 4; k++) {
			struct sprite_image im;
			tpath(path, sizeof path, k < 3 ? "w.tif" : "w.png");
			int r = k < 3 ? sprite_tiff_write(path, px, h, w, c, comps[k], err)
				      : sprite_png_write(path, px, h, w, c, err);
			if (r < 0) {
				fail("writer %d c=%u: %s", k, c, err);
				continue;
			}
			if (sprite_image_load(path, &im, err) < 0) {
				fail("writer %d c=%u: read back: %s", k, c, err);
				continue;
			}
			check_image(k < 3 ? "tiff writer" : "png writer", &im, px, h, w, c, 0);
			sprite_image_free(&im);
		}
		free(px);
	}
	char hdr[SPRITE_PNM_HEADER_MAX];
	int n = sprite_pnm_header(hdr, sizeof hdr, 28, 30, 1);
	if (n != (int)strlen("P5\n30 28\n255\n") || memcmp(hdr, "P5\n30 28\n255\n", (size_t)n))
		fail("pnm header: '%.*s'", n > 0 ? n : 0, hdr);
	if (sprite_pnm_header(hdr, sizeof hdr, 2, 2, 3) < 0 || hdr[1] != '6')
		fail("pnm header for RGB should be P6");
	n = sprite_pnm_header(hdr, sizeof hdr, 2, 3, 2);
	if (n < 0 || strncmp(hdr, "P7\nWIDTH 3\nHEIGHT 2\nDEPTH 2\n", 27) ||
	    !strstr(hdr, "TUPLTYPE GRAYSCALE_ALPHA\nENDHDR\n"))
		fail("pnm header for gray+alpha should be PAM: '%.*s'", n > 0 ? n : 0, hdr);
	if (sprite_pnm_header(hdr, sizeof hdr, 2, 2, 4) < 0 || !strstr(hdr, "RGB_ALPHA"))
		fail("pnm header for RGBA should be PAM RGB_ALPHA");
	if (sprite_pnm_header(hdr, sizeof hdr, 2, 2, 5) != -EINVAL)
		fail("pnm header for 5 channels should fail");
	if (sprite_pnm_header(hdr, 8, 2, 2, 4) != -ENOSPC)
		fail("pnm header into a short buffer should say -ENOSPC");
	tpath(path, sizeof path, "no/such/dir/x.tif");
	uint8_t one = 0;
	if (sprite_tiff_write(path, &one, 1, 1, 1, COMPRESSION_NONE, err) >= 0)
		fail("tiff writer into a missing folder succeeded");
}

int main(void)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(tmpdir, sizeof tmpdir, "%s/test_image.XXXXXX", base);
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_tiff_matrix();
	test_png();
	test_png16();
	test_jpeg();
	test_garbage();
	test_pnm();
	test_fit();
	test_idx();
	test_writers();
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	if (failures) {
		fprintf(stderr, "test_image: %d failures\n", failures);
		return 1;
	}
	printf("test_image: ok\n");
	return 0;
}
