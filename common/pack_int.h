/*
 * pack_int.h - what the packer's folder path (pack.c) and IDX path
 * (pack_idx.c) share and nobody else needs.
 */
#ifndef SPRITE_PACK_INT_H
#define SPRITE_PACK_INT_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/pack.h"
#include "common/store.h"
#include "common/util.h"

#define PACK_MAX_FILE (1ull << 30) /* larger source files are refused */

/* Put "path: " in front of err unless it already names path. */
static inline void prefix_err(char *err, const char *path)
{
	if (!err || strstr(err, path))
		return;
	char tmp[SPRITE_ERR_MAX];
	memcpy(tmp, err, sizeof tmp);
	tmp[sizeof tmp - 1] = 0;
	size_t pl = strnlen(path, SPRITE_ERR_MAX / 2), tl = strlen(tmp);
	if (pl + 2 + tl >= SPRITE_ERR_MAX)
		tl = SPRITE_ERR_MAX - 1 - pl - 2;
	memcpy(err, path, pl);
	memcpy(err + pl, ": ", 2);
	memcpy(err + pl + 2, tmp, tl);
	err[pl + 2 + tl] = 0;
}

/* pack_idx.c: is src a folder of IDX files (Fashion-MNIST's layout)? */
int sprite_pack_is_idx(const char *src);
/* pack_idx.c: pack it; as sprite_pack() */
int sprite_pack_idx(const char *src, const char *store, const struct sprite_pack_options *o,
		    const char *dsname, struct sprite_pack_report *rep, char *err);

#endif
