/*
 * store_sheet.c - a sheet of an open store read and decoded, and the
 * whole-store checks of --verify; store.c opens and validates the store.
 *
 * sprite_sheet_decode sits on the daemon's hot path: one XXH3 pass over the
 * stored bytes, one LZ4_decompress_safe, a header parse and a walk over the
 * labels and ids (the XXH3 of the decoded bytes is left to --verify, see
 * sprite_store_verify_sheets). The handle's fields were all checked by
 * sprite_store_open, so nothing here checks them again.
 */
#include "common/store.h"

#include <errno.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/batch.h"
#include "common/store_int.h"
#include "common/util.h"

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
		return sprite_fail(err, -ERANGE, "sheet %u does not exist (%u sheets)", i,
				   s->info.nsheets);
	const struct sprite_sheet_entry *e = &s->sheets[i];

	if (stored_len < e->stored_size)
		return sprite_fail(err, -SPRITE_ETRUNC, "sheet %u: %zu of %u stored bytes", i,
				   stored_len, e->stored_size);
	if (raw_cap < e->raw_size)
		return sprite_fail(err, -ENOBUFS, "sheet %u: buffer of %zu bytes, needs %u", i,
				   raw_cap, e->raw_size);
	if (sprite_checksum(stored, e->stored_size) != e->checksum)
		return sprite_fail(err, -SPRITE_ECHECKSUM, "sheet %u: checksum mismatch", i);
	if (e->codec == SPRITE_CODEC_LZ4) {
		int n = LZ4_decompress_safe(stored, raw, (int)e->stored_size, (int)e->raw_size);
		if (n != (int)e->raw_size)
			return sprite_fail(err, -SPRITE_ECORRUPT,
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
		return sprite_fail(err, -SPRITE_ECORRUPT, "sheet %u: %s", i, berr);
	if (b.count != e->count || b.h != s->info.tile_h || b.w != s->info.tile_w ||
	    b.c != s->info.tile_c || b.split != e->split)
		return sprite_fail(err, -SPRITE_ECORRUPT,
				   "sheet %u: batch header does not match the index", i);
	const uint32_t nclasses = s->info.nclasses;
	const uint32_t first = (uint32_t)e->first;
	uint32_t bad = 0;
	/* Branch-free accumulation so that the loop vectorises. */
	for (uint32_t k = 0; k < b.count; k++)
		bad |= (uint32_t)(b.labels[k] >= nclasses) | (b.ids[k] ^ (first + k));
	if (bad) {
		for (uint32_t k = 0; k < b.count; k++) {
			if (b.labels[k] >= nclasses)
				return sprite_fail(
					err, -SPRITE_ECORRUPT,
					"sheet %u: slot %u has label %u, only %u classes", i, k,
					b.labels[k], nclasses);
			if (b.ids[k] != first + k)
				return sprite_fail(err, -SPRITE_ECORRUPT,
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
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "sheet %u: slot %u has label %u, the label table %u", i,
					   k, b.labels[k], t[k]);
		}
	}
	return e->raw_size;
}

int64_t sprite_store_read_sheet(const sprite_store *s, uint32_t i, void *raw, size_t raw_cap,
				char *err)
{
	if (i >= s->info.nsheets)
		return sprite_fail(err, -ERANGE, "sheet %u does not exist (%u sheets)", i,
				   s->info.nsheets);
	const struct sprite_sheet_entry *e = &s->sheets[i];
	void *buf = raw;
	int r;

	if (raw_cap < e->raw_size)
		return sprite_fail(err, -ENOBUFS, "sheet %u: buffer of %zu bytes, needs %u", i,
				   raw_cap, e->raw_size);
	if (e->codec != SPRITE_CODEC_RAW) {
		buf = malloc(e->stored_size);
		if (!buf)
			return sprite_fail(err, -ENOMEM, "sheet %u: out of memory", i);
	}
	r = pread_full(s->fd, buf, e->stored_size, e->offset);
	int64_t n;
	if (r == -SPRITE_ETRUNC)
		n = sprite_fail(err, -SPRITE_ETRUNC, "sheet %u: file ends inside the sheet", i);
	else if (r < 0)
		n = sprite_fail(err, r, "sheet %u: read: %s", i, strerror(-r));
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
		return sprite_fail(err, -ENOMEM, "out of memory");
	int64_t bad = 0;
	char why[SPRITE_ERR_MAX];
	for (uint32_t i = 0; i < s->info.nsheets; i++) {
		why[0] = 0;
		int64_t n = sprite_store_read_sheet(s, i, raw, (size_t)max, why);
		/* the decoded bytes' own checksum, which decoding leaves out */
		if (n >= 0 && sprite_checksum(raw, (size_t)n) != s->sheets[i].raw_checksum)
			n = sprite_fail(why, -SPRITE_ECHECKSUM,
					"sheet %u: decoded checksum mismatch", i);
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

struct extent {
	uint64_t off, len;
	const char *what;
};

static int cmp_extent(const void *a, const void *b)
{
	const struct extent *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

int sprite_store_verify_padding(const sprite_store *s, char *err)
{
	struct sprite_header h;
	int r = pread_full(s->fd, &h, sizeof h, 0);
	if (r < 0)
		return sprite_fail(err, r, "reading the header: %s", strerror(-r));
	for (size_t i = 0; i < sizeof h.pad; i++)
		if (h.pad[i])
			return sprite_fail(
				err, -SPRITE_ECORRUPT,
				"header byte %zu is %u: the header's padding must be zero", 524 + i,
				h.pad[i]);
	size_t n = 0, cap = (size_t)s->info.nsheets + 6;
	struct extent *e = malloc(cap * sizeof *e);
	if (!e)
		return sprite_fail(err, -ENOMEM, "out of memory");
	e[n++] = (struct extent){0, SPRITE_HEADER_SIZE, "the header"};
	e[n++] = (struct extent){h.index_offset, h.index_size, "the sheet index"};
	e[n++] = (struct extent){h.names_offset, h.names_size, "the class names"};
	if (h.version >= 3 && h.labels_offset)
		e[n++] = (struct extent){h.labels_offset, h.labels_size, "the label table"};
	if (h.version >= 3 && h.paths_offset)
		e[n++] = (struct extent){h.paths_offset, h.paths_size, "the path table"};
	if (h.skipped_offset)
		e[n++] = (struct extent){h.skipped_offset, h.skipped_size, "the skipped list"};
	for (uint32_t i = 0; i < s->info.nsheets; i++) {
		if (s->sheets[i].reserved) {
			free(e);
			return sprite_fail(err, -SPRITE_ECORRUPT,
					   "sheet %u: its index entry's reserved byte is %u, not 0",
					   i, s->sheets[i].reserved);
		}
		e[n++] = (struct extent){s->sheets[i].offset, s->sheets[i].stored_size, "a sheet"};
	}
	sprite_sort(e, n, sizeof *e, cmp_extent);
	/* Every byte outside the extents, up to the end of the file, is padding: zero. */
	uint8_t buf[65536];
	uint64_t at = 0, end = s->info.file_size;
	const char *after = "the start";
	r = 0;
	for (size_t i = 0; i <= n && r == 0; i++) {
		uint64_t stop = i < n ? e[i].off : end;
		while (at < stop && r == 0) {
			size_t len = stop - at < sizeof buf ? (size_t)(stop - at) : sizeof buf;
			if ((r = pread_full(s->fd, buf, len, at)) < 0) {
				sprite_fail(err, r, "reading offset %llu: %s",
					    (unsigned long long)at, strerror(-r));
				break;
			}
			for (size_t k = 0; k < len; k++)
				if (buf[k]) {
					r = sprite_fail(err, -SPRITE_ECORRUPT,
							"byte %llu is %u: the padding after %s "
							"must be zero",
							(unsigned long long)(at + k), buf[k],
							after);
					break;
				}
			at += len;
		}
		if (i < n && e[i].off + e[i].len > at) {
			at = e[i].off + e[i].len;
			after = e[i].what;
		}
	}
	free(e);
	return r;
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
