/*
 * store.c - read sprite stores (format.h, docs/FORMAT.md); store_write.c
 * writes them.
 *
 * sprite_store_open() reads the header, the index and the class
 * names with pread() and checks every field before anything is allocated
 * from it or trusted, so that the rest of the project (the FUSE daemon
 * above all) can index the metadata without further checks. After open the
 * handle is immutable: all later reads use pread() on the one descriptor,
 * so any number of threads may read and decode sheets concurrently.
 * Sheet contents are only checked when decoded (sprite_sheet_decode, in
 * store_sheet.c with the reading of sheets and the whole-store checks).
 * The handle (struct sprite_store) is in store_int.h, shared with it.
 */
#include "common/store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lz4.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/batch.h"
#include "common/perm.h"
#include "common/store_int.h"
#include "common/util.h"

static int check_header(const struct sprite_header *h, uint64_t st_size, char *err)
{
	if (h->header_size != SPRITE_HEADER_SIZE)
		return sprite_fail(err, -SPRITE_ECORRUPT, "header size %u is not %u",
				   h->header_size, SPRITE_HEADER_SIZE);
	if (h->tile_h == 0 || h->tile_w == 0 || h->tile_h > SPRITE_MAX_TILE_SIDE ||
	    h->tile_w > SPRITE_MAX_TILE_SIDE)
		return sprite_fail(err, -SPRITE_ECORRUPT, "tile size %ux%u out of range (1..%u)",
				   h->tile_h, h->tile_w, SPRITE_MAX_TILE_SIDE);
	if (h->tile_c == 0 || h->tile_c > SPRITE_MAX_CHANNELS)
		return sprite_fail(err, -SPRITE_ECORRUPT, "tile channels %u out of range (1..%u)",
				   h->tile_c, SPRITE_MAX_CHANNELS);
	if (h->sheet_tiles == 0 || h->sheet_tiles > SPRITE_MAX_SHEET_TILES)
		return sprite_fail(err, -SPRITE_ECORRUPT, "sheet tiles %u out of range (1..%u)",
				   h->sheet_tiles, SPRITE_MAX_SHEET_TILES);
	if (sheet_raw_size(h->sheet_tiles, h->tile_h, h->tile_w, h->tile_c) > SPRITE_MAX_SHEET_RAW)
		return sprite_fail(err, -SPRITE_ECORRUPT,
				   "a sheet of %u tiles of %ux%ux%u exceeds 1 GiB", h->sheet_tiles,
				   h->tile_h, h->tile_w, h->tile_c);
	if (h->nclasses == 0 || h->nclasses > SPRITE_MAX_CLASSES)
		return sprite_fail(err, -SPRITE_ECORRUPT, "class count %u out of range (1..%u)",
				   h->nclasses, SPRITE_MAX_CLASSES);
	if (h->nsplits == 0 || h->nsplits > SPRITE_MAX_SPLITS)
		return sprite_fail(err, -SPRITE_ECORRUPT, "split count %u out of range (1..%u)",
				   h->nsplits, SPRITE_MAX_SPLITS);
	if (h->flags != 0)
		return sprite_fail(err, -SPRITE_ECORRUPT, "unknown flags 0x%x", h->flags);
	if (h->fit > SPRITE_FIT_PAD) /* 0 in stores before the field: stretch, as they did */
		return sprite_fail(err, -SPRITE_ECORRUPT, "unknown fit mode %u", h->fit);
	if (h->file_size < st_size)
		return sprite_fail(err, -SPRITE_ECORRUPT, "file is %llu bytes, header says %llu",
				   (unsigned long long)st_size, (unsigned long long)h->file_size);
	if (h->file_size % SPRITE_ALIGN)
		return sprite_fail(err, -SPRITE_ECORRUPT, "file size %llu is not a multiple of %u",
				   (unsigned long long)h->file_size, SPRITE_ALIGN);
	if (memchr(h->name, 0, SPRITE_NAME_MAX) == NULL)
		return sprite_fail(err, -SPRITE_ECORRUPT, "data set name is not NUL-terminated");

	/* Every sheet takes at least one aligned block: bounds nsheets before any allocation. */
	uint64_t blocks = (h->file_size - SPRITE_HEADER_SIZE) / SPRITE_ALIGN;
	if (h->nsheets > blocks)
		return sprite_fail(err, -SPRITE_ECORRUPT,
				   "sheet count %u cannot fit in a file of %llu bytes", h->nsheets,
				   (unsigned long long)h->file_size);
	if (h->index_offset % SPRITE_ALIGN || h->index_offset < SPRITE_HEADER_SIZE ||
	    h->index_offset > h->file_size)
		return sprite_fail(err, -SPRITE_ECORRUPT, "index offset %llu out of range",
				   (unsigned long long)h->index_offset);
	if (h->index_size != (uint64_t)h->nsheets * sizeof(struct sprite_sheet_entry))
		return sprite_fail(err, -SPRITE_ECORRUPT,
				   "index size %llu does not match %u sheets",
				   (unsigned long long)h->index_size, h->nsheets);
	if (h->index_size > h->file_size - h->index_offset)
		return sprite_fail(err, -SPRITE_ECORRUPT, "index extends past end of file");
	if (h->names_offset % SPRITE_ALIGN || h->names_offset < h->index_offset + h->index_size ||
	    h->names_offset > h->file_size)
		return sprite_fail(err, -SPRITE_ECORRUPT, "names offset %llu out of range",
				   (unsigned long long)h->names_offset);
	if (h->names_size < h->nclasses ||
	    h->names_size > (uint64_t)h->nclasses * (CLASS_NAME_MAX + 1))
		return sprite_fail(err, -SPRITE_ECORRUPT, "names size %llu does not fit %u classes",
				   (unsigned long long)h->names_size, h->nclasses);
	if (h->names_size > h->file_size - h->names_offset)
		return sprite_fail(err, -SPRITE_ECORRUPT, "names extend past end of file");

	uint64_t sheets = 0;
	for (uint32_t i = 0; i < h->nsplits; i++) {
		const struct sprite_split_entry *sp = &h->splits[i];
		if (!valid_split_name(sp->name))
			return sprite_fail(err, -SPRITE_ECORRUPT, "split %u: bad name", i);
		for (uint32_t j = 0; j < i; j++)
			if (strcmp(h->splits[j].name, sp->name) == 0)
				return sprite_fail(err, -SPRITE_ECORRUPT,
						   "split %u: name \"%s\" repeated", i, sp->name);
		if (sp->first_sheet != sheets)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "split %u (%s): first sheet %u, expected %llu", i,
					   sp->name, sp->first_sheet, (unsigned long long)sheets);
		if (sp->count > UINT32_MAX) /* sample ids are uint32 */
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "split %u (%s): %llu samples exceed 2^32", i, sp->name,
					   (unsigned long long)sp->count);
		uint64_t want = (sp->count + h->sheet_tiles - 1) / h->sheet_tiles;
		if (sp->count > (uint64_t)h->nsheets * h->sheet_tiles || sp->nsheets != want)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "split %u (%s): %llu samples do not match %u sheets", i,
					   sp->name, (unsigned long long)sp->count, sp->nsheets);
		sheets += sp->nsheets;
		if (sheets > h->nsheets)
			break;
	}
	if (sheets != h->nsheets)
		return sprite_fail(err, -SPRITE_ECORRUPT, "splits hold %llu sheets, header says %u",
				   (unsigned long long)sheets, h->nsheets);
	return 0;
}

