/*
 * pack_export.h - spritefs-pack --export (pack_export.c), called by the
 * command's main in spritefs-pack.c.
 */
#ifndef SPRITEFS_PACK_EXPORT_H
#define SPRITEFS_PACK_EXPORT_H

#include <stdint.h>

/*
 * Write the store at path as an image folder under dir, in format ("tiff",
 * "tiff-lzw", "png", "pnm"), of one split (NULL: all) and at most limit
 * samples per split (0: all). Messages go to stderr; returns the exit status
 * (0 written, 1 error or a bad sheet left out, 2 usage).
 */
int spritefs_pack_export(const char *path, const char *dir, const char *format, const char *split,
			 uint64_t limit, int jobs, int strict, int force, int quiet);

#endif
