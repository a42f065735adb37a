/*
 * fuzz_image.c - fuzz target: image files (common/codec.c and tiff.c: TIFF through libtiff, PNG
 * through libpng, JPEG through libturbojpeg, WebP through libwebp, Netpbm P5/P6/P7 parsed by
 * codec.c itself; the kind found from magic bytes), then the tile fit (fit.c), gray and RGB,
 * shrinking and enlarging. An image that decodes must have sides and pixel count within image.h's
 * caps and 1 or 3 channels; otherwise the decoder must say why. The same bytes as a file through
 * sprite_sample_load (common/sample.c: PNG, Netpbm and TIFF strips decoded row by row into the fit)
 * must agree with the decode from memory: both refuse, or both give the same tile to the bit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <png.h>
#include <tiffio.h>
#include <turbojpeg.h>
#include <webp/encode.h>

#include "common/image.h"
#include "common/sample.h"
#include "common/store.h"
#include "tests/fuzz.h"

/* The file path (by rows where it can) against the memory path, for one tile. */
static void rows_agree(const uint8_t *data, size_t size, const struct sprite_image *im)
{
	const char *path = fuzz_path(data, size);
	if (!path)
		return;
	static const struct sprite_sample_spec specs[] = {
		{11, 13, 3, SPRITE_FIT_CROP, 0, NULL, SPRITE_BG_RGB(255, 255, 255)},
		{5, 40, 1, SPRITE_FIT_PAD, 0, NULL, 0},
	};
	for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
		const struct sprite_sample_spec *sp = &specs[k];
		uint8_t a[40 * 40 * 3], b[40 * 40 * 3];
		char why[SPRITE_ERR_MAX] = "";
		size_t n = (size_t)sp->th * sp->tw * sp->tc;
		int ra = -1;
		struct sprite_image jm = {0};
		/* the memory path as sample.c takes it: JPEG DCT scaling for the tile */
		if (im && sprite_image_decode_for(data, size, "", sp->th, sp->tw, sp->fit,
						  sp->background, &jm, why) == 0) {
			ra = sprite_image_fit(&jm, sp->th, sp->tw, sp->tc, sp->fit, a);
			sprite_image_free(&jm);
		}
		int rb = sprite_sample_load(path, sp, NULL, b, NULL, why);
		if (rb < 0 && !why[0]) {
			fprintf(stderr,
				"fuzz_image: sprite_sample_load refused without a reason\n");
			abort();
		}
		if ((ra == 0) != (rb == 0) || (ra == 0 && memcmp(a, b, n))) {
			/* FUZZ_IMAGE_DUMP=FILE keeps the input for a look */
			const char *keep = getenv("FUZZ_IMAGE_DUMP");
			FILE *dump = keep ? fopen(keep, "wb") : NULL;
			if (dump) {
				fwrite(data, 1, size, dump);
				fclose(dump);
			}
			fprintf(stderr, "fuzz_image: from memory %d, from the file %d (%s)%s\n", ra,
				rb, why, ra == 0 && rb == 0 ? ": tiles differ" : "");
			abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sprite_image im = {0};
	char err[SPRITE_ERR_MAX] = "";
	if (sprite_image_decode(data, size, "input", &im, err) < 0) {
		rows_agree(data, size, NULL);
		if (!err[0] || im.px) {
			fprintf(stderr, "fuzz_image: a refused image left %s\n",
				im.px ? "pixels allocated" : "no message");
			abort();
		}
		return 0;
	}
	if (!im.px || im.h == 0 || im.w == 0 || im.h > SPRITE_IMAGE_MAX_SIDE ||
	    im.w > SPRITE_IMAGE_MAX_SIDE || (uint64_t)im.h * im.w > SPRITE_IMAGE_MAX_PIXELS ||
	    (im.c != 1 && im.c != 3)) {
		fprintf(stderr, "fuzz_image: decoded %ux%ux%u\n", im.h, im.w, im.c);
		abort();
	}
	uint8_t tile[40 * 40 * 3];
	if (sprite_image_fit(&im, 7, 9, 1, SPRITE_FIT_STRETCH, tile) < 0 ||
	    sprite_image_fit(&im, 40, 40, 3, SPRITE_FIT_CROP, tile) < 0 ||
	    sprite_image_fit(&im, 9, 7, 3, SPRITE_FIT_PAD, tile) < 0) {
		fprintf(stderr, "fuzz_image: a decoded %ux%ux%u image does not fit a tile\n", im.h,
			im.w, im.c);
		abort();
	}
	rows_agree(data, size, &im);
	sprite_image_free(&im);
	fuzz_accepted++;
	return 0;
}

static void pattern(uint8_t *px, uint32_t h, uint32_t w, uint32_t c)
{
	for (uint32_t i = 0; i < h * w * c; i++)
		px[i] = (uint8_t)(i * 7 + i / 13);
}

static int via_file(struct fuzz_buf *b, const char *name, int (*write)(const char *, void *),
		    void *arg)
{
	char path[] = "/tmp/fuzz_image.XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return -1;
	close(fd);
	int rc = write(path, arg);
	if (rc >= 0)
		rc = fuzz_slurp(path, b);
	unlink(path);
	snprintf(b->name, sizeof b->name, "%s", name);
	return rc;
}

struct spec {
	uint32_t h, w, c;
	int kind; /* TIFF compression, or 0 for PNG */
};

static int write_tiff_or_png(const char *path, void *arg)
{
	const struct spec *s = arg;
	uint8_t px[16 * 20 * 3];
	char err[SPRITE_ERR_MAX];
	pattern(px, s->h, s->w, s->c);
	return s->kind ? sprite_tiff_write(path, px, s->h, s->w, s->c, s->kind, err)
		       : sprite_png_write(path, px, s->h, s->w, s->c, err);
}

/* 16-bit gray whose samples fit in 8 bits (their rule, docs/FORMAT.md): value at (y, x). */
static uint16_t small16(uint32_t y, uint32_t x)
{
	return (uint16_t)((y * 20 + x) * 7 % 256);
}

/* A 16x20 16-bit gray PNG of small16, interlaced (arg 1) or not. */
static int write_png16(const char *path, void *arg)
{
	FILE *f = fopen(path, "wb");
	png_structp pp =
		f ? png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL) : NULL;
	png_infop pi = pp ? png_create_info_struct(pp) : NULL;
	uint8_t px[16][40];
	png_bytep rows[16];
	int rc = -1;
	if (pi && !setjmp(png_jmpbuf(pp))) {
		png_init_io(pp, f);
		png_set_IHDR(pp, pi, 20, 16, 16, PNG_COLOR_TYPE_GRAY,
			     *(const int *)arg ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
			     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
		png_write_info(pp, pi);
		for (uint32_t y = 0; y < 16; y++) {
			for (uint32_t x = 0; x < 20; x++) {
				px[y][2 * x] = (uint8_t)(small16(y, x) >> 8);
				px[y][2 * x + 1] = (uint8_t)small16(y, x);
			}
			rows[y] = px[y];
		}
		png_write_image(pp, rows);
		png_write_end(pp, NULL);
		rc = 0;
	}
	if (pp)
		png_destroy_write_struct(&pp, pi ? &pi : NULL);
	if (f)
		fclose(f);
	return rc;
}

/* A 16x20 16-bit gray TIFF of small16 in strips of 5 rows. */
static int write_tiff16(const char *path, void *arg)
{
	(void)arg;
	TIFF *t = TIFFOpen(path, "w");
	if (!t)
		return -1;
	TIFFSetField(t, TIFFTAG_IMAGEWIDTH, 20);
	TIFFSetField(t, TIFFTAG_IMAGELENGTH, 16);
	TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 16);
	TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, 1);
	TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
	TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 5);
	int rc = 0;
	for (uint32_t y = 0; y < 16; y++) {
		uint16_t row[20];
		for (uint32_t x = 0; x < 20; x++)
			row[x] = small16(y, x);
		if (TIFFWriteScanline(t, row, y, 0) < 0)
			rc = -1;
	}
	TIFFClose(t);
	return rc;
}

