/*
 * rows.h - PNG and binary Netpbm decoded from a file descriptor row by row
 * into the fit (rows.c), for sample.c. Private to common/.
 */
#ifndef SPRITE_ROWS_H
#define SPRITE_ROWS_H

#include <stdint.h>

#include "common/sample.h"

/*
 * fd open on a regular file of size bytes, at offset 0. A PNG or Netpbm
 * file is decoded into tile as sp says: 0, or a negative error with why set
 * (-ENOMEM: out of memory). -EAGAIN: not a kind decoded by rows (another
 * kind, an interlaced PNG): the caller reads it whole; fd's offset is then
 * anywhere. got gets the image's size and the bytes read.
 */
int sprite_rows_decode(int fd, uint64_t size, const struct sprite_sample_spec *sp, uint8_t *tile,
		       struct sprite_sample_got *got, char *why);

/*
 * The same for TIFF (tiff.c): contiguous strips of 8 or 16-bit gray, RGB or
 * palette pixels, top-left, read strip by strip through libtiff from fd;
 * -EAGAIN for every other layout (tiles, separate planes, other
 * orientations and depths, YCbCr...), which is then read whole.
 */
int sprite_tiff_rows(int fd, uint64_t size, const struct sprite_sample_spec *sp, uint8_t *tile,
		     struct sprite_sample_got *got, char *why);

#endif
