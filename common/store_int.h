/*
 * store_int.h - what the store's reader (store.c) and writer (store_write.c)
 * share and nobody else needs: the error convention and the name rules.
 */
#ifndef SPRITE_STORE_INT_H
#define SPRITE_STORE_INT_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/batch.h"
#include "common/format.h"
#include "common/util.h"

#define ALIGN_UP(x)    (((x) + (uint64_t)SPRITE_ALIGN - 1) & ~((uint64_t)SPRITE_ALIGN - 1))
#define CLASS_NAME_MAX 255u /* bytes of one class name, without the NUL */

/* A name the mount can use as a directory entry and a terminal can print. */
static inline int valid_class_name(const char *s, size_t len)
{
	if (len == 0 || len > CLASS_NAME_MAX)
		return 0;
	if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
		return 0;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == '/' || s[i] == 0x7f)
			return 0;
	return 1;
}

static inline int valid_split_name(const char *s)
{
	size_t len = strnlen(s, SPRITE_SPLIT_NAME_MAX);
	if (len == 0 || len == SPRITE_SPLIT_NAME_MAX)
		return 0;
	return valid_class_name(s, len);
}

static inline uint64_t sheet_raw_size(uint32_t count, uint32_t h, uint32_t w, uint32_t c)
{
	struct sprite_batch_header b;
	sprite_batch_layout(count, h, w, c, &b);
	return b.total_size;
}

#endif
