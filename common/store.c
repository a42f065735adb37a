/*
 * store.c - read and write sprite stores (format.h, docs/FORMAT.md).
 *
 * Reader: sprite_store_open() reads the header, the index and the class
 * names with pread() and checks every field before anything is allocated
 * from it or trusted, so that the rest of the project (the FUSE daemon
 * above all) can index the metadata without further checks. After open the
 * handle is immutable: all later reads use pread() on the one descriptor,
 * so any number of threads may read and decode sheets concurrently.
 * Sheet contents are only checked when decoded (sprite_sheet_decode), which
 * sits on the daemon's hot path: one XXH3 pass over the stored bytes, one
 * LZ4_decompress_safe, a header parse and a walk over the labels and ids
 * (the XXH3 of the decoded bytes is left to --verify, see there).
 *
 * Writer: samples are gathered into one sheet buffer laid out as a batch
 * file, compressed with LZ4 (kept raw when that is not smaller) and written
 * 4 KiB-aligned and zero-padded to the next 4 KiB, so that O_DIRECT readers
 * can read whole aligned extents. The index, the names and finally the header
 * follow; everything goes to "<path>.tmp.<pid>", which is fsynced and renamed
 * over path, then the directory is fsynced. A crash leaves at worst a stray
 * temp file, never a half-written store under the final name.
 */
#include "common/store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lz4.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/batch.h"
#include "common/perm.h"
#include "common/util.h"

#define ALIGN_UP(x)    (((x) + (uint64_t)SPRITE_ALIGN - 1) & ~((uint64_t)SPRITE_ALIGN - 1))
#define CLASS_NAME_MAX 255u /* bytes of one class name, without the NUL */

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
};

static int fail(char *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, SPRITE_ERR_MAX, fmt, ap);
		va_end(ap);
	}
	return -code;
}

/* sprite_pread_full, with a file that ends early reported as truncation. */
static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	int r = sprite_pread_full(fd, buf, len, off);
	return r == -ENODATA ? -SPRITE_ETRUNC : r;
}

/* A name the mount can use as a directory entry and a terminal can print. */
static int valid_class_name(const char *s, size_t len)
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

static int valid_split_name(const char *s)
{
	size_t len = strnlen(s, SPRITE_SPLIT_NAME_MAX);
	if (len == 0 || len == SPRITE_SPLIT_NAME_MAX)
		return 0;
	return valid_class_name(s, len);
}

static uint64_t sheet_raw_size(uint32_t count, uint32_t h, uint32_t w, uint32_t c)
{
	struct sprite_batch_header b;
	sprite_batch_layout(count, h, w, c, &b);
	return b.total_size;
}

/* ---- reader ---------------------------------------------------------- */