static int jpeg(struct fuzz_buf *b, const char *name, int c)
{
	uint8_t px[16 * 20 * 3];
	pattern(px, 16, 20, (uint32_t)c);
	tjhandle tj = tjInitCompress();
	unsigned char *out = NULL;
	unsigned long len = 0;
	int rc = tj && tjCompress2(tj, px, 20, 0, 16, c == 1 ? TJPF_GRAY : TJPF_RGB, &out, &len,
				   c == 1 ? TJSAMP_GRAY : TJSAMP_420, 85, 0) == 0
			 ? 0
			 : -1;
	if (rc == 0 && (b->data = malloc(len))) {
		memcpy(b->data, out, len);
		b->len = len;
	} else {
		rc = -1;
	}
	tjFree(out);
	if (tj)
		tjDestroy(tj);
	snprintf(b->name, sizeof b->name, "%s", name);
	return rc;
}

/* A Netpbm file made here (codec.c reads these itself): header, then samples. */
static int pnm(struct fuzz_buf *b, const char *name, const char *header, int bytes)
{
	size_t hl = strlen(header);
	if (!(b->data = malloc(hl + (size_t)bytes)))
		return -1;
	memcpy(b->data, header, hl);
	for (int i = 0; i < bytes; i++)
		b->data[hl + (size_t)i] = (uint8_t)(i * 37 + 11);
	b->len = hl + (size_t)bytes;
	snprintf(b->name, sizeof b->name, "%s", name);
	return 0;
}