static int check_index(const struct sprite_header *h, const struct sprite_sheet_entry *e, char *err)
{
	uint64_t prev_end = SPRITE_HEADER_SIZE;
	uint32_t split = 0;

	for (uint32_t i = 0; i < h->nsheets; i++, e++) {
		while (i >= h->splits[split].first_sheet + h->splits[split].nsheets)
			split++; /* check_header made the ranges cover [0, nsheets) */
		const struct sprite_split_entry *sp = &h->splits[split];
		uint32_t k = i - sp->first_sheet;
		uint64_t first = (uint64_t)k * h->sheet_tiles;
		uint64_t count =
			sp->count - first < h->sheet_tiles ? sp->count - first : h->sheet_tiles;

		if (e->offset % SPRITE_ALIGN || e->offset < SPRITE_HEADER_SIZE)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "index entry %u: offset %llu out of range", i,
					   (unsigned long long)e->offset);
		if (e->offset > h->file_size || e->stored_size > h->file_size - e->offset)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "index entry %u: offset past end of file", i);
		if (e->offset < prev_end)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "index entry %u: overlaps the previous %s", i,
					   i ? "sheet" : "header");
		if (e->stored_size == 0 || e->offset + e->stored_size > h->index_offset)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "index entry %u: stored size %u out of range", i,
					   e->stored_size);
		prev_end = e->offset + e->stored_size;
		if (e->split != split || e->first != first || e->count != count)
			return sprite_fail(
				err, -SPRITE_ECORRUPT,
				"index entry %u: split %u first %llu count %u, expected split %u "
				"first %llu count %llu",
				i, e->split, (unsigned long long)e->first, e->count, split,
				(unsigned long long)first, (unsigned long long)count);
		if (e->raw_size != sheet_raw_size(e->count, h->tile_h, h->tile_w, h->tile_c))
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "index entry %u: raw size %u does not match %u tiles", i,
					   e->raw_size, e->count);
		if (e->codec == SPRITE_CODEC_RAW) {
			if (e->stored_size != e->raw_size)
				return sprite_fail(
					err, -SPRITE_ECORRUPT,
					"index entry %u: raw sheet of %u bytes stored as %u", i,
					e->raw_size, e->stored_size);
		} else if (e->codec == SPRITE_CODEC_LZ4) {
			if (e->stored_size > (uint64_t)LZ4_compressBound((int)e->raw_size))
				return sprite_fail(
					err, -SPRITE_ECORRUPT,
					"index entry %u: lz4 size %u exceeds the bound for %u", i,
					e->stored_size, e->raw_size);
		} else {
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "index entry %u: unknown codec %u", i, e->codec);
		}
		if (e->reserved != 0)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "index entry %u: reserved byte set", i);
	}
	return 0;
}

