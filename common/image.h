/*
 * image.h - decode TIFF, PNG, JPEG, WebP, binary Netpbm (P5/P6/P7) and IDX images
 * and fit them to a tile.
 *
 * Decoders are safe on malicious input (libtiff, libpng, libturbojpeg, libwebp do the
 * parsing; this code checks every dimension against caps before allocating)
 * and return -SPRITE_ECORRUPT / -ENOTSUP with a message naming the file and
 * the problem in err (SPRITE_ERR_MAX bytes).
 *
 * Fit rule (documented in docs/FORMAT.md, "How an image becomes a tile"):
 * channels first (gray->RGB by replication, RGB->gray by BT.601 luma
 * 0.299/0.587/0.114, alpha dropped: the colours as stored, or composited on
 * a background colour first (SPRITE_BG_*, format.h), palette
 * expanded, 16-bit scaled to 8, CMYK JPEG to RGB), then size by the fit mode
 * (enum sprite_fit, format.h): stretch to the tile, crop (shorter side to
 * the tile, centre cut out) or pad (longer side to the tile, centred on 0).
 * Resizes use an area-average filter when shrinking and bilinear when
 * enlarging. A JPEG's EXIF orientation is applied at decode.
 *
 * Where it lives: codec.c (kind from magic bytes, PNG, JPEG, Netpbm, file
 * reading, PNG and PNM writing), tiff.c (TIFF reading and writing), fit.c
 * (the fit rule), idx.c (IDX files).
 */
#ifndef SPRITE_IMAGE_H
#define SPRITE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "common/format.h"

struct sprite_image {
	uint32_t h, w, c; /* c in 1, 3 after decode (alpha/palette resolved) */
	uint8_t *px;	  /* h*w*c bytes, HWC, malloc'd */
};

#define SPRITE_IMAGE_MAX_SIDE	65536u
#define SPRITE_IMAGE_MAX_PIXELS (1ull << 28)

void sprite_image_free(struct sprite_image *im); /* frees px; NULL is fine */

/* Decode an encoded file held in memory; the kind is found from magic bytes. */
int sprite_image_decode(const void *data, size_t len, const char *name, struct sprite_image *out,
			char *err);
/* Read a file and decode it. */
int sprite_image_load(const char *path, struct sprite_image *out, char *err);

/*
 * The same, for fitting to a th x tw tile by fit afterwards: a JPEG may come
 * out reduced by libjpeg's DCT scaling by 1/d (d 2, 4 or 8; the image is
 * then ceil(h/d) x ceil(w/d)), the largest d with h/d and w/d at least the
 * size the fit resizes to (as PIL's draft() picks it), so that the area
 * filter starts from fewer pixels. th == 0: full size, as sprite_image_decode.
 * bg says what alpha becomes (SPRITE_BG_*; 0 as stored, which
 * sprite_image_decode and sprite_image_load do).
 */
int sprite_image_decode_for(const void *data, size_t len, const char *name, uint32_t th,
			    uint32_t tw, enum sprite_fit fit, uint32_t bg, struct sprite_image *out,
			    char *err);
int sprite_image_load_for(const char *path, uint32_t th, uint32_t tw, enum sprite_fit fit,
			  uint32_t bg, struct sprite_image *out, char *err);

/*
 * Where an h x w image goes in a th x tw tile: it is resized to rh x rw;
 * crop then takes the tile from rows crop_y.. and columns crop_x.. of that,
 * pad writes it at row pad_y, column pad_x of a tile filled with 0.
 */
struct sprite_fit_geom {
	uint32_t rh, rw;
	uint32_t crop_y, crop_x;
	uint32_t pad_y, pad_x;
};
void sprite_fit_geometry(uint32_t h, uint32_t w, uint32_t th, uint32_t tw, enum sprite_fit fit,
			 struct sprite_fit_geom *g);

/* Fit im into a tile of h*w*c bytes (HWC) by the rule above. */
int sprite_image_fit(const struct sprite_image *im, uint32_t h, uint32_t w, uint32_t c,
		     enum sprite_fit fit, uint8_t *tile);

/* "stretch", "crop", "pad"; NULL for another value. */
const char *sprite_fit_name(uint32_t fit);
/* The mode of one of those names; -EINVAL for another string. */
int sprite_fit_parse(const char *s, enum sprite_fit *out);

/*
 * A background (SPRITE_BG_*, format.h) from "none" (alpha dropped, the
 * colours as stored), "black", "white" or "R,G,B" (each 0-255); -EINVAL for
 * another string. sprite_bg_name spells one back into buf ("not recorded"
 * for 0, a store's header before the field) and returns buf.
 */
int sprite_bg_parse(const char *s, uint32_t *out);
char *sprite_bg_name(uint32_t bg, char *buf, size_t size);

/*
 * IDX files (MNIST, Fashion-MNIST), plain or gzip: images (magic 0x00000803,
 * dims n,h,w) or labels (0x00000801, dim n). Returns n, with *px (n*h*w) or
 * *labels (n) malloc'd.
 */
int64_t sprite_idx_load_images(const char *path, uint32_t *h, uint32_t *w, uint8_t **px, char *err);
int64_t sprite_idx_load_labels(const char *path, uint8_t **labels, char *err);

/*
 * Writers used to serve/view tiles and to build test trees. The path forms
 * create path as safe_open.h does (a new temporary, never through a link,
 * renamed over path; not fsynced); the _fd forms write into fd, an empty
 * file open read-write, path naming it in messages.
 */
int sprite_tiff_write(const char *path, const uint8_t *px, uint32_t h, uint32_t w, uint32_t c,
		      int compression /* COMPRESSION_* from tiffio.h */, char *err);
int sprite_tiff_write_fd(int fd, const char *path, const uint8_t *px, uint32_t h, uint32_t w,
			 uint32_t c, int compression, char *err);
int sprite_png_write(const char *path, const uint8_t *px, uint32_t h, uint32_t w, uint32_t c,
		     char *err);
int sprite_png_write_fd(int fd, const char *path, const uint8_t *px, uint32_t h, uint32_t w,
			uint32_t c, char *err);
/*
 * Netpbm header for an h*w*c image: P5 (gray), P6 (RGB), or PAM P7 for 2 and 4
 * channels (gray+alpha, RGBA). Returns its length (< SPRITE_PNM_HEADER_MAX),
 * -EINVAL for other channel counts, -ENOSPC if cap is too small.
 */
#define SPRITE_PNM_HEADER_MAX 128
int sprite_pnm_header(char *buf, size_t cap, uint32_t h, uint32_t w, uint32_t c);
/* The file extension that goes with it, dot included: ".pgm", ".ppm" or ".pam". */
const char *sprite_pnm_ext(uint32_t c);

#endif