/* A WebP seed through libwebp's encoder: lossy RGB, or lossless RGBA. */
static int webp(struct fuzz_buf *b, const char *name, int alpha)
{
	uint8_t px[12 * 10 * 4];
	pattern(px, 12, 10, 4);
	uint8_t *enc = NULL;
	size_t n = alpha ? WebPEncodeLosslessRGBA(px, 10, 12, 40, &enc)
			 : WebPEncodeRGB(px, 10, 12, 40, 80.0f, &enc);
	b->data = n ? malloc(n) : NULL;
	if (b->data)
		memcpy(b->data, enc, n);
	WebPFree(enc);
	b->len = n;
	snprintf(b->name, sizeof b->name, "%s", name);
	return b->data ? 0 : -1;
}

static int seeds(struct fuzz_buf **out, char *err)
{
	static const struct {
		const char *name;
		struct spec s;
	} files[] = {
		{"gray.tif", {16, 20, 1, COMPRESSION_NONE}},
		{"gray-lzw.tif", {16, 20, 1, COMPRESSION_LZW}},
		{"gray-deflate.tif", {16, 20, 1, COMPRESSION_ADOBE_DEFLATE}},
		{"gray-packbits.tif", {16, 20, 1, COMPRESSION_PACKBITS}},
		{"rgb-lzw.tif", {16, 20, 3, COMPRESSION_LZW}},
		{"gray.png", {16, 20, 1, 0}},
		{"rgb.png", {16, 20, 3, 0}},
	};
	enum { NF = sizeof files / sizeof files[0] };
	struct fuzz_buf *b = calloc(NF + 11, sizeof *b);
	if (!b)
		return -1;
	*out = b;
	for (int i = 0; i < NF; i++)
		if (via_file(&b[i], files[i].name, write_tiff_or_png, (void *)&files[i].s) < 0) {
			snprintf(err, 256, "cannot write %s", files[i].name);
			return -1;
		}
	if (jpeg(&b[NF], "gray.jpg", 1) < 0 || jpeg(&b[NF + 1], "rgb.jpg", 3) < 0) {
		snprintf(err, 256, "libturbojpeg cannot compress");
		return -1;
	}
	if (pnm(&b[NF + 2], "gray.pgm", "P5\n# c\n6 5\n255\n", 30) < 0 ||
	    pnm(&b[NF + 3], "rgb16.ppm", "P6 4 3 65535\n", 72) < 0 ||
	    pnm(&b[NF + 4], "rgba.pam",
		"P7\nWIDTH 3\nHEIGHT 2\nDEPTH 4\nMAXVAL 255\nTUPLTYPE RGB_ALPHA\nENDHDR\n",
		24) < 0) {
		snprintf(err, 256, "out of memory");
		return -1;
	}
	if (webp(&b[NF + 5], "rgb.webp", 0) < 0 || webp(&b[NF + 6], "rgba.webp", 1) < 0) {
		snprintf(err, 256, "libwebp cannot encode");
		return -1;
	}
	/* 16-bit gray in 8-bit values: the first pass of the row decoders (as8) */
	static const int plain = 0, adam7 = 1;
	if (via_file(&b[NF + 7], "gray16.png", write_png16, (void *)&plain) < 0 ||
	    via_file(&b[NF + 8], "gray16-i.png", write_png16, (void *)&adam7) < 0 ||
	    via_file(&b[NF + 9], "gray16.tif", write_tiff16, NULL) < 0) {
		snprintf(err, 256, "cannot write a 16-bit seed");
		return -1;
	}
	if (pnm(&b[NF + 10], "gray16.pgm", "P5 4 3 65535\n", 24) < 0) {
		snprintf(err, 256, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < 24; i += 2) /* high bytes 0: samples that fit in 8 bits */
		b[NF + 10].data[b[NF + 10].len - 24 + i] = 0;
	return NF + 11;
}

const struct fuzz_target fuzz_target = {"fuzz_image", seeds, NULL};
