/*
 * test_tiff.c - the TIFF decoder over every layout spritefs-pack promises
 * (8/16 bit; gray, min-is-white, RGB, gray+alpha, RGBA associated and
 * unassociated, palette; none, LZW, Deflate, PackBits; strips of several
 * rows, tiles, separate planes), written here with libtiff itself; decoded
 * pixels must equal what was written (alpha dropped, and again on
 * --background white), and truncated and corrupt copies of
 * every file must give an error naming the file, never a crash or a silent
 * success. 16-bit gray whose samples all fit in 8 bits (#30): taken as
 * stored (docs/FORMAT.md), in one strip, strips, tiles and min-is-white,
 * from memory and by strips into a tile; one sample of 256 puts the whole
 * image back to high bytes.
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
#include "common/sample.h"
#include "common/store.h"
#include "tests/image_util.h"

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
/* white: on --background white; else alpha dropped, the colours as stored */
static void expected(const struct tcase *tc, uint32_t h, uint32_t w, int white, uint8_t *out,
		     uint32_t *c)
{
	*c = (tc->kind == K_GRAY || tc->kind == K_WHITE || tc->kind == K_GRAYA) ? 1 : 3;
	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++)
			for (uint32_t ch = 0; ch < *c; ch++) {
				uint8_t v = pat(y, x, ch);
				if (tc->kind == K_PALETTE)
					v = pat(0, pat(y, x, 0), ch); /* colour map entry */
				/* alpha dropped, the colours as stored: premultiplied ones too */
				unsigned a = alpha_at(y, x);
				if (white && (tc->kind == K_GRAYA || tc->kind == K_RGBA_U))
					v = over_white(v, a);
				else if (tc->kind == K_RGBA_A) {
					/* premultiplied: as stored, or white's share added */
					unsigned o = over_black(v, a) +
						     (white ? (255 * (255 - a) + 127) / 255 : 0);
					v = (uint8_t)(o > 255 ? 255 : o);
				}
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
					expected(&tc, h, w, 0, want, &c);
					struct sprite_image im;
					err[0] = 0;
					if (sprite_image_load(path, &im, err) < 0) {
						fail("%s: %s", what, err);
						continue;
					}
					int tol = 0;
					check_image(what, &im, want, h, w, c, tol);
					sprite_image_free(&im);
					expected(&tc, h, w, 1, want, &c);
					if (sprite_image_load_for(path, 0, 0, SPRITE_FIT_STRETCH,
								  SPRITE_BG_RGB(255, 255, 255), &im,
								  err) < 0) {
						fail("%s on white: %s", what, err);
						continue;
					}
					check_image(what, &im, want, h, w, c, tol);
					sprite_image_free(&im);
					if (layout == 1 && ci != 1)
						check_damage(what, path, 0);
					n++;
				}
	printf("tiff: %d variants decoded\n", n);
	free(want);
}

/* A 16-bit gray TIFF of values v(y, x) (at most 65535), rps rows a strip, or 16x16 tiles. */
static int write_gray16(const char *path, uint32_t h, uint32_t w, int white, uint32_t rps,
			int tiled, unsigned (*v)(uint32_t, uint32_t))
{
	TIFF *t = TIFFOpen(path, "w");
	if (!t)
		return -1;
	TIFFSetField(t, TIFFTAG_IMAGEWIDTH, w);
	TIFFSetField(t, TIFFTAG_IMAGELENGTH, h);
	TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 16);
	TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, 1);
	TIFFSetField(t, TIFFTAG_COMPRESSION, COMPRESSION_ADOBE_DEFLATE);
	TIFFSetField(t, TIFFTAG_PHOTOMETRIC,
		     white ? PHOTOMETRIC_MINISWHITE : PHOTOMETRIC_MINISBLACK);
	uint16_t *img = calloc((size_t)h * w, 2);
	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++)
			img[(size_t)y * w + x] = (uint16_t)v(y, x);
	int ok = 1;
	if (tiled) {
		TIFFSetField(t, TIFFTAG_TILEWIDTH, 16);
		TIFFSetField(t, TIFFTAG_TILELENGTH, 16);
		uint16_t tile[16 * 16];
		for (uint32_t ty = 0; ty < h; ty += 16)
			for (uint32_t tx = 0; tx < w; tx += 16) {
				memset(tile, 0, sizeof tile);
				for (uint32_t y = 0; y < 16 && ty + y < h; y++)
					for (uint32_t x = 0; x < 16 && tx + x < w; x++)
						tile[y * 16 + x] = img[(ty + y) * w + tx + x];
				if (TIFFWriteTile(t, tile, tx, ty, 0, 0) < 0)
					ok = 0;
			}
	} else {
		TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, rps);
		for (uint32_t y = 0; y < h; y++)
			if (TIFFWriteScanline(t, img + (size_t)y * w, y, 0) < 0)
				ok = 0;
	}
	TIFFClose(t);
	free(img);
	return ok ? 0 : -1;
}

static unsigned g16_small(uint32_t y, uint32_t x)
{
	return pat(y, x, 0);
}

static unsigned g16_one_over(uint32_t y, uint32_t x)
{
	return y == 36 && x == 44 ? 256 : pat(y, x, 0);
}

static void test_tiff_gray16(void)
{
	const uint32_t h = 37, w = 45;
	uint8_t want[37 * 45], tile[37 * 45];
	char path[512], what[160], err[SPRITE_ERR_MAX];
	for (int over = 0; over <= 1; over++)
		for (int white = 0; white <= 1; white++)
			for (int layout = 0; layout < 3; layout++) {
				/* layout: 0 one strip, 1 strips of 5 rows, 2 tiles */
				snprintf(what, sizeof what, "tiff 16-bit %s%s, %s",
					 white ? "min-is-white" : "gray",
					 over ? " with one sample of 256" : " in 8 bits",
					 layout == 0   ? "strip"
					 : layout == 1 ? "strips"
						       : "tiled");
				tpath(path, sizeof path, "gray16.tif");
				if (write_gray16(path, h, w, white, layout == 1 ? 5 : h,
						 layout == 2,
						 over ? g16_one_over : g16_small) < 0) {
					fail("%s: cannot write the test file", what);
					continue;
				}
				for (uint32_t y = 0; y < h; y++)
					for (uint32_t x = 0; x < w; x++) {
						unsigned v =
							over ? (y == 36 && x == 44) : pat(y, x, 0);
						want[y * w + x] = (uint8_t)(white ? 255 - v : v);
					}
				struct sprite_image im;
				if (sprite_image_load(path, &im, err) < 0) {
					fail("%s: %s", what, err);
					continue;
				}
				check_image(what, &im, want, h, w, 1, 0);
				sprite_image_free(&im);
				/* by strips into a tile of the image's size (a copy) */
				struct sprite_sample_spec sp = {h, w,	 1, SPRITE_FIT_STRETCH,
								0, NULL, 0};
				if (sprite_sample_load(path, &sp, NULL, tile, NULL, err) < 0)
					fail("%s, by strips: %s", what, err);
				else if (memcmp(tile, want, sizeof want))
					fail("%s, by strips: not the pixels decoded from memory",
					     what);
			}
}

int main(void)
{
	if (tmpdir_make("test_tiff") < 0)
		return 1;
	test_tiff_matrix();
	test_tiff_gray16();
	return tmpdir_finish("test_tiff");
}
