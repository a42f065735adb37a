/*
 * fuzz_store.c - fuzz target: a store file (common/store.c), the bytes
 * spritefs and hntrain read from disk.
 *
 * Each input is opened twice: as it is, and "resealed" (header, index,
 * names and each sheet's stored checksum recomputed over the damaged
 * bytes), so that the mutations also reach the field checks and lz4 behind
 * the checksums. For a store that opens, what store.h promises is checked
 * and a broken promise aborts (a crash for libFuzzer, a failure here): every
 * sheet lies inside the file, holds 1..sheet_tiles tiles of its split, the
 * splits' sheets are contiguous and add up to their counts; a sheet that
 * decodes is a valid batch file of its tiles, with the labels of the label
 * table where the store has one (each below nclasses); a path table that
 * loads gives every sample one line of a path, as long as the split's size
 * says; --verify passes exactly when every sheet decodes.
 *
 * Against its valid seed (the plain driver), a damaged file must never give
 * other bytes: it is refused, or each of its sheets is refused or decodes to
 * the seed's sheet.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/batch.h"
#include "common/store.h"
#include "common/util.h"
#include "tests/fuzz.h"

#define MAX_SHEETS 64

struct view {
	int open;
	uint32_t nsheets;
	int good[MAX_SHEETS];
	uint64_t hash[MAX_SHEETS];
};

static void broken(const char *what, uint32_t i)
{
	fprintf(stderr, "fuzz_store: broken promise: %s (sheet %u)\n", what, i);
	abort();
}

/* A path table that loads: one line per sample, the split sizes its bytes. */
static void check_paths(const sprite_store *s)
{
	const struct sprite_store_info *in = sprite_store_info(s);
	char err[SPRITE_ERR_MAX];
	if (!sprite_store_has_paths(s)) {
		if (sprite_store_load_paths(s, err) != -ENOENT)
			broken("a path table loads where there is none", 0);
		return;
	}
	if (sprite_store_load_paths(s, err) < 0) {
		if (sprite_store_sample_path(s, 0, 0))
			broken("a path from a table that did not load", 0);
		return;
	}
	for (uint32_t k = 0; k < in->nsplits; k++) {
		const char *str;
		int64_t n = sprite_store_split_paths(s, k, &str);
		if (n < 0 || n != sprite_store_split_paths_size(s, k) ||
		    (uint64_t)n < in->splits[k].count)
			broken("split paths size", k);
		int64_t at = 0;
		for (uint64_t q = 0; q < in->splits[k].count; q++) {
			const char *p = sprite_store_sample_path(s, k, q);
			if (!p || p != str + at)
				broken("sample path is not the next one", k);
			for (; *p; p++, at++)
				if ((unsigned char)*p < 0x20)
					broken("a control character in a path", k);
			at++;
			if (at > n)
				broken("paths past the split's size", k);
		}
		if (at != n)
			broken("split paths do not add up", k);
	}
}

/* A skipped list that reads: as many lines as the header says, each PATH<tab>REASON. */
static void check_skipped(const sprite_store *s)
{
	char err[SPRITE_ERR_MAX], *t;
	size_t n;
	uint64_t count = sprite_store_skipped_count(s);
	if (count == 0 && sprite_store_skipped_size(s) != 0)
		broken("a skipped list of bytes but no lines", 0);
	if (sprite_store_read_skipped(s, &t, &n, err) < 0)
		return;
	if (n != sprite_store_skipped_size(s) || strlen(t) != n)
		broken("skipped list size", 0);
	uint64_t lines = 0;
	for (const char *p = t; *p; p++) {
		if (*p == '\n')
			lines++;
		else if ((unsigned char)*p < 0x20 && *p != '\t')
			broken("a control character in the skipped list", 0);
	}
	if (lines != count || (n && t[n - 1] != '\n'))
		broken("skipped list lines", 0);
	free(t);
}