static int load_names(sprite_store *s, const struct sprite_header *h, char *err)
{
	int r;
	size_t n = (size_t)h->names_size;

	s->names = malloc(n);
	s->class = malloc(h->nclasses * sizeof(*s->class));
	if (!s->names || !s->class)
		return sprite_fail(err, -ENOMEM, "out of memory for %u class names", h->nclasses);
	r = pread_full(s->fd, s->names, n, h->names_offset);
	if (r < 0)
		return sprite_fail(err, r, "reading class names: %s", strerror(-r));
	if (sprite_checksum(s->names, n) != h->names_checksum)
		return sprite_fail(err, -SPRITE_ECHECKSUM, "class names: checksum mismatch");
	size_t off = 0;
	for (uint32_t i = 0; i < h->nclasses; i++) {
		const char *p = s->names + off;
		const char *z = memchr(p, 0, n - off);
		if (!z)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "class name %u is not NUL-terminated", i);
		if (!valid_class_name(p, (size_t)(z - p)))
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "class name %u is empty, too long or has "
					   "'/' or control characters",
					   i);
		s->class[i] = p;
		off += (size_t)(z - p) + 1;
	}
	if (off != n)
		return sprite_fail(err, -SPRITE_ECORRUPT, "names block has %zu trailing bytes",
				   n - off);
	return 0;
}

/*
 * Version 3: where the label table and the path table lie. Both follow the
 * names, 4 KiB-aligned, the path table after the label table; their sizes
 * follow from the split counts (the path table's at least), so that a header
 * cannot make a reader allocate more than the file holds.
 */
