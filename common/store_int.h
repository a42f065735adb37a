/*
 * store_int.h - what the store's reader (store.c, store_sheet.c) and writer
 * (store_write.c) share and nobody else needs: the error convention, the
 * name rules, and the reader's handle.
 */
#ifndef SPRITE_STORE_INT_H
#define SPRITE_STORE_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/batch.h"
#include "common/format.h"
#include "common/store.h"
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

/*
 * An open store (store.c): validated at open, immutable after, so any
 * number of threads may read through it.
 */
struct sprite_store {
	int fd;
	struct sprite_store_info info;
	struct sprite_split_entry splits[SPRITE_MAX_SPLITS];
	struct sprite_sheet_entry *sheets;
	char *names;	    /* the names block */
	const char **class; /* nclasses pointers into names */

	/* Version 3 tables: samples of all splits in split order, then sample order. */
	uint64_t nsamples;
	uint64_t base[SPRITE_MAX_SPLITS]; /* table index of each split's first sample */
	uint16_t *labels;		  /* nsamples, checked at open; NULL: no table */
	uint64_t paths_offset, paths_size, paths_checksum; /* 0 offset: no table */
	pthread_mutex_t paths_lock;
	int paths_state; /* 0 not loaded, 1 loaded, else -error */
	char paths_err[SPRITE_ERR_MAX];
	uint64_t *path_off; /* nsamples + 1 offsets into path_str (in the loaded block) */
	const char *path_str;
	void *paths_block; /* the table as read */
	uint64_t skipped_offset, skipped_size, skipped_checksum, skipped_count; /* 0: none */
};

/* sprite_pread_full, with a file that ends early reported as truncation. */
static inline int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	int r = sprite_pread_full(fd, buf, len, off);
	return r == -ENODATA ? -SPRITE_ETRUNC : r;
}

#endif