static int check_header(const struct sprite_header *h, uint64_t st_size, char *err)
{
	if (h->header_size != SPRITE_HEADER_SIZE)
		return fail(err, SPRITE_ECORRUPT, "header size %u is not %u", h->header_size,
			    SPRITE_HEADER_SIZE);
	if (h->tile_h == 0 || h->tile_w == 0 || h->tile_h > SPRITE_MAX_TILE_SIDE ||
	    h->tile_w > SPRITE_MAX_TILE_SIDE)
		return fail(err, SPRITE_ECORRUPT, "tile size %ux%u out of range (1..%u)", h->tile_h,
			    h->tile_w, SPRITE_MAX_TILE_SIDE);
	if (h->tile_c == 0 || h->tile_c > SPRITE_MAX_CHANNELS)
		return fail(err, SPRITE_ECORRUPT, "tile channels %u out of range (1..%u)",
			    h->tile_c, SPRITE_MAX_CHANNELS);
	if (h->sheet_tiles == 0 || h->sheet_tiles > SPRITE_MAX_SHEET_TILES)
		return fail(err, SPRITE_ECORRUPT, "sheet tiles %u out of range (1..%u)",
			    h->sheet_tiles, SPRITE_MAX_SHEET_TILES);
	if (sheet_raw_size(h->sheet_tiles, h->tile_h, h->tile_w, h->tile_c) > SPRITE_MAX_SHEET_RAW)
		return fail(err, SPRITE_ECORRUPT, "a sheet of %u tiles of %ux%ux%u exceeds 1 GiB",
			    h->sheet_tiles, h->tile_h, h->tile_w, h->tile_c);
	if (h->nclasses == 0 || h->nclasses > SPRITE_MAX_CLASSES)
		return fail(err, SPRITE_ECORRUPT, "class count %u out of range (1..%u)",
			    h->nclasses, SPRITE_MAX_CLASSES);
	if (h->nsplits == 0 || h->nsplits > SPRITE_MAX_SPLITS)
		return fail(err, SPRITE_ECORRUPT, "split count %u out of range (1..%u)", h->nsplits,
			    SPRITE_MAX_SPLITS);
	if (h->flags != 0)
		return fail(err, SPRITE_ECORRUPT, "unknown flags 0x%x", h->flags);
	if (h->fit > SPRITE_FIT_PAD) /* 0 in stores before the field: stretch, as they did */
		return fail(err, SPRITE_ECORRUPT, "unknown fit mode %u", h->fit);
	if (h->file_size < st_size)
		return fail(err, SPRITE_ECORRUPT, "file is %llu bytes, header says %llu",
			    (unsigned long long)st_size, (unsigned long long)h->file_size);
	if (h->file_size % SPRITE_ALIGN)
		return fail(err, SPRITE_ECORRUPT, "file size %llu is not a multiple of %u",
			    (unsigned long long)h->file_size, SPRITE_ALIGN);
	if (memchr(h->name, 0, SPRITE_NAME_MAX) == NULL)
		return fail(err, SPRITE_ECORRUPT, "data set name is not NUL-terminated");

	/* Every sheet takes at least one aligned block: bounds nsheets before any allocation. */
	uint64_t blocks = (h->file_size - SPRITE_HEADER_SIZE) / SPRITE_ALIGN;
	if (h->nsheets > blocks)
		return fail(err, SPRITE_ECORRUPT,
			    "sheet count %u cannot fit in a file of %llu bytes", h->nsheets,
			    (unsigned long long)h->file_size);
	if (h->index_offset % SPRITE_ALIGN || h->index_offset < SPRITE_HEADER_SIZE ||
	    h->index_offset > h->file_size)
		return fail(err, SPRITE_ECORRUPT, "index offset %llu out of range",
			    (unsigned long long)h->index_offset);
	if (h->index_size != (uint64_t)h->nsheets * sizeof(struct sprite_sheet_entry))
		return fail(err, SPRITE_ECORRUPT, "index size %llu does not match %u sheets",
			    (unsigned long long)h->index_size, h->nsheets);
	if (h->index_size > h->file_size - h->index_offset)
		return fail(err, SPRITE_ECORRUPT, "index extends past end of file");
	if (h->names_offset % SPRITE_ALIGN || h->names_offset < h->index_offset + h->index_size ||
	    h->names_offset > h->file_size)
		return fail(err, SPRITE_ECORRUPT, "names offset %llu out of range",
			    (unsigned long long)h->names_offset);
	if (h->names_size < h->nclasses ||
	    h->names_size > (uint64_t)h->nclasses * (CLASS_NAME_MAX + 1))
		return fail(err, SPRITE_ECORRUPT, "names size %llu does not fit %u classes",
			    (unsigned long long)h->names_size, h->nclasses);
	if (h->names_size > h->file_size - h->names_offset)
		return fail(err, SPRITE_ECORRUPT, "names extend past end of file");

	uint64_t sheets = 0;
	for (uint32_t i = 0; i < h->nsplits; i++) {
		const struct sprite_split_entry *sp = &h->splits[i];
		if (!valid_split_name(sp->name))
			return fail(err, SPRITE_ECORRUPT, "split %u: bad name", i);
		for (uint32_t j = 0; j < i; j++)
			if (strcmp(h->splits[j].name, sp->name) == 0)
				return fail(err, SPRITE_ECORRUPT, "split %u: name \"%s\" repeated",
					    i, sp->name);
		if (sp->first_sheet != sheets)
			return fail(err, SPRITE_ECORRUPT,
				    "split %u (%s): first sheet %u, expected %llu", i, sp->name,
				    sp->first_sheet, (unsigned long long)sheets);
		if (sp->count > UINT32_MAX) /* sample ids are uint32 */
			return fail(err, SPRITE_ECORRUPT, "split %u (%s): %llu samples exceed 2^32",
				    i, sp->name, (unsigned long long)sp->count);
		uint64_t want = (sp->count + h->sheet_tiles - 1) / h->sheet_tiles;
		if (sp->count > (uint64_t)h->nsheets * h->sheet_tiles || sp->nsheets != want)
			return fail(err, SPRITE_ECORRUPT,
				    "split %u (%s): %llu samples do not match %u sheets", i,
				    sp->name, (unsigned long long)sp->count, sp->nsheets);
		sheets += sp->nsheets;
		if (sheets > h->nsheets)
			break;
	}
	if (sheets != h->nsheets)
		return fail(err, SPRITE_ECORRUPT, "splits hold %llu sheets, header says %u",
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
			return fail(err, SPRITE_ECORRUPT,
				    "index entry %u: offset %llu out of range", i,
				    (unsigned long long)e->offset);
		if (e->offset > h->file_size || e->stored_size > h->file_size - e->offset)
			return fail(err, SPRITE_ECORRUPT, "index entry %u: offset past end of file",
				    i);
		if (e->offset < prev_end)
			return fail(err, SPRITE_ECORRUPT,
				    "index entry %u: overlaps the previous %s", i,
				    i ? "sheet" : "header");
		if (e->stored_size == 0 || e->offset + e->stored_size > h->index_offset)
			return fail(err, SPRITE_ECORRUPT,
				    "index entry %u: stored size %u out of range", i,
				    e->stored_size);
		prev_end = e->offset + e->stored_size;
		if (e->split != split || e->first != first || e->count != count)
			return fail(
				err, SPRITE_ECORRUPT,
				"index entry %u: split %u first %llu count %u, expected split %u "
				"first %llu count %llu",
				i, e->split, (unsigned long long)e->first, e->count, split,
				(unsigned long long)first, (unsigned long long)count);
		if (e->raw_size != sheet_raw_size(e->count, h->tile_h, h->tile_w, h->tile_c))
			return fail(err, SPRITE_ECORRUPT,
				    "index entry %u: raw size %u does not match %u tiles", i,
				    e->raw_size, e->count);
		if (e->codec == SPRITE_CODEC_RAW) {
			if (e->stored_size != e->raw_size)
				return fail(err, SPRITE_ECORRUPT,
					    "index entry %u: raw sheet of %u bytes stored as %u", i,
					    e->raw_size, e->stored_size);
		} else if (e->codec == SPRITE_CODEC_LZ4) {
			if (e->stored_size > (uint64_t)LZ4_compressBound((int)e->raw_size))
				return fail(err, SPRITE_ECORRUPT,
					    "index entry %u: lz4 size %u exceeds the bound for %u",
					    i, e->stored_size, e->raw_size);
		} else {
			return fail(err, SPRITE_ECORRUPT, "index entry %u: unknown codec %u", i,
				    e->codec);
		}
		if (e->reserved != 0)
			return fail(err, SPRITE_ECORRUPT, "index entry %u: reserved byte set", i);
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
		return fail(err, ENOMEM, "out of memory for %u class names", h->nclasses);
	r = pread_full(s->fd, s->names, n, h->names_offset);
	if (r < 0)
		return fail(err, -r, "reading class names: %s", strerror(-r));
	if (sprite_checksum(s->names, n) != h->names_checksum)
		return fail(err, SPRITE_ECHECKSUM, "class names: checksum mismatch");
	size_t off = 0;
	for (uint32_t i = 0; i < h->nclasses; i++) {
		const char *p = s->names + off;
		const char *z = memchr(p, 0, n - off);
		if (!z)
			return fail(err, SPRITE_ECORRUPT, "class name %u is not NUL-terminated", i);
		if (!valid_class_name(p, (size_t)(z - p)))
			return fail(err, SPRITE_ECORRUPT,
				    "class name %u is empty, too long or has "
				    "'/' or control characters",
				    i);
		s->class[i] = p;
		off += (size_t)(z - p) + 1;
	}
	if (off != n)
		return fail(err, SPRITE_ECORRUPT, "names block has %zu trailing bytes", n - off);
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
			return fail(err, SPRITE_ECORRUPT, "label table: offset %llu out of range",
				    (unsigned long long)h->labels_offset);
		if (h->labels_size != nsamples * 2)
			return fail(err, SPRITE_ECORRUPT,
				    "label table: %llu bytes, %llu samples need %llu",
				    (unsigned long long)h->labels_size,
				    (unsigned long long)nsamples, (unsigned long long)nsamples * 2);
		if (h->labels_size > h->file_size - h->labels_offset)
			return fail(err, SPRITE_ECORRUPT, "label table: extends past end of file");
		end = h->labels_offset + h->labels_size;
	} else if (h->labels_size || h->labels_checksum) {
		return fail(err, SPRITE_ECORRUPT,
			    "label table: size or checksum without an offset");
	}
	if (h->paths_offset) {
		if (h->paths_offset % SPRITE_ALIGN || h->paths_offset < end ||
		    h->paths_offset > h->file_size)
			return fail(err, SPRITE_ECORRUPT, "path table: offset %llu out of range",
				    (unsigned long long)h->paths_offset);
		if (h->paths_size > h->file_size - h->paths_offset)
			return fail(err, SPRITE_ECORRUPT, "path table: extends past end of file");
		/* nsamples + 1 offsets and one NUL per sample at least */
		if (h->paths_size / 9 < nsamples || h->paths_size - nsamples * 9 < 8)
			return fail(err, SPRITE_ECORRUPT,
				    "path table: %llu bytes cannot hold %llu paths",
				    (unsigned long long)h->paths_size,
				    (unsigned long long)nsamples);
	} else if (h->paths_size || h->paths_checksum) {
		return fail(err, SPRITE_ECORRUPT, "path table: size or checksum without an offset");
	}
	return 0;
}