static int check_tables(const struct sprite_header *h, uint64_t nsamples, char *err)
{
	uint64_t end = h->names_offset + h->names_size;
	if (h->labels_offset) {
		if (h->labels_offset % SPRITE_ALIGN || h->labels_offset < end ||
		    h->labels_offset > h->file_size)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "label table: offset %llu out of range",
					   (unsigned long long)h->labels_offset);
		if (h->labels_size != nsamples * 2)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "label table: %llu bytes, %llu samples need %llu",
					   (unsigned long long)h->labels_size,
					   (unsigned long long)nsamples,
					   (unsigned long long)nsamples * 2);
		if (h->labels_size > h->file_size - h->labels_offset)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "label table: extends past end of file");
		end = h->labels_offset + h->labels_size;
	} else if (h->labels_size || h->labels_checksum) {
		return sprite_fail(err, -SPRITE_ECORRUPT,
				   "label table: size or checksum without an offset");
	}
	if (h->paths_offset) {
		if (h->paths_offset % SPRITE_ALIGN || h->paths_offset < end ||
		    h->paths_offset > h->file_size)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "path table: offset %llu out of range",
					   (unsigned long long)h->paths_offset);
		if (h->paths_size > h->file_size - h->paths_offset)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "path table: extends past end of file");
		/* nsamples + 1 offsets and one NUL per sample at least */
		if (h->paths_size / 9 < nsamples || h->paths_size - nsamples * 9 < 8)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "path table: %llu bytes cannot hold %llu paths",
					   (unsigned long long)h->paths_size,
					   (unsigned long long)nsamples);
	} else if (h->paths_size || h->paths_checksum) {
		return sprite_fail(err, -SPRITE_ECORRUPT,
				   "path table: size or checksum without an offset");
	}
	if (h->paths_offset)
		end = h->paths_offset + h->paths_size;
	if (h->skipped_offset) {
		if (h->skipped_offset % SPRITE_ALIGN || h->skipped_offset < end ||
		    h->skipped_offset > h->file_size)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "skipped list: offset %llu out of range",
					   (unsigned long long)h->skipped_offset);
		if (h->skipped_size > h->file_size - h->skipped_offset)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "skipped list: extends past end of file");
		/* each line "P\tR\n" at least: 4 bytes */
		if (h->skipped_size > SPRITE_SKIPPED_MAX || h->skipped_count == 0 ||
		    h->skipped_size / 4 < h->skipped_count)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "skipped list: %llu bytes for %llu lines",
					   (unsigned long long)h->skipped_size,
					   (unsigned long long)h->skipped_count);
	} else if (h->skipped_size || h->skipped_checksum || h->skipped_count) {
		return sprite_fail(err, -SPRITE_ECORRUPT,
				   "skipped list: size, count or checksum without an offset");
	}
	return 0;
}

/* The label table, read and checked whole: labels.npy and by-class/ trust it. */
static int load_labels(sprite_store *s, const struct sprite_header *h, char *err)
{
	size_t n = (size_t)h->labels_size;
	s->labels = malloc(n ? n : 1);
	if (!s->labels)
		return sprite_fail(err, -ENOMEM, "label table: out of memory for %llu labels",
				   (unsigned long long)s->nsamples);
	int r = pread_full(s->fd, s->labels, n, h->labels_offset);
	if (r < 0)
		return sprite_fail(err, r, "label table: read: %s", strerror(-r));
	if (sprite_checksum(s->labels, n) != h->labels_checksum)
		return sprite_fail(err, -SPRITE_ECHECKSUM, "label table: checksum mismatch");
	uint32_t bad = 0;
	for (uint64_t i = 0; i < s->nsamples; i++)
		bad |= (uint32_t)(s->labels[i] >= h->nclasses);
	if (bad) {
		for (uint64_t i = 0; i < s->nsamples; i++) {
			uint32_t sp = 0;
			while (sp + 1 < h->nsplits && i >= s->base[sp + 1])
				sp++;
			if (s->labels[i] >= h->nclasses)
				return sprite_fail(
					err, -SPRITE_ECORRUPT,
					"label table: %s sample %llu has label %u, only %u "
					"classes",
					h->splits[sp].name, (unsigned long long)(i - s->base[sp]),
					s->labels[i], h->nclasses);
		}
	}
	return 0;
}

