/*
 * webp.c - WebP images (lossy, lossless, with alpha) through Debian's
 * libwebp, for codec.c's decoder: the file held in memory, the image
 * decoded whole (libwebp checks the bitstream; every size is checked
 * against the pixel caps before anything is allocated). Alpha goes by the
 * background as for PNG (image.h's fit rule). An animated WebP is
 * not a sample: which frame would be is a guess.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <webp/decode.h>

#include "common/codec.h"
#include "common/store.h"

int sprite_webp_decode(const void *data, size_t len, const char *name, uint32_t bg,
		       struct sprite_image *out, char *err)
{
	WebPBitstreamFeatures f;
	VP8StatusCode st = WebPGetFeatures(data, len, &f);
	if (st != VP8_STATUS_OK) {
		sprite_image_err(err, name, "bad WebP: %s",
				 st == VP8_STATUS_NOT_ENOUGH_DATA ? "truncated"
								  : "cannot read its header");
		return -SPRITE_ECORRUPT;
	}
	if (f.has_animation) {
		sprite_image_err(err, name,
				 "animated WebP: not supported (which frame is a guess)");
		return -ENOTSUP;
	}
	int r = sprite_image_check_dims((uint64_t)f.height, (uint64_t)f.width, name, err);
	if (r < 0)
		return r;
	uint32_t h = (uint32_t)f.height, w = (uint32_t)f.width, cin = f.has_alpha ? 4 : 3;
	size_t n = (size_t)h * w;
	uint8_t *buf = malloc(n * cin);
	if (!buf) {
		sprite_image_err(err, name, "out of memory for %ux%u pixels", h, w);
		return -ENOMEM;
	}
	uint8_t *got = f.has_alpha ? WebPDecodeRGBAInto(data, len, buf, n * 4, (int)w * 4)
				   : WebPDecodeRGBInto(data, len, buf, n * 3, (int)w * 3);
	if (!got) {
		free(buf);
		sprite_image_err(err, name, "bad WebP: the image does not decode (truncated?)");
		return -SPRITE_ECORRUPT;
	}
	if (f.has_alpha) {
		for (size_t i = 0; i < n; i++)
			for (uint32_t k = 0; k < 3; k++)
				buf[i * 3 + k] =
					sprite_over_bg(buf[i * 4 + k], buf[i * 4 + 3], bg, k);
		uint8_t *shrunk = realloc(buf, n * 3);
		buf = shrunk ? shrunk : buf;
	}
	out->h = h;
	out->w = w;
	out->c = 3;
	out->px = buf;
	return 0;
}
