/*
 * codec.h - private to common/: what the image files (codec.c, tiff.c, fit.c,
 * idx.c) share behind the public image.h. Not installed, not for callers
 * outside common/.
 */
#ifndef SPRITE_CODEC_H
#define SPRITE_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "common/image.h"

/*
 * The message "NAME: REASON" into err (SPRITE_ERR_MAX bytes; NULL: nothing),
 * NAME escaped (sprite_escape) and shortened from the left so that the
 * reason always shows whole; no "NAME: " when name is NULL or empty.
 */
void sprite_image_err(char *err, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * 0 when an h*w image is within SPRITE_IMAGE_MAX_SIDE and
 * SPRITE_IMAGE_MAX_PIXELS and not empty; else -SPRITE_ECORRUPT, err set.
 * Called on every size read from a file before anything is allocated.
 */
int sprite_image_check_dims(uint64_t h, uint64_t w, const char *name, char *err);

/* out set to h*w*c and its pixels malloc'd (uninitialised); 0, or -ENOMEM with err set. */
int sprite_image_alloc(struct sprite_image *out, uint32_t h, uint32_t w, uint32_t c,
		       const char *name, char *err);

/* Composite a colour value on black with 8-bit alpha, rounded. */
static inline uint8_t sprite_over_black(unsigned v, unsigned a)
{
	return (uint8_t)((v * a + 127) / 255);
}

/* The TIFF decoder (tiff.c), as sprite_image_decode calls it on TIFF magic. */
int sprite_tiff_decode(const void *data, size_t len, const char *name, struct sprite_image *out,
		       char *err);

#endif