int sprite_store_open(const char *path, sprite_store **out, char *err)
{
	struct sprite_header h;
	struct stat st;
	int r;

	*out = NULL;
	sprite_store *s = calloc(1, sizeof(*s));
	if (!s)
		return sprite_fail(err, -ENOMEM, "out of memory");
	pthread_mutex_init(&s->paths_lock, NULL);
	/* O_NONBLOCK: a FIFO given as a store fails below instead of hanging in open */
	s->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (s->fd < 0) {
		r = sprite_fail(err, -errno, "%s", strerror(errno));
		goto out;
	}
	if (fstat(s->fd, &st) < 0) {
		r = sprite_fail(err, -errno, "%s", strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		r = sprite_fail(err, -(S_ISDIR(st.st_mode) ? EISDIR : EINVAL), "%s",
				S_ISFIFO(st.st_mode) ? "a FIFO, not a regular file"
						     : "not a regular file");
		goto out;
	}
	if (fcntl(s->fd, F_SETFL, 0) < 0) {
		r = sprite_fail(err, -errno, "%s", strerror(errno));
		goto out;
	}
	uint64_t size = (uint64_t)st.st_size;

	memset(&h, 0, sizeof(h));
	size_t want = size < sizeof(h) ? (size_t)size : sizeof(h);
	r = pread_full(s->fd, &h, want, 0);
	if (r < 0) {
		r = sprite_fail(err, r, "reading header: %s", strerror(-r));
		goto out;
	}
	if (want < 8 || memcmp(h.magic, SPRITE_MAGIC, 8) != 0) {
		r = sprite_fail(err, -SPRITE_EBADMAGIC, "not a sprite store (bad magic)");
		goto out;
	}
	if (want >= 12 && h.version > SPRITE_VERSION) {
		r = sprite_fail(err, -SPRITE_EVERSION, "version %u is newer than %u", h.version,
				SPRITE_VERSION);
		goto out;
	}
	if (size < SPRITE_HEADER_SIZE) {
		r = sprite_fail(err, -SPRITE_ETRUNC,
				"truncated: file is %llu bytes, the header needs %u",
				(unsigned long long)size, SPRITE_HEADER_SIZE);
		goto out;
	}
	if (h.version == 0) {
		r = sprite_fail(err, -SPRITE_ECORRUPT, "version 0 is invalid");
		goto out;
	}
	uint64_t sum = h.header_checksum;
	h.header_checksum = 0;
	if (sprite_checksum(&h, sizeof(h)) != sum) {
		r = sprite_fail(err, -SPRITE_ECHECKSUM, "header: checksum mismatch");
		goto out;
	}
	h.header_checksum = sum;
	if (h.file_size > size) {
		r = sprite_fail(err, -SPRITE_ETRUNC,
				"truncated: file is %llu bytes, header says %llu",
				(unsigned long long)size, (unsigned long long)h.file_size);
		goto out;
	}
	r = check_header(&h, size, err);
	if (r < 0)
		goto out;

	if (h.nsheets) {
		s->sheets = malloc((size_t)h.index_size);
		if (!s->sheets) {
			r = sprite_fail(err, -ENOMEM, "out of memory for %u index entries",
					h.nsheets);
			goto out;
		}
		r = pread_full(s->fd, s->sheets, (size_t)h.index_size, h.index_offset);
		if (r < 0) {
			r = sprite_fail(err, r, "reading index: %s", strerror(-r));
			goto out;
		}
	}
	if (sprite_checksum(s->sheets, (size_t)h.index_size) != h.index_checksum) {
		r = sprite_fail(err, -SPRITE_ECHECKSUM, "index: checksum mismatch");
		goto out;
	}
	r = check_index(&h, s->sheets, err);
	if (r < 0)
		goto out;
	r = load_names(s, &h, err);
	if (r < 0)
		goto out;
	for (uint32_t i = 0; i < h.nsplits; i++) {
		s->base[i] = s->nsamples;
		s->nsamples += h.splits[i].count;
	}
	if (h.version >= 3) {
		r = check_tables(&h, s->nsamples, err);
		if (r == 0 && h.labels_offset)
			r = load_labels(s, &h, err);
		if (r < 0)
			goto out;
		s->paths_offset = h.paths_offset;
		s->paths_size = h.paths_size;
		s->paths_checksum = h.paths_checksum;
		s->skipped_offset = h.skipped_offset;
		s->skipped_size = h.skipped_size;
		s->skipped_checksum = h.skipped_checksum;
		s->skipped_count = h.skipped_count;
	}

	memcpy(s->splits, h.splits, sizeof(s->splits));
	struct sprite_store_info *in = &s->info;
	memcpy(in->name, h.name, SPRITE_NAME_MAX);
	in->tile_h = h.tile_h;
	in->tile_w = h.tile_w;
	in->tile_c = h.tile_c;
	in->sheet_tiles = h.sheet_tiles;
	in->nclasses = h.nclasses;
	in->nsplits = h.nsplits;
	in->nsheets = h.nsheets;
	in->file_size = h.file_size;
	in->version = h.version;
	in->fit = h.fit;
	in->background = h.background;
	in->order_window = h.version >= 2
				   ? h.order_window
				   : sprite_order_window(h.sheet_tiles,
							 (uint64_t)h.tile_h * h.tile_w * h.tile_c);
	in->splits = s->splits;
	in->sheets = s->sheets;
	in->class_names = s->class;
	*out = s;
	return 0;
out:
	sprite_store_close(s);
	return r;
}

void sprite_store_close(sprite_store *s)
{
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	free(s->sheets);
	free(s->names);
	free(s->class);
	free(s->labels);
	free(s->paths_block);
	pthread_mutex_destroy(&s->paths_lock);
	free(s);
}

const struct sprite_store_info *sprite_store_info(const sprite_store *s)
{
	return &s->info;
}

int sprite_store_fd(const sprite_store *s)
{
	return s->fd;
}

const uint16_t *sprite_store_labels(const sprite_store *s, uint32_t split)
{
	if (!s->labels || split >= s->info.nsplits)
		return NULL;
	return s->labels + s->base[split];
}

int sprite_store_has_paths(const sprite_store *s)
{
	return s->paths_offset != 0;
}

/* Read and check the path table (under paths_lock). */
static int load_paths(sprite_store *s, char *err)
{
	const uint64_t n = s->nsamples;
	const size_t size = (size_t)s->paths_size;
	uint8_t *b = malloc(size);
	if (!b)
		return sprite_fail(err, -ENOMEM, "path table: out of memory for %zu bytes", size);
	s->paths_block = b;
	int r = pread_full(s->fd, b, size, s->paths_offset);
	if (r < 0)
		return sprite_fail(err, r, "path table: read: %s", strerror(-r));
	if (sprite_checksum(b, size) != s->paths_checksum)
		return sprite_fail(err, -SPRITE_ECHECKSUM, "path table: checksum mismatch");
	uint64_t *off = (uint64_t *)(void *)b; /* malloc's alignment suits uint64_t */
	const char *str = (const char *)b + 8 * (n + 1);
	const uint64_t slen = size - 8 * (n + 1); /* check_tables made it fit */
	if (off[n] != slen)
		return sprite_fail(err, -SPRITE_ECORRUPT,
				   "path table: strings hold %llu bytes, not %llu",
				   (unsigned long long)slen, (unsigned long long)off[n]);
	/* One pass: each path starts where the last one's NUL ended, and is one line. */
	uint64_t pos = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (off[i] != pos)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "path table: path %llu starts at %llu, expected %llu",
					   (unsigned long long)i, (unsigned long long)off[i],
					   (unsigned long long)pos);
		while (pos < slen && (unsigned char)str[pos] >= 0x20)
			pos++;
		if (pos == slen || str[pos] != 0)
			return sprite_fail(err, -SPRITE_ECORRUPT, "path table: path %llu %s",
					   (unsigned long long)i,
					   pos == slen ? "is not NUL-terminated"
						       : "has a control character");
		pos++;
	}
	if (pos != slen)
		return sprite_fail(err, -SPRITE_ECORRUPT, "path table: %llu trailing bytes",
				   (unsigned long long)(slen - pos));
	s->path_off = off;
	s->path_str = str;
	return 0;
}

