/*
 * test_image.c - the image decoders, the fit rule, IDX loading and the
 * writers (common/image.h); the TIFF layouts are test_tiff.c's.
 *
 * Files are made here with libpng and libturbojpeg themselves, PNG gray / gray+
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
#include "tests/image_util.h"

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
		uint8_t *white = malloc((size_t)h * w * cout);
		for (uint32_t y = 0; y < h; y++)
			for (uint32_t x = 0; x < w; x++) {
				uint8_t a = alpha_at(y, x);
				for (uint32_t ch = 0; ch < cout; ch++) {
					px[(y * w + x) * cin + ch] = pat(y, x, ch);
					/* alpha dropped, the colours as stored (PIL's convert) */
					want[(y * w + x) * cout + ch] = pat(y, x, ch);
					white[(y * w + x) * cout + ch] =
						cin > cout ? over_white(pat(y, x, ch), a)
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
		if (sprite_image_load_for(path, 0, 0, SPRITE_FIT_STRETCH,
					  SPRITE_BG_RGB(255, 255, 255), &im, err) < 0) {
			fail("%s on white: %s", what, err);
		} else {
			check_image(what, &im, white, h, w, cout, 0);
			sprite_image_free(&im);
		}
		check_damage(what, path, 0);
		free(px);
		free(want);
		free(white);
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
 * P5, P6 and P7 (depth 1-4) at maxval 255, 65535, 1023 and 15, with comments
 * in the header: each against the pixels it encodes (alpha dropped, the
 * colours as stored, and again composited on white; maxvals other than 255
 * scaled with rounding, but a gray maxval-65535 image whose samples all fit
 * in 8 bits taken as stored, docs/FORMAT.md); then damage.
 */
static void test_pnm(void)
{
	const uint32_t h = 5, w = 7;
	char path[512], err[SPRITE_ERR_MAX];
	static const struct {
		const char *name;
		int kind, depth; /* kind 5, 6 or 7 */
		unsigned maxval;
		int small; /* 16-bit samples that fit in 8 bits */
	} cases[] = {
		{"gray.pgm", 5, 1, 255, 0},	 {"rgb.ppm", 6, 3, 255, 0},
		{"gray16.pgm", 5, 1, 65535, 0},	 {"gray16s.pgm", 5, 1, 65535, 1},
		{"rgb16s.ppm", 6, 3, 65535, 1},	 {"rgb10.ppm", 6, 3, 1023, 0},
		{"rgb15.ppm", 6, 3, 15, 0},	 {"gray.pam", 7, 1, 255, 0},
		{"graya.pam", 7, 2, 255, 0},	 {"rgb.pam", 7, 3, 255, 0},
		{"rgba.pam", 7, 4, 255, 0},	 {"rgba16.pam", 7, 4, 65535, 0},
		{"gray16s.pam", 7, 1, 65535, 1},
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		int d = cases[k].depth, bps = cases[k].maxval > 255 ? 2 : 1;
		unsigned mv = cases[k].maxval;
		uint8_t buf[512 + 5 * 7 * 4 * 2], want[5 * 7 * 3], white[5 * 7 * 3];
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
					unsigned s = mv == 255 || cases[k].small ? v
						     : mv == 65535 ? v * 257 + (x & 1) * 3
								   : v * mv / 255;
					/* gray: as stored when small; colour: scaled (odd
					 * maxvals: no halves to round) */
					v8[ch] = mv == 255 || (cases[k].small && d == 1)
							 ? s
							 : (s * 255 + mv / 2) / mv;
					if (bps == 2)
						buf[len++] = (uint8_t)(s >> 8);
					buf[len++] = (uint8_t)s;
				}
				for (uint32_t ch = 0; ch < oc; ch++) {
					want[(y * w + x) * oc + ch] = (uint8_t)v8[ch];
					white[(y * w + x) * oc + ch] =
						d == 2 || d == 4 ? over_white(v8[ch], v8[d - 1])
								 : (uint8_t)v8[ch];
				}
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
		if (sprite_image_load_for(path, 0, 0, SPRITE_FIT_STRETCH,
					  SPRITE_BG_RGB(255, 255, 255), &im, err) < 0) {
			fail("%s on white: %s", cases[k].name, err);
			continue;
		}
		check_image(cases[k].name, &im, white, h, w, oc, 0);
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
	if (tmpdir_make("test_image") < 0)
		return 1;
	test_png();
	test_png16();
	test_jpeg();
	test_garbage();
	test_pnm();
	test_fit();
	test_idx();
	test_writers();
	return tmpdir_finish("test_image");
}