/* Open and decode everything; abort where an opened store breaks store.h's promises. */
static void run(const uint8_t *data, size_t len, struct view *v)
{
	memset(v, 0, sizeof *v);
	const char *path = fuzz_path(data, len);
	sprite_store *s = NULL;
	char err[SPRITE_ERR_MAX];
	if (!path || sprite_store_open(path, &s, err) < 0)
		return;
	const struct sprite_store_info *in = sprite_store_info(s);
	v->open = 1;
	fuzz_accepted++;
	v->nsheets = in->nsheets;
	uint64_t per_split[SPRITE_MAX_SPLITS] = {0};
	int all_good = 1; /* every sheet decodes, and (for verify) its raw checksum matches */
	/* sheets verify finds bad: not decoded, or decoded to another raw checksum */
	int64_t nbad = 0;
	for (uint32_t i = 0; i < in->nsheets; i++) {
		const struct sprite_sheet_entry *e = &in->sheets[i];
		if (e->split >= in->nsplits || e->offset + e->stored_size > in->file_size)
			broken("sheet outside the file or its split", i);
		const struct sprite_split_entry *sp = &in->splits[e->split];
		if (e->count == 0 || e->count > in->sheet_tiles || i < sp->first_sheet ||
		    i >= sp->first_sheet + sp->nsheets || e->first != per_split[e->split])
			broken("sheet count or order", i);
		per_split[e->split] += e->count;
		int64_t raw_size = sprite_store_sheet_raw_size(s, i);
		if (raw_size <= 0 || (uint64_t)raw_size > SPRITE_MAX_SHEET_RAW)
			broken("raw size", i);
		uint8_t *raw = malloc((size_t)raw_size);
		if (!raw)
			abort();
		int64_t r = sprite_store_read_sheet(s, i, raw, (size_t)raw_size, err);
		if (r >= 0) {
			struct sprite_batch b;
			if (sprite_batch_parse(raw, (size_t)r, &b, err) < 0 ||
			    b.count != e->count || b.h != in->tile_h || b.w != in->tile_w ||
			    b.c != in->tile_c)
				broken("a decoded sheet is not its batch file", i);
			const uint16_t *lt = sprite_store_labels(s, e->split);
			for (uint32_t k = 0; k < b.count; k++) {
				if (b.ids[k] != e->first + k)
					broken("sample ids", i);
				if (lt && b.labels[k] != lt[e->first + k])
					broken("a sheet's label is not the label table's", i);
			}
			uint64_t h = sprite_checksum(raw, (size_t)r);
			/* decoding leaves the raw checksum to verify (store.h) */
			if (h != e->raw_checksum) {
				all_good = 0;
				nbad++;
			}
			if (i < MAX_SHEETS) {
				v->good[i] = 1;
				v->hash[i] = h;
			}
		} else {
			all_good = 0;
			nbad++;
		}
		free(raw);
	}
	for (uint32_t k = 0; k < in->nsplits; k++) {
		if (per_split[k] != in->splits[k].count)
			broken("split count", k);
		const uint16_t *lt = sprite_store_labels(s, k);
		for (uint64_t q = 0; lt && q < in->splits[k].count; q++)
			if (lt[q] >= in->nclasses)
				broken("a label table entry out of range", k);
	}
	check_paths(s);
	check_skipped(s);
	if ((sprite_store_verify(s, err) >= 0) != all_good)
		broken("verify disagrees with the decodes", 0);
	if (sprite_store_verify_sheets(s, NULL, NULL, err) != nbad)
		broken("--verify's count of bad sheets disagrees with the decodes", 0);
	sprite_store_close(s);
}