int sprite_store_load_paths(const sprite_store *cs, char *err)
{
	sprite_store *s = (sprite_store *)cs; /* loading once is not a visible change */
	if (!s->paths_offset)
		return sprite_fail(err, -ENOENT, "the store has no path table");
	if (__atomic_load_n(&s->paths_state, __ATOMIC_ACQUIRE) == 1)
		return 0; /* loaded: no lock for each sample's lookup */
	pthread_mutex_lock(&s->paths_lock);
	if (s->paths_state == 0) {
		int r = load_paths(s, s->paths_err);
		if (r < 0) {
			free(s->paths_block);
			s->paths_block = NULL;
		}
		__atomic_store_n(&s->paths_state, r < 0 ? r : 1, __ATOMIC_RELEASE);
	}
	int r = s->paths_state < 0 ? s->paths_state : 0;
	if (r < 0 && err)
		memcpy(err, s->paths_err, SPRITE_ERR_MAX);
	pthread_mutex_unlock(&s->paths_lock);
	return r;
}

const char *sprite_store_sample_path(const sprite_store *s, uint32_t split, uint64_t sample)
{
	if (split >= s->info.nsplits || sample >= s->splits[split].count ||
	    sprite_store_load_paths(s, NULL) < 0)
		return NULL;
	return s->path_str + s->path_off[s->base[split] + sample];
}