/* The label table, read and checked whole: labels.npy and by-class/ trust it. */
static int load_labels(sprite_store *s, const struct sprite_header *h, char *err)
{
	size_t n = (size_t)h->labels_size;
	s->labels = malloc(n ? n : 1);
	if (!s->labels)
		return fail(err, ENOMEM, "label table: out of memory for %llu labels",
			    (unsigned long long)s->nsamples);
	int r = pread_full(s->fd, s->labels, n, h->labels_offset);
	if (r < 0)
		return fail(err, -r, "label table: read: %s", strerror(-r));
	if (sprite_checksum(s->labels, n) != h->labels_checksum)
		return fail(err, SPRITE_ECHECKSUM, "label table: checksum mismatch");
	uint32_t bad = 0;
	for (uint64_t i = 0; i < s->nsamples; i++)
		bad |= (uint32_t)(s->labels[i] >= h->nclasses);
	if (bad) {
		for (uint64_t i = 0; i < s->nsamples; i++) {
			uint32_t sp = 0;
			while (sp + 1 < h->nsplits && i >= s->base[sp + 1])
				sp++;
			if (s->labels[i] >= h->nclasses)
				return fail(err, SPRITE_ECORRUPT,
					    "label table: %s sample %llu has label %u, only %u "
					    "classes",
					    h->splits[sp].name,
					    (unsigned long long)(i - s->base[sp]), s->labels[i],
					    h->nclasses);
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
		return fail(err, ENOMEM, "out of memory");
	pthread_mutex_init(&s->paths_lock, NULL);
	s->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (s->fd < 0) {
		r = fail(err, errno, "%s", strerror(errno));
		goto out;
	}
	if (fstat(s->fd, &st) < 0) {
		r = fail(err, errno, "%s", strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		r = fail(err, S_ISDIR(st.st_mode) ? EISDIR : EINVAL, "not a regular file");
		goto out;
	}
	uint64_t size = (uint64_t)st.st_size;

	memset(&h, 0, sizeof(h));
	size_t want = size < sizeof(h) ? (size_t)size : sizeof(h);
	r = pread_full(s->fd, &h, want, 0);
	if (r < 0) {
		r = fail(err, -r, "reading header: %s", strerror(-r));
		goto out;
	}
	if (want < 8 || memcmp(h.magic, SPRITE_MAGIC, 8) != 0) {
		r = fail(err, SPRITE_EBADMAGIC, "not a sprite store (bad magic)");
		goto out;
	}
	if (want >= 12 && h.version > SPRITE_VERSION) {
		r = fail(err, SPRITE_EVERSION, "version %u is newer than %u", h.version,
			 SPRITE_VERSION);
		goto out;
	}
	if (size < SPRITE_HEADER_SIZE) {
		r = fail(err, SPRITE_ETRUNC, "truncated: file is %llu bytes, the header needs %u",
			 (unsigned long long)size, SPRITE_HEADER_SIZE);
		goto out;
	}
	if (h.version == 0) {
		r = fail(err, SPRITE_ECORRUPT, "version 0 is invalid");
		goto out;
	}
	uint64_t sum = h.header_checksum;
	h.header_checksum = 0;
	if (sprite_checksum(&h, sizeof(h)) != sum) {
		r = fail(err, SPRITE_ECHECKSUM, "header: checksum mismatch");
		goto out;
	}
	h.header_checksum = sum;
	if (h.file_size > size) {
		r = fail(err, SPRITE_ETRUNC, "truncated: file is %llu bytes, header says %llu",
			 (unsigned long long)size, (unsigned long long)h.file_size);
		goto out;
	}
	r = check_header(&h, size, err);
	if (r < 0)
		goto out;

	if (h.nsheets) {
		s->sheets = malloc((size_t)h.index_size);
		if (!s->sheets) {
			r = fail(err, ENOMEM, "out of memory for %u index entries", h.nsheets);
			goto out;
		}
		r = pread_full(s->fd, s->sheets, (size_t)h.index_size, h.index_offset);
		if (r < 0) {
			r = fail(err, -r, "reading index: %s", strerror(-r));
			goto out;
		}
	}
	if (sprite_checksum(s->sheets, (size_t)h.index_size) != h.index_checksum) {
		r = fail(err, SPRITE_ECHECKSUM, "index: checksum mismatch");
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
		return fail(err, ENOMEM, "path table: out of memory for %zu bytes", size);
	s->paths_block = b;
	int r = pread_full(s->fd, b, size, s->paths_offset);
	if (r < 0)
		return fail(err, -r, "path table: read: %s", strerror(-r));
	if (sprite_checksum(b, size) != s->paths_checksum)
		return fail(err, SPRITE_ECHECKSUM, "path table: checksum mismatch");
	uint64_t *off = (uint64_t *)(void *)b; /* malloc's alignment suits uint64_t */
	const char *str = (const char *)b + 8 * (n + 1);
	const uint64_t slen = size - 8 * (n + 1); /* check_tables made it fit */
	if (off[n] != slen)
		return fail(err, SPRITE_ECORRUPT, "path table: strings hold %llu bytes, not %llu",
			    (unsigned long long)slen, (unsigned long long)off[n]);
	/* One pass: each path starts where the last one's NUL ended, and is one line. */
	uint64_t pos = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (off[i] != pos)
			return fail(err, SPRITE_ECORRUPT,
				    "path table: path %llu starts at %llu, expected %llu",
				    (unsigned long long)i, (unsigned long long)off[i],
				    (unsigned long long)pos);
		while (pos < slen && (unsigned char)str[pos] >= 0x20)
			pos++;
		if (pos == slen || str[pos] != 0)
			return fail(err, SPRITE_ECORRUPT, "path table: path %llu %s",
				    (unsigned long long)i,
				    pos == slen ? "is not NUL-terminated"
						: "has a control character");
		pos++;
	}
	if (pos != slen)
		return fail(err, SPRITE_ECORRUPT, "path table: %llu trailing bytes",
			    (unsigned long long)(slen - pos));
	s->path_off = off;
	s->path_str = str;
	return 0;
}

int sprite_store_load_paths(const sprite_store *cs, char *err)
{
	sprite_store *s = (sprite_store *)cs; /* loading once is not a visible change */
	if (!s->paths_offset)
		return fail(err, ENOENT, "the store has no path table");
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

int sprite_store_find_split(const sprite_store *s, const char *name)
{
	for (uint32_t i = 0; i < s->info.nsplits; i++)
		if (strcmp(s->splits[i].name, name) == 0)
			return (int)i;
	return -ENOENT;
}

int64_t sprite_store_sheet_raw_size(const sprite_store *s, uint32_t i)
{
	if (i >= s->info.nsheets)
		return -ERANGE;
	return s->sheets[i].raw_size;
}

int64_t sprite_sheet_decode(const sprite_store *s, uint32_t i, const void *stored,
			    size_t stored_len, void *raw, size_t raw_cap, char *err)
{
	if (i >= s->info.nsheets)
		return fail(err, ERANGE, "sheet %u does not exist (%u sheets)", i, s->info.nsheets);
	const struct sprite_sheet_entry *e = &s->sheets[i];

	if (stored_len < e->stored_size)
		return fail(err, SPRITE_ETRUNC, "sheet %u: %zu of %u stored bytes", i, stored_len,
			    e->stored_size);
	if (raw_cap < e->raw_size)
		return fail(err, ENOBUFS, "sheet %u: buffer of %zu bytes, needs %u", i, raw_cap,
			    e->raw_size);
	if (sprite_checksum(stored, e->stored_size) != e->checksum)
		return fail(err, SPRITE_ECHECKSUM, "sheet %u: checksum mismatch", i);
	if (e->codec == SPRITE_CODEC_LZ4) {
		int n = LZ4_decompress_safe(stored, raw, (int)e->stored_size, (int)e->raw_size);
		if (n != (int)e->raw_size)
			return fail(err, SPRITE_ECORRUPT,
				    "sheet %u: lz4 data does not decode to %u "
				    "bytes",
				    i, e->raw_size);
	} else if (stored != raw) {
		memcpy(raw, stored, e->raw_size);
	}
	/*
	 * No second pass over the decoded bytes: the stored checksum matched,
	 * so these are the bytes the writer stored (XXH3-64 over them, from an
	 * index itself checked), and both codecs are deterministic - raw bytes
	 * are the stored ones, and lz4 gives one output for one input, here
	 * exactly raw_size bytes. The writer computes raw_checksum from the very
	 * buffer it compresses, so a pass here would only catch memory going
	 * bad under us, at the cost of an XXH3 pass over 2-3x the bytes on
	 * every cold load. sprite_store_verify_sheets() still checks it.
	 */

	struct sprite_batch b;
	char berr[SPRITE_ERR_MAX];
	int r = sprite_batch_parse(raw, e->raw_size, &b, berr);
	if (r < 0)
		return fail(err, SPRITE_ECORRUPT, "sheet %u: %s", i, berr);
	if (b.count != e->count || b.h != s->info.tile_h || b.w != s->info.tile_w ||
	    b.c != s->info.tile_c || b.split != e->split)
		return fail(err, SPRITE_ECORRUPT, "sheet %u: batch header does not match the index",
			    i);
	const uint32_t nclasses = s->info.nclasses;
	const uint32_t first = (uint32_t)e->first;
	uint32_t bad = 0;
	/* Branch-free accumulation so that the loop vectorises. */
	for (uint32_t k = 0; k < b.count; k++)
		bad |= (uint32_t)(b.labels[k] >= nclasses) | (b.ids[k] ^ (first + k));
	if (bad) {
		for (uint32_t k = 0; k < b.count; k++) {
			if (b.labels[k] >= nclasses)
				return fail(err, SPRITE_ECORRUPT,
					    "sheet %u: slot %u has label %u, only %u classes", i, k,
					    b.labels[k], nclasses);
			if (b.ids[k] != first + k)
				return fail(err, SPRITE_ECORRUPT,
					    "sheet %u: slot %u has id %u, expected %u", i, k,
					    b.ids[k], first + k);
		}
	}
	/* A sheet never disagrees with the label table that labels.npy is served from. */
	if (s->labels) {
		const uint16_t *t = s->labels + s->base[e->split] + first;
		if (memcmp(b.labels, t, (size_t)b.count * 2) != 0) {
			uint32_t k = 0;
			while (b.labels[k] == t[k])
				k++;
			return fail(err, SPRITE_ECORRUPT,
				    "sheet %u: slot %u has label %u, the label table %u", i, k,
				    b.labels[k], t[k]);
		}
	}
	return e->raw_size;
}

int64_t sprite_store_read_sheet(const sprite_store *s, uint32_t i, void *raw, size_t raw_cap,
				char *err)
{
	if (i >= s->info.nsheets)
		return fail(err, ERANGE, "sheet %u does not exist (%u sheets)", i, s->info.nsheets);
	const struct sprite_sheet_entry *e = &s->sheets[i];
	void *buf = raw;
	int r;

	if (raw_cap < e->raw_size)
		return fail(err, ENOBUFS, "sheet %u: buffer of %zu bytes, needs %u", i, raw_cap,
			    e->raw_size);
	if (e->codec != SPRITE_CODEC_RAW) {
		buf = malloc(e->stored_size);
		if (!buf)
			return fail(err, ENOMEM, "sheet %u: out of memory", i);
	}
	r = pread_full(s->fd, buf, e->stored_size, e->offset);
	int64_t n;
	if (r == -SPRITE_ETRUNC)
		n = fail(err, SPRITE_ETRUNC, "sheet %u: file ends inside the sheet", i);
	else if (r < 0)
		n = fail(err, -r, "sheet %u: read: %s", i, strerror(-r));
	else
		n = sprite_sheet_decode(s, i, buf, e->stored_size, raw, raw_cap, err);
	if (buf != raw)
		free(buf);
	return n;
}

int sprite_store_locate(const sprite_store *s, uint32_t split, uint64_t sample, uint32_t *sheet,
			uint32_t *slot)
{
	if (split >= s->info.nsplits || sample >= s->splits[split].count)
		return -ERANGE;
	uint32_t t = s->info.sheet_tiles;
	*sheet = s->splits[split].first_sheet + (uint32_t)(sample / t);
	*slot = (uint32_t)(sample % t);
	return 0;
}

int64_t sprite_store_verify_sheets(const sprite_store *s,
				   void (*on_bad)(void *ctx, uint32_t sheet, int error,
						  const char *why),
				   void *ctx, char *err)
{
	uint64_t max = 0;
	for (uint32_t i = 0; i < s->info.nsheets; i++)
		if (s->sheets[i].raw_size > max)
			max = s->sheets[i].raw_size;
	void *raw = malloc(max ? (size_t)max : 1);
	if (!raw)
		return fail(err, ENOMEM, "out of memory");
	int64_t bad = 0;
	char why[SPRITE_ERR_MAX];
	for (uint32_t i = 0; i < s->info.nsheets; i++) {
		why[0] = 0;
		int64_t n = sprite_store_read_sheet(s, i, raw, (size_t)max, why);
		/* the decoded bytes' own checksum, which decoding leaves out */
		if (n >= 0 && sprite_checksum(raw, (size_t)n) != s->sheets[i].raw_checksum)
			n = fail(why, SPRITE_ECHECKSUM, "sheet %u: decoded checksum mismatch", i);
		if (n >= 0)
			continue;
		if (bad++ == 0 && err)
			memcpy(err, why, sizeof(why));
		if (on_bad)
			on_bad(ctx, i, (int)-n, why);
	}
	free(raw);
	return bad;
}

static void first_bad(void *ctx, uint32_t sheet, int error, const char *why)
{
	(void)sheet, (void)why;
	int *first = ctx;
	if (!*first)
		*first = -error;
}

int sprite_store_verify(const sprite_store *s, char *err)
{
	int first = 0;
	int64_t bad = sprite_store_verify_sheets(s, first_bad, &first, err);
	return bad < 0 ? (int)bad : first;
}

/* ---- writer ---------------------------------------------------------- */

/*
 * Temp files of open writers, for sprite_writer_catch_signals(): a handler may
 * only make async-signal-safe calls, so the paths sit in static slots it can
 * read as they are. A slot goes FREE -> BUSY (claimed, path being copied) ->
 * ARMED; the handler unlinks ARMED slots only.
 */
#define TMP_SLOTS 8
enum { TMP_FREE, TMP_BUSY, TMP_ARMED };
static int tmp_state[TMP_SLOTS];
static char tmp_name[TMP_SLOTS][PATH_MAX];

static const int fatal_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
#define NFATAL (sizeof(fatal_signals) / sizeof(fatal_signals[0]))
static struct sigaction fatal_saved[NFATAL];
static int fatal_caught[NFATAL];
static sigset_t fatal_unblocked;	/* caught signals that were blocked on entry */
static const char *volatile fatal_note; /* sprite_writer_signal_note() */

static int tmp_register(const char *path)
{
	if (strlen(path) >= PATH_MAX)
		return -1;
	for (int i = 0; i < TMP_SLOTS; i++) {
		int want = TMP_FREE;
		if (__atomic_compare_exchange_n(&tmp_state[i], &want, TMP_BUSY, 0, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED)) {
			strcpy(tmp_name[i], path);
			__atomic_store_n(&tmp_state[i], TMP_ARMED, __ATOMIC_RELEASE);
			return i;
		}
	}
	return -1; /* more writers than slots: those are left to sprite_writer_abort() */
}

static void tmp_unregister(int slot)
{
	if (slot >= 0)
		__atomic_store_n(&tmp_state[slot], TMP_FREE, __ATOMIC_RELEASE);
}

static void on_fatal_signal(int sig)
{
	for (int i = 0; i < TMP_SLOTS; i++)
		if (__atomic_load_n(&tmp_state[i], __ATOMIC_ACQUIRE) == TMP_ARMED)
			unlink(tmp_name[i]);
	const char *note = fatal_note;
	if (note && sig != SIGPIPE) {
		/* strlen() and write() are async-signal-safe */
		const char *name = sig == SIGINT    ? "SIGINT\n"
				   : sig == SIGTERM ? "SIGTERM\n"
						    : "SIGHUP\n";
		ssize_t w = write(STDERR_FILENO, note, strlen(note));
		w = write(STDERR_FILENO, name, strlen(name));
		(void)w; /* nothing to do about a failed message while dying */
	}
	/* SA_RESETHAND put the default back and SA_NODEFER lets it in: die of sig. */
	raise(sig);
}

int sprite_writer_catch_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_fatal_signal;
	sa.sa_flags = SA_RESETHAND | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sigset_t cur;
	if (pthread_sigmask(SIG_SETMASK, NULL, &cur) != 0)
		sigemptyset(&cur);
	for (size_t i = 0; i < NFATAL; i++) {
		if (fatal_caught[i])
			continue;
		if (sigaction(fatal_signals[i], NULL, &fatal_saved[i]) < 0)
			return -errno;
		/* An ignored signal (nohup's SIGHUP, a background job's SIGINT) stays ignored. */
		if (fatal_saved[i].sa_handler != SIG_DFL || (fatal_saved[i].sa_flags & SA_SIGINFO))
			continue;
		if (sigaction(fatal_signals[i], &sa, NULL) < 0)
			return -errno;
		fatal_caught[i] = 1;
		/*
		 * A signal blocked by whoever started us (some job runners block
		 * SIGINT) would stay pending and the pack would run to its end:
		 * a signal we catch is one we take, so let it in.
		 */
		if (sigismember(&cur, fatal_signals[i]) == 1) {
			sigset_t one;
			sigemptyset(&one);
			sigaddset(&one, fatal_signals[i]);
			sigaddset(&fatal_unblocked, fatal_signals[i]);
			pthread_sigmask(SIG_UNBLOCK, &one, NULL);
		}
	}
	return 0;
}

void sprite_writer_signal_note(const char *note)
{
	fatal_note = note;
}

void sprite_writer_restore_signals(void)
{
	fatal_note = NULL;
	pthread_sigmask(SIG_BLOCK, &fatal_unblocked, NULL);
	sigemptyset(&fatal_unblocked);
	for (size_t i = 0; i < NFATAL; i++) {
		if (!fatal_caught[i])
			continue;
		sigaction(fatal_signals[i], &fatal_saved[i], NULL);
		fatal_caught[i] = 0;
	}
}

struct sprite_writer {
	int fd, dirfd;
	int tmp_slot; /* in tmp_name[], or -1 */
	char *path, *tmp;
	struct sprite_header h;
	char *names; /* names block */
	size_t names_size;

	uint8_t *sheet;	 /* one full sheet laid out as a batch file */
	uint8_t *packed; /* lz4 output, padded to SPRITE_ALIGN */
	size_t packed_cap;
	uint32_t fill; /* tiles in the current sheet */
	size_t tile_bytes;
	int in_split;
	enum sprite_codec codec;

	struct sprite_sheet_entry *idx;
	uint32_t idx_cap;
	uint64_t pos; /* next aligned write offset */

	/* version 3 tables, in sample order over all splits */
	uint16_t *labels;
	uint64_t nsamples, labels_cap;
	uint64_t *path_off; /* nsamples + 1 once a path was given; NULL before */
	uint64_t path_off_cap;
	char *path_str;
	uint64_t path_len, path_cap;
};

static void writer_free(sprite_writer *w)
{
	tmp_unregister(w->tmp_slot);
	if (w->fd >= 0)
		close(w->fd);
	if (w->dirfd >= 0)
		close(w->dirfd);
	free(w->path);
	free(w->tmp);
	free(w->names);
	free(w->sheet);
	free(w->packed);
	free(w->idx);
	free(w->labels);
	free(w->path_off);
	free(w->path_str);
	free(w);
}

uint32_t sprite_default_sheet_tiles(uint32_t tile_h, uint32_t tile_w, uint32_t tile_c)
{
	uint64_t tile = (uint64_t)tile_h * tile_w * tile_c;
	uint64_t t = tile ? SPRITE_SHEET_BYTES / tile : 1024;
	return t < 1 ? 1 : t > 1024 ? 1024 : (uint32_t)t;
}

int sprite_writer_open(const char *path, const struct sprite_writer_params *p, sprite_writer **out,
		       char *err)
{
	int r;
	*out = NULL;
	uint32_t t = p->sheet_tiles ? p->sheet_tiles
				    : sprite_default_sheet_tiles(p->tile_h, p->tile_w, p->tile_c);

	if (p->tile_h == 0 || p->tile_w == 0 || p->tile_h > SPRITE_MAX_TILE_SIDE ||
	    p->tile_w > SPRITE_MAX_TILE_SIDE || p->tile_c == 0 || p->tile_c > SPRITE_MAX_CHANNELS)
		return fail(err, EINVAL, "tile shape %ux%ux%u out of range", p->tile_h, p->tile_w,
			    p->tile_c);
	if (t > SPRITE_MAX_SHEET_TILES)
		return fail(err, EINVAL, "sheet of %u tiles exceeds %u", t, SPRITE_MAX_SHEET_TILES);
	if ((uint32_t)p->fit > SPRITE_FIT_PAD)
		return fail(err, EINVAL, "unknown fit mode %u", (unsigned)p->fit);
	uint64_t raw_max = sheet_raw_size(t, p->tile_h, p->tile_w, p->tile_c);
	if (raw_max > SPRITE_MAX_SHEET_RAW)
		return fail(err, EINVAL, "a sheet of %u tiles of %ux%ux%u exceeds 1 GiB", t,
			    p->tile_h, p->tile_w, p->tile_c);
	if (p->nclasses == 0 || p->nclasses > SPRITE_MAX_CLASSES)
		return fail(err, EINVAL, "class count %u out of range (1..%u)", p->nclasses,
			    SPRITE_MAX_CLASSES);
	if (p->codec != SPRITE_CODEC_RAW && p->codec != SPRITE_CODEC_LZ4)
		return fail(err, EINVAL, "unknown codec %d", (int)p->codec);
	const char *name = p->name ? p->name : "";
	if (strlen(name) >= SPRITE_NAME_MAX)
		return fail(err, EINVAL, "data set name longer than %u bytes", SPRITE_NAME_MAX - 1);

	if (p->version > SPRITE_VERSION)
		return fail(err, EINVAL, "version %u is newer than %u", p->version, SPRITE_VERSION);

	sprite_writer *w = calloc(1, sizeof(*w));
	if (!w)
		return fail(err, ENOMEM, "out of memory");
	w->fd = w->dirfd = -1;
	w->tmp_slot = -1;

	/* Names block: given names, or the class numbers. */
	size_t cap = (size_t)p->nclasses * (CLASS_NAME_MAX + 1);
	w->names = malloc(cap);
	if (!w->names) {
		r = fail(err, ENOMEM, "out of memory");
		goto bad;
	}
	for (uint32_t i = 0; i < p->nclasses; i++) {
		char num[16];
		const char *cn = p->class_names ? p->class_names[i] : NULL;
		if (!cn) {
			snprintf(num, sizeof(num), "%u", i);
			cn = num;
		}
		size_t len = strlen(cn);
		if (!valid_class_name(cn, len)) {
			char shown[64];
			r = fail(err, EINVAL,
				 "class name %u (\"%s\") must be 1..%u bytes without '/' or "
				 "control characters, and not . or ..",
				 i, sprite_escape(cn, shown, sizeof shown), CLASS_NAME_MAX);
			goto bad;
		}
		memcpy(w->names + w->names_size, cn, len + 1);
		w->names_size += len + 1;
	}

	memcpy(w->h.magic, SPRITE_MAGIC, 8);
	w->h.version = p->version ? p->version : SPRITE_VERSION;
	w->h.header_size = SPRITE_HEADER_SIZE;
	w->h.tile_h = p->tile_h;
	w->h.tile_w = p->tile_w;
	w->h.tile_c = p->tile_c;
	w->h.sheet_tiles = t;
	w->h.nclasses = p->nclasses;
	w->h.flags = 0;
	w->h.fit = p->fit;
	w->h.order_window =
		p->order_window == SPRITE_ORDER_FULL ? 0
		: p->order_window
			? p->order_window
			: sprite_order_window(t, (uint64_t)p->tile_h * p->tile_w * p->tile_c);
	if (w->h.version < 2)
		w->h.order_window = 0; /* not in version 1: its readers take the default */
	strncpy(w->h.name, name, SPRITE_NAME_MAX - 1);
	w->codec = p->codec;
	w->tile_bytes = (size_t)p->tile_h * p->tile_w * p->tile_c;
	w->pos = SPRITE_HEADER_SIZE;

	w->sheet = calloc(1, (size_t)raw_max);
	w->packed_cap = (size_t)ALIGN_UP((uint64_t)LZ4_compressBound((int)raw_max));
	w->packed = malloc(w->packed_cap);
	w->path = strdup(path);
	w->tmp = malloc(strlen(path) + 32);
	if (!w->sheet || !w->packed || !w->path || !w->tmp) {
		r = fail(err, ENOMEM, "out of memory for a sheet of %llu bytes",
			 (unsigned long long)raw_max);
		goto bad;
	}
	sprintf(w->tmp, "%s.tmp.%ld", path, (long)getpid());

	/* The directory is opened first so that its fsync after the rename cannot fail on open. */
	char *dir = strdup(path);
	if (!dir) {
		r = fail(err, ENOMEM, "out of memory");
		goto bad;
	}
	char *slash = strrchr(dir, '/');
	const char *d = slash ? (slash == dir ? "/" : (*slash = 0, dir)) : ".";
	w->dirfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	r = errno;
	free(dir);
	if (w->dirfd < 0) {
		r = fail(err, r, "opening the target directory: %s", strerror(r));
		goto bad;
	}
	/* Armed before the file exists: a signal in between finds nothing to unlink. */
	w->tmp_slot = tmp_register(w->tmp);
	w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (w->fd < 0) {
		r = fail(err, errno, "creating %s: %s", w->tmp, strerror(errno));
		goto bad;
	}
	*out = w;
	return 0;
bad:
	writer_free(w);
	return r;
}

/* Compress, pad and write the current sheet; append its index entry. */
static int flush_sheet(sprite_writer *w)
{
	struct sprite_header *h = &w->h;
	struct sprite_split_entry *sp = &h->splits[h->nsplits - 1];
	int r;

	if (w->fill == 0)
		return 0;
	if (h->nsheets == UINT32_MAX)
		return -EOVERFLOW;
	uint64_t raw_size = sprite_batch_init(w->sheet, w->fill, h->tile_h, h->tile_w, h->tile_c,
					      h->nsplits - 1);
	struct sprite_batch_header full;
	sprite_batch_layout(h->sheet_tiles, h->tile_h, h->tile_w, h->tile_c, &full);
	/* The sheet buffer is laid out for a full sheet; a short one is packed tighter. */
	if (w->fill < h->sheet_tiles) {
		struct sprite_batch_header sh;
		sprite_batch_layout(w->fill, h->tile_h, h->tile_w, h->tile_c, &sh);
		memmove(w->sheet + sh.ids_offset, w->sheet + full.ids_offset, 4ull * w->fill);
		memmove(w->sheet + sh.tiles_offset, w->sheet + full.tiles_offset,
			(size_t)w->fill * w->tile_bytes);
		/* zero the alignment gaps so the bytes are deterministic */
		memset(w->sheet + SPRITE_BATCH_HEADER_SIZE + 2ull * w->fill, 0,
		       sh.ids_offset - SPRITE_BATCH_HEADER_SIZE - 2ull * w->fill);
		memset(w->sheet + sh.ids_offset + 4ull * w->fill, 0,
		       sh.tiles_offset - sh.ids_offset - 4ull * w->fill);
	}

	struct sprite_sheet_entry e = {0};
	const uint8_t *data = w->sheet;
	uint64_t stored = raw_size;
	e.codec = SPRITE_CODEC_RAW;
	if (w->codec == SPRITE_CODEC_LZ4) {
		int n = LZ4_compress_default((const char *)w->sheet, (char *)w->packed,
					     (int)raw_size, (int)w->packed_cap);
		if (n > 0 && (uint64_t)n < raw_size) {
			data = w->packed;
			stored = (uint64_t)n;
			e.codec = SPRITE_CODEC_LZ4;
		}
	}
	e.offset = w->pos;
	e.stored_size = (uint32_t)stored;
	e.raw_size = (uint32_t)raw_size;
	e.checksum = sprite_checksum(data, stored);
	e.raw_checksum = sprite_checksum(w->sheet, raw_size);
	e.first = sp->count - w->fill;
	e.count = w->fill;
	e.split = (uint16_t)(h->nsplits - 1);

	/* Write the aligned part in place, then the tail with zero padding. */
	uint64_t body = stored & ~((uint64_t)SPRITE_ALIGN - 1);
	r = sprite_pwrite_full(w->fd, data, (size_t)body, w->pos);
	if (r < 0)
		return r;
	if (stored > body) {
		uint8_t tail[SPRITE_ALIGN];
		memset(tail, 0, sizeof(tail));
		memcpy(tail, data + body, (size_t)(stored - body));
		r = sprite_pwrite_full(w->fd, tail, SPRITE_ALIGN, w->pos + body);
		if (r < 0)
			return r;
	}
	w->pos += ALIGN_UP(stored);

	if (h->nsheets == w->idx_cap) {
		uint32_t cap = w->idx_cap ? w->idx_cap * 2 : 64;
		void *p = realloc(w->idx, (size_t)cap * sizeof(*w->idx));
		if (!p)
			return -ENOMEM;
		w->idx = p;
		w->idx_cap = cap;
	}
	w->idx[h->nsheets++] = e;
	sp->nsheets++;
	w->fill = 0;
	return 0;
}

int sprite_writer_begin_split(sprite_writer *w, const char *split_name)
{
	struct sprite_header *h = &w->h;
	if (!split_name || strlen(split_name) >= SPRITE_SPLIT_NAME_MAX ||
	    !valid_class_name(split_name, strlen(split_name)))
		return -EINVAL;
	if (h->nsplits == SPRITE_MAX_SPLITS)
		return -ENOSPC;
	for (uint32_t i = 0; i < h->nsplits; i++)
		if (strcmp(h->splits[i].name, split_name) == 0)
			return -EEXIST;
	if (w->in_split) {
		int r = flush_sheet(w);
		if (r < 0)
			return r;
	}
	struct sprite_split_entry *sp = &h->splits[h->nsplits++];
	memset(sp, 0, sizeof(*sp));
	strcpy(sp->name, split_name);
	sp->first_sheet = h->nsheets;
	w->in_split = 1;
	return 0;
}

static int grow(void **p, uint64_t *cap, uint64_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	uint64_t ncap = *cap ? *cap : 1024;
	while (ncap < need)
		ncap *= 2;
	if (ncap > SIZE_MAX / elem)
		return -ENOMEM;
	void *np = realloc(*p, (size_t)ncap * elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = ncap;
	return 0;
}

/*
 * Record sample nsamples's path in the path table: the table starts with the
 * first path given, earlier samples getting an empty one. Control bytes are
 * kept out (as '?') so that each path is one line of paths.txt.
 */
static int add_path(sprite_writer *w, const char *path)
{
	if (!path && !w->path_off)
		return 0;
	if (!w->path_off) {
		if (grow((void **)&w->path_off, &w->path_off_cap, w->nsamples + 2, 8) < 0 ||
		    grow((void **)&w->path_str, &w->path_cap, w->nsamples + 1, 1) < 0)
			return -ENOMEM;
		for (uint64_t i = 0; i <= w->nsamples; i++)
			w->path_off[i] = i;
		memset(w->path_str, 0, (size_t)w->nsamples);
		w->path_len = w->nsamples;
	}
	size_t len = path ? strlen(path) : 0;
	if (grow((void **)&w->path_off, &w->path_off_cap, w->nsamples + 2, 8) < 0 ||
	    grow((void **)&w->path_str, &w->path_cap, w->path_len + len + 1, 1) < 0)
		return -ENOMEM;
	char *d = w->path_str + w->path_len;
	for (size_t k = 0; k < len; k++)
		d[k] = (unsigned char)path[k] < 0x20 ? '?' : path[k];
	d[len] = 0;
	w->path_len += len + 1;
	w->path_off[w->nsamples + 1] = w->path_len;
	return 0;
}

int sprite_writer_add(sprite_writer *w, const uint8_t *tile, uint16_t label)
{
	return sprite_writer_add_path(w, tile, label, NULL);
}

int sprite_writer_add_path(sprite_writer *w, const uint8_t *tile, uint16_t label, const char *path)
{
	struct sprite_header *h = &w->h;
	if (!w->in_split)
		return -EINVAL;
	if (label >= h->nclasses)
		return -ERANGE;
	struct sprite_split_entry *sp = &h->splits[h->nsplits - 1];
	if (sp->count >= UINT32_MAX) /* ids are uint32 */
		return -EOVERFLOW;
	if (h->version >= 3) {
		if (grow((void **)&w->labels, &w->labels_cap, w->nsamples + 1, 2) < 0 ||
		    add_path(w, path) < 0)
			return -ENOMEM;
		w->labels[w->nsamples++] = label;
	}
	/* Slots are placed at the full-sheet layout; flush_sheet packs a short sheet. */
	struct sprite_batch_header full;
	sprite_batch_layout(h->sheet_tiles, h->tile_h, h->tile_w, h->tile_c, &full);
	uint32_t k = w->fill;
	uint16_t *labels = (uint16_t *)(void *)(w->sheet + SPRITE_BATCH_HEADER_SIZE);
	uint32_t *ids = (uint32_t *)(void *)(w->sheet + full.ids_offset);
	labels[k] = label;
	ids[k] = (uint32_t)sp->count;
	memcpy(w->sheet + full.tiles_offset + (size_t)k * w->tile_bytes, tile, w->tile_bytes);
	sp->count++;
	if (++w->fill == h->sheet_tiles)
		return flush_sheet(w);
	return 0;
}

static int write_padded(sprite_writer *w, const void *p, size_t len, uint64_t *off)
{
	uint64_t total = ALIGN_UP(len);
	uint8_t *buf = calloc(1, total ? (size_t)total : 1);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, p, len);
	int r = sprite_pwrite_full(w->fd, buf, (size_t)total, w->pos);
	free(buf);
	if (r < 0)
		return r;
	*off = w->pos;
	w->pos += total;
	return 0;
}

int sprite_writer_finish(sprite_writer *w, char *err)
{
	struct sprite_header *h = &w->h;
	int r;

	if (!w->in_split) {
		r = fail(err, EINVAL, "no split was written");
		goto bad;
	}
	r = flush_sheet(w);
	if (r < 0) {
		r = fail(err, -r, "writing the last sheet: %s", strerror(-r));
		goto bad;
	}
	h->index_size = (uint64_t)h->nsheets * sizeof(struct sprite_sheet_entry);
	h->index_checksum = sprite_checksum(w->idx, (size_t)h->index_size);
	r = write_padded(w, w->idx, (size_t)h->index_size, &h->index_offset);
	if (r < 0) {
		r = fail(err, -r, "writing the index: %s", strerror(-r));
		goto bad;
	}
	h->names_size = w->names_size;
	h->names_checksum = sprite_checksum(w->names, w->names_size);
	r = write_padded(w, w->names, w->names_size, &h->names_offset);
	if (r < 0) {
		r = fail(err, -r, "writing the class names: %s", strerror(-r));
		goto bad;
	}
	if (h->version >= 3) {
		h->labels_size = w->nsamples * 2;
		h->labels_checksum = sprite_checksum(w->labels, (size_t)h->labels_size);
		r = write_padded(w, w->labels, (size_t)h->labels_size, &h->labels_offset);
		if (r < 0) {
			r = fail(err, -r, "writing the label table: %s", strerror(-r));
			goto bad;
		}
	}
	if (h->version >= 3 && w->path_off) {
		/* nsamples + 1 offsets, then the strings */
		size_t no = (size_t)(w->nsamples + 1) * 8;
		h->paths_size = no + w->path_len;
		uint8_t *t = malloc((size_t)h->paths_size);
		if (!t) {
			r = fail(err, ENOMEM, "out of memory for the path table");
			goto bad;
		}
		memcpy(t, w->path_off, no);
		memcpy(t + no, w->path_str, (size_t)w->path_len);
		h->paths_checksum = sprite_checksum(t, (size_t)h->paths_size);
		r = write_padded(w, t, (size_t)h->paths_size, &h->paths_offset);
		free(t);
		if (r < 0) {
			r = fail(err, -r, "writing the path table: %s", strerror(-r));
			goto bad;
		}
	}
	h->file_size = w->pos;
	h->header_checksum = 0;
	h->header_checksum = sprite_checksum(h, sizeof(*h));
	r = sprite_pwrite_full(w->fd, h, sizeof(*h), 0);
	if (r < 0) {
		r = fail(err, -r, "writing the header: %s", strerror(-r));
		goto bad;
	}
	if (fsync(w->fd) < 0) {
		r = fail(err, errno, "fsync: %s", strerror(errno));
		goto bad;
	}
	if (rename(w->tmp, w->path) < 0) {
		r = fail(err, errno, "renaming %s: %s", w->tmp, strerror(errno));
		goto bad;
	}
	/* (A signal from here on unlinks a temp name that no longer exists: harmless.) */
	/* The store is in place; a failed directory fsync only weakens durability. */
	fsync(w->dirfd);
	writer_free(w);
	return 0;
bad:
	sprite_writer_abort(w);
	return r;
}

void sprite_writer_abort(sprite_writer *w)
{
	if (!w)
		return;
	tmp_unregister(w->tmp_slot);
	w->tmp_slot = -1;
	if (w->fd >= 0)
		unlink(w->tmp);
	writer_free(w);
}