/* Recompute every checksum that can be found over the damaged bytes. */
static void reseal(uint8_t *b, size_t len)
{
	struct sprite_header h;
	if (len < sizeof h)
		return;
	memcpy(&h, b, sizeof h);
	if (h.index_offset <= len && h.index_size <= len - h.index_offset) {
		size_t n = (size_t)h.index_size / sizeof(struct sprite_sheet_entry);
		for (size_t i = 0; i < n; i++) {
			struct sprite_sheet_entry e;
			uint8_t *pe = b + h.index_offset + i * sizeof e;
			memcpy(&e, pe, sizeof e);
			if (e.offset <= len && e.stored_size <= len - e.offset) {
				e.checksum = sprite_checksum(b + e.offset, e.stored_size);
				memcpy(pe, &e, sizeof e);
			}
		}
		h.index_checksum = sprite_checksum(b + h.index_offset, (size_t)h.index_size);
	}
	if (h.names_offset <= len && h.names_size <= len - h.names_offset)
		h.names_checksum = sprite_checksum(b + h.names_offset, (size_t)h.names_size);
	if (h.labels_offset <= len && h.labels_size <= len - h.labels_offset)
		h.labels_checksum = sprite_checksum(b + h.labels_offset, (size_t)h.labels_size);
	if (h.paths_offset <= len && h.paths_size <= len - h.paths_offset)
		h.paths_checksum = sprite_checksum(b + h.paths_offset, (size_t)h.paths_size);
	if (h.skipped_offset <= len && h.skipped_size <= len - h.skipped_offset)
		h.skipped_checksum = sprite_checksum(b + h.skipped_offset, (size_t)h.skipped_size);
	h.header_checksum = 0;
	h.header_checksum = sprite_checksum(&h, sizeof h);
	memcpy(b, &h, sizeof h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct view v;
	run(data, size, &v);
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		abort();
	memcpy(copy, data, size);
	reseal(copy, size);
	run(copy, size, &v);
	free(copy);
	return 0;
}

static int check(const struct fuzz_buf *seed, const uint8_t *data, size_t len, char *msg,
		 size_t cap)
{
	struct view a, b;
	run(seed->data, seed->len, &a);
	run(data, len, &b);
	if (!a.open) {
		snprintf(msg, cap, "the seed itself does not open");
		return -1;
	}
	if (!b.open)
		return 0;
	if (b.nsheets != a.nsheets) {
		snprintf(msg, cap, "a damaged store opened with %u sheets, the seed has %u",
			 b.nsheets, a.nsheets);
		return -1;
	}
	for (uint32_t i = 0; i < a.nsheets && i < MAX_SHEETS; i++)
		if (b.good[i] && (!a.good[i] || b.hash[i] != a.hash[i])) {
			snprintf(msg, cap, "sheet %u of a damaged store decoded to other bytes", i);
			return -1;
		}
	return 0;
}

/* A store written by the real writer, read back whole. */
static int make_store(struct fuzz_buf *out, const char *name, uint32_t th, uint32_t tw, uint32_t tc,
		      uint32_t sheet, enum sprite_codec codec, uint32_t ntrain, uint32_t ntest,
		      uint32_t version, int paths, char *err)
{
	static const char *const classes[] = {"zero", "one", "two", "three"};
	char path[] = "/tmp/fuzz_store.XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return -1;
	close(fd);
	struct sprite_writer_params p = {
		.name = name,
		.tile_h = th,
		.tile_w = tw,
		.tile_c = tc,
		.sheet_tiles = sheet,
		.codec = codec,
		.nclasses = 4,
		.class_names = classes,
		.version = version,
	};
	sprite_writer *w = NULL;
	uint8_t tile[64 * 64 * 4];
	int rc = sprite_writer_open(path, &p, &w, err);
	for (int split = 0; rc >= 0 && split < 2; split++) {
		uint32_t n = split ? ntest : ntrain;
		if (n == 0)
			continue;
		rc = sprite_writer_begin_split(w, split ? "test" : "train");
		for (uint32_t k = 0; rc >= 0 && k < n; k++) {
			for (size_t q = 0; q < (size_t)th * tw * tc; q++)
				tile[q] = (uint8_t)((q / 7 + k * 3) & 0xf0); /* compressible */
			char where[32];
			snprintf(where, sizeof where, "%s/%s/%u.png", split ? "test" : "train",
				 classes[k % 4], k);
			rc = sprite_writer_add_path(w, tile, (uint16_t)(k % 4),
						    paths && k != 2 ? where : NULL);
		}
	}
	/* a skipped list, with a control byte the writer must turn into '?' */
	for (uint32_t k = 0; rc >= 0 && paths && k < 3; k++)
		rc = sprite_writer_add_skipped(w, k == 1 ? "train/one/bad\nname.png" : "x.svg",
					       k == 2 ? "" : "not a PNG/TIFF/JPEG/PNM file");
	if (rc >= 0)
		rc = sprite_writer_finish(w, err);
	else
		sprite_writer_abort(w);
	if (rc >= 0)
		rc = fuzz_slurp(path, out);
	unlink(path);
	snprintf(out->name, sizeof out->name, "%s.sprites", name);
	return rc;
}

static int seeds(struct fuzz_buf **out, char *err)
{
	struct fuzz_buf *b = calloc(4, sizeof *b);
	if (!b)
		return -1;
	*out = b;
	/* version 3 with and without a path table, and a version-2 store */
	if (make_store(&b[0], "lz4-gray", 12, 12, 1, 16, SPRITE_CODEC_LZ4, 70, 10, 0, 1, err) < 0 ||
	    make_store(&b[1], "raw-rgb", 8, 8, 3, 8, SPRITE_CODEC_RAW, 20, 5, 0, 0, err) < 0 ||
	    make_store(&b[2], "one", 4, 4, 1, 1, SPRITE_CODEC_LZ4, 1, 0, 0, 1, err) < 0 ||
	    make_store(&b[3], "v2", 6, 6, 1, 4, SPRITE_CODEC_LZ4, 9, 3, 2, 0, err) < 0)
		return -1;
	return 4;
}

const struct fuzz_target fuzz_target = {"fuzz_store", seeds, check};