int64_t sprite_store_split_paths_size(const sprite_store *s, uint32_t split)
{
	if (split >= s->info.nsplits)
		return -ERANGE;
	if (!s->paths_offset)
		return -ENOENT;
	uint64_t a = s->base[split], b = a + s->splits[split].count;
	if (__atomic_load_n(&s->paths_state, __ATOMIC_ACQUIRE) == 1)
		return (int64_t)(s->path_off[b] - s->path_off[a]);
	/* Two offsets, not the table: unchecked, but what a load would check. */
	uint64_t oa, ob;
	int r = pread_full(s->fd, &oa, 8, s->paths_offset + 8 * a);
	if (r == 0)
		r = pread_full(s->fd, &ob, 8, s->paths_offset + 8 * b);
	if (r < 0)
		return r;
	if (oa > ob || ob > s->paths_size)
		return -SPRITE_ECORRUPT;
	return (int64_t)(ob - oa);
}

int64_t sprite_store_split_paths(const sprite_store *s, uint32_t split, const char **strings)
{
	if (split >= s->info.nsplits)
		return -ERANGE;
	int r = sprite_store_load_paths(s, NULL);
	if (r < 0)
		return r;
	uint64_t a = s->base[split], b = a + s->splits[split].count;
	*strings = s->path_str + s->path_off[a];
	return (int64_t)(s->path_off[b] - s->path_off[a]);
}

int sprite_store_class_counts(const sprite_store *s, uint32_t split, uint64_t *counts)
{
	const uint16_t *lt = sprite_store_labels(s, split);
	if (split >= s->info.nsplits)
		return -ERANGE;
	if (!lt)
		return -ENOENT;
	memset(counts, 0, (size_t)s->info.nclasses * sizeof *counts);
	for (uint64_t i = 0; i < s->splits[split].count; i++)
		counts[lt[i]]++; /* < nclasses: checked at open */
	return 0;
}

uint64_t sprite_store_skipped_count(const sprite_store *s)
{
	return s->skipped_count;
}

uint64_t sprite_store_skipped_size(const sprite_store *s)
{
	return s->skipped_size;
}

/* 0 when the n bytes of t are count lines "PATH\tREASON\n", both parts non-empty. */
static int check_skipped(const char *t, size_t n, uint64_t count, char *err)
{
	uint64_t lines = 0;
	size_t at = 0;
	while (at < n) {
		size_t start = at, tab = 0;
		int tabs = 0;
		for (; at < n && t[at] != '\n'; at++) {
			unsigned char ch = (unsigned char)t[at];
			if (ch == '\t' && !tabs++)
				tab = at;
			else if (ch < 0x20)
				return sprite_fail(
					err, -SPRITE_ECORRUPT,
					"skipped list: line %llu has a control character",
					(unsigned long long)lines + 1);
		}
		if (at == n || tabs != 1 || tab == start || tab + 1 == at)
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "skipped list: line %llu is not \"PATH<tab>REASON\"",
					   (unsigned long long)lines + 1);
		at++;
		lines++;
	}
	if (lines != count)
		return sprite_fail(err, -SPRITE_ECORRUPT,
				   "skipped list: %llu lines, the header says %llu",
				   (unsigned long long)lines, (unsigned long long)count);
	return 0;
}

int sprite_store_read_skipped(const sprite_store *s, char **text, size_t *len, char *err)
{
	*text = NULL;
	*len = 0;
	const size_t size = (size_t)s->skipped_size; /* <= SPRITE_SKIPPED_MAX: checked at open */
	char *b = malloc(size + 1);
	if (!b)
		return sprite_fail(err, -ENOMEM, "skipped list: out of memory for %zu bytes", size);
	int r = size ? pread_full(s->fd, b, size, s->skipped_offset) : 0;
	if (r < 0)
		r = sprite_fail(err, r, "skipped list: read: %s", strerror(-r));
	else if (size && sprite_checksum(b, size) != s->skipped_checksum)
		r = sprite_fail(err, -SPRITE_ECHECKSUM, "skipped list: checksum mismatch");
	else
		r = check_skipped(b, size, s->skipped_count, err);
	if (r < 0) {
		free(b);
		return r;
	}
	b[size] = 0;
	*text = b;
	*len = size;
	return 0;
}

int sprite_store_find_split(const sprite_store *s, const char *name)
{
	for (uint32_t i = 0; i < s->info.nsplits; i++)
		if (strcmp(s->splits[i].name, name) == 0)
			return (int)i;
	return -ENOENT;
}
