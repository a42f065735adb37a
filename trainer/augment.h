/*
 * augment.h - --augment (augment.c, private to trainer/): the seeded
 * random-resized-crop, padded crop and flip the loader threads apply to
 * training tiles, and the spelling a checkpoint records.
 *
 * Returns >= 0 or a negative errno with a message in err (HN_ERR_MAX
 * bytes); only the program (hntrain.c, options.c, train.c) prints.
 */
#ifndef HN_AUGMENT_H
#define HN_AUGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/backend.h" /* HN_ERR_MAX */

struct hn_augment {
	uint32_t rrc;  /* rrc:S, random-resized-crop, S in ten-thousandths; 0 none */
	uint32_t crop; /* crop:P, zero padding P on each side; 0 none */
	int flip;      /* flip: horizontal, p = 0.5 */
	char spec[28]; /* canonical spelling ("rrc:0.35,crop:4,flip"), as the checkpoint records it
			*/
};

/* Parse an --augment list; -EINVAL with err saying what is wrong. */
int hn_augment_parse(const char *s, struct hn_augment *a, char *err);
void hn_augment_format(const struct hn_augment *a, char *out, size_t n);
/*
 * Augment one h*w*c HWC tile in place: sample number pos (0-based) of the
 * training order of epoch (0-based) under seed. tmp holds h*w*c bytes.
 */
void hn_augment_tile(const struct hn_augment *a, uint64_t seed, uint64_t epoch, uint64_t pos,
		     uint32_t h, uint32_t w, uint32_t c, uint8_t *tile, uint8_t *tmp);

#endif
