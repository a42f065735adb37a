/*
 * test_store_damage - the validating reader against damaged stores.
 *
 * A good store is written, then fed to the reader with flipped bytes in a
 * sheet, the index, the header and the names, truncation, bad magic, a newer
 * version, and fields that are out of range behind valid checksums (so the
 * range checks themselves are tested, not only the checksums), and a
 * raw-codec store with damage inside its decoded bytes. Each must fail with
 * the right code and a message naming the problem. Also the decoder's
 * argument checks.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <lz4.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/batch.h"
#include "common/perm.h"
#include "common/store.h"
#include "common/util.h"
#include "tests/check.h"

static char dir[] = "/tmp/test_store_damage.XXXXXX";

#include "tests/store_gen.h"

/* ---- damaged stores -------------------------------------------------- */

static uint8_t *base;
static size_t base_len;

#define HDR(b) ((struct sprite_header *)(void *)(b))
#define IDX(b) ((struct sprite_sheet_entry *)(void *)((b) + HDR(b)->index_offset))

static void fix_header(uint8_t *b)
{
	HDR(b)->header_checksum = 0;
	HDR(b)->header_checksum = sprite_checksum(b, SPRITE_HEADER_SIZE);
}

static void fix_index(uint8_t *b)
{
	HDR(b)->index_checksum = sprite_checksum(IDX(b), (size_t)HDR(b)->index_size);
	fix_header(b);
}

static uint8_t *copy(void)
{
	uint8_t *b = malloc(base_len);
	memcpy(b, base, base_len);
	return b;
}

/* Write b, open it, expect code and a message containing want. */
static void expect_open(const char *what, uint8_t *b, size_t len, int code, const char *want)
{
	char path[256], err[SPRITE_ERR_MAX] = "";
	snprintf(path, sizeof(path), "%s/bad.sprites", dir);
	spit(path, b, len);
	sprite_store *s = NULL;
	int r = sprite_store_open(path, &s, err);
	CHECK(r == -code && strstr(err, want), "%s: got %d '%s', want %d '%s'", what, r, err, -code,
	      want);
	if (r == 0)
		sprite_store_close(s);
	else
		CHECK(s == NULL, "%s: handle returned on error", what);
	free(b);
}

/* Open b (expected fine) and return its order window, or -1. */
static int64_t window_of(uint8_t *b, uint32_t *version)
{
	char path[256], err[SPRITE_ERR_MAX] = "";
	snprintf(path, sizeof(path), "%s/win.sprites", dir);
	spit(path, b, base_len);
	free(b);
	sprite_store *s = NULL;
	if (sprite_store_open(path, &s, err) < 0) {
		CHECK(0, "order window: %s", err);
		return -1;
	}
	int64_t w = sprite_store_info(s)->order_window;
	*version = sprite_store_info(s)->version;
	sprite_store_close(s);
	return w;
}

/*
 * The order window is the header's in a version-2 store, whatever the value
 * (0 is the full order), and sprite_order_window()'s default in a version-1
 * store, whose header bytes there are padding.
 */
static void check_order_window(const struct sprite_header *h0)
{
	uint32_t v = 0;
	uint32_t def = sprite_order_window(h0->sheet_tiles,
					   (uint64_t)h0->tile_h * h0->tile_w * h0->tile_c);
	int64_t w = window_of(copy(), &v);
	CHECK(w == def && v == SPRITE_VERSION, "written store: window %lld version %u, want %u, %u",
	      (long long)w, v, def, SPRITE_VERSION);
	const uint32_t vals[] = {0, 1, 7, UINT32_MAX};
	for (size_t k = 0; k < sizeof(vals) / sizeof(vals[0]); k++) {
		uint8_t *b = copy();
		HDR(b)->order_window = vals[k];
		fix_header(b);
		w = window_of(b, &v);
		CHECK(w == vals[k], "version %u, order_window %u: read %lld", SPRITE_VERSION,
		      vals[k], (long long)w);
	}
	uint8_t *b = copy();
	HDR(b)->version = 1;
	HDR(b)->order_window = 0;
	fix_header(b);
	w = window_of(b, &v);
	CHECK(w == def && v == 1, "version 1: window %lld version %u, want the default %u",
	      (long long)w, v, def);
}

static void expect_sheet(const char *what, uint8_t *b, uint32_t i, int code, const char *want);

/* Open b (expected fine); expect its path table to fail with code and message. */
static void expect_paths(const char *what, uint8_t *b, int code, const char *want)
{
	char path[256], err[SPRITE_ERR_MAX] = "";
	snprintf(path, sizeof(path), "%s/paths.sprites", dir);
	spit(path, b, base_len);
	free(b);
	sprite_store *s = NULL;
	int r = sprite_store_open(path, &s, err);
	CHECK(r == 0, "%s: open: %s", what, err);
	if (r)
		return;
	CHECK(sprite_store_has_paths(s), "%s: no path table", what);
	for (int k = 0; k < 2; k++) { /* the same answer the second time */
		err[0] = 0;
		r = sprite_store_load_paths(s, err);
		CHECK(r == -code && strstr(err, want), "%s: got %d '%s', want %d '%s'", what, r,
		      err, -code, want);
	}
	CHECK(sprite_store_sample_path(s, 0, 0) == NULL, "%s: a path from a bad table", what);
	CHECK(sprite_store_labels(s, 0) != NULL, "%s: labels lost", what);
	sprite_store_close(s);
}

/*
 * Version 3 tables: a damaged label table fails the open, naming it; one
 * behind a valid checksum too when it is out of range or disagrees with a
 * sheet (then that sheet fails); a damaged path table fails on first use
 * and leaves the rest of the store readable. A store written as version 2
 * or 1 has neither.
 */
static void check_tables(const struct sprite_header *h0)
{
	uint8_t *b;
	uint64_t lo = h0->labels_offset, po = h0->paths_offset;
	CHECK(lo && po && h0->labels_size == 2 * (h0->splits[0].count + h0->splits[1].count),
	      "tables: offsets %llu %llu size %llu", (unsigned long long)lo, (unsigned long long)po,
	      (unsigned long long)h0->labels_size);

	b = copy();
	b[lo + 7] ^= 1;
	expect_open("flip in label table", b, base_len, SPRITE_ECHECKSUM,
		    "label table: checksum mismatch");
	b = copy();
	uint16_t big = (uint16_t)h0->nclasses;
	memcpy(b + lo + 2 * (h0->splits[0].count + 4), &big, 2);
	HDR(b)->labels_checksum = sprite_checksum(b + lo, (size_t)h0->labels_size);
	fix_header(b);
	expect_open("label out of range", b, base_len, SPRITE_ECORRUPT,
		    "label table: test sample 4 has label 10, only 10 classes");
	b = copy();
	HDR(b)->labels_size -= 2;
	fix_header(b);
	expect_open("label table size", b, base_len, SPRITE_ECORRUPT, "label table: 572 bytes");
	b = copy();
	HDR(b)->labels_offset = base_len;
	fix_header(b);
	expect_open("label table past EOF", b, base_len, SPRITE_ECORRUPT,
		    "label table: extends past end of file");
	b = copy();
	HDR(b)->labels_offset = h0->names_offset;
	fix_header(b);
	expect_open("label table over the names", b, base_len, SPRITE_ECORRUPT,
		    "label table: offset");
	b = copy();
	HDR(b)->labels_offset = 0;
	fix_header(b);
	expect_open("label table size without offset", b, base_len, SPRITE_ECORRUPT,
		    "label table: size or checksum without an offset");
	b = copy();
	HDR(b)->paths_size = (uint64_t)1 << 40;
	fix_header(b);
	expect_open("path table size", b, base_len, SPRITE_ECORRUPT,
		    "path table: extends past end of file");
	b = copy();
	HDR(b)->paths_size = 8;
	fix_header(b);
	expect_open("path table too small", b, base_len, SPRITE_ECORRUPT,
		    "path table: 8 bytes cannot hold 287 paths");

	/* a label that is in range but not the sheet's: that sheet fails, no other */
	b = copy();
	uint16_t l;
	memcpy(&l, b + lo + 2 * 130, 2);
	l = (uint16_t)((l + 1) % h0->nclasses);
	memcpy(b + lo + 2 * 130, &l, 2);
	HDR(b)->labels_checksum = sprite_checksum(b + lo, (size_t)h0->labels_size);
	fix_header(b);
	expect_sheet("label table differs from sheet 1", b, 1, SPRITE_ECORRUPT,
		     "sheet 1: slot 30 has label");

	/* the path table, checked on first use */
	uint64_t n = h0->splits[0].count + h0->splits[1].count;
	b = copy();
	b[po + 8 * (n + 1) + 20] ^= 1;
	expect_paths("flip in path table", b, SPRITE_ECHECKSUM, "path table: checksum mismatch");
	b = copy();
	uint64_t off;
	memcpy(&off, b + po + 8 * 4, 8);
	off++;
	memcpy(b + po + 8 * 4, &off, 8);
	HDR(b)->paths_checksum = sprite_checksum(b + po, (size_t)h0->paths_size);
	fix_header(b);
	expect_paths("path offset", b, SPRITE_ECORRUPT, "path table: path 4 starts at");
	b = copy();
	b[po + 8 * (n + 1) + 10] = '\n'; /* inside train/c/3.png */
	HDR(b)->paths_checksum = sprite_checksum(b + po, (size_t)h0->paths_size);
	fix_header(b);
	expect_paths("newline in a path", b, SPRITE_ECORRUPT,
		     "path table: path 3 has a control character");

	/* versions 2 and 1 are written without tables and read as before */
	for (uint32_t v = 1; v <= 2; v++) {
		char path[256], err[SPRITE_ERR_MAX] = "";
		snprintf(path, sizeof(path), "%s/v%u.sprites", dir, v);
		struct sprite_writer_params p = {.name = "old",
						 .tile_h = 4,
						 .tile_w = 4,
						 .tile_c = 1,
						 .sheet_tiles = 4,
						 .nclasses = 3,
						 .version = v};
		sprite_writer *w;
		uint8_t tile[16] = {0};
		int r = sprite_writer_open(path, &p, &w, err);
		for (int i = 0; r == 0 && i < 2; i++)
			r = i ? sprite_writer_add_path(w, tile, 2, "x.png")
			      : sprite_writer_begin_split(w, "train");
		if (r == 0)
			r = sprite_writer_finish(w, err);
		CHECK(r == 0, "version %u: write: %s", v, err);
		sprite_store *s;
		r = sprite_store_open(path, &s, err);
		CHECK(r == 0, "version %u: open: %s", v, err);
		if (r)
			continue;
		CHECK(sprite_store_info(s)->version == v, "version %u: reads as %u", v,
		      sprite_store_info(s)->version);
		CHECK(!sprite_store_labels(s, 0) && !sprite_store_has_paths(s) &&
			      sprite_store_load_paths(s, NULL) == -ENOENT &&
			      !sprite_store_sample_path(s, 0, 0),
		      "version %u: tables", v);
		uint8_t raw[256];
		CHECK(sprite_store_read_sheet(s, 0, raw, sizeof raw, err) > 0, "version %u: %s", v,
		      err);
		sprite_store_close(s);
	}
	struct sprite_writer_params p = {.name = "new",
					 .tile_h = 4,
					 .tile_w = 4,
					 .tile_c = 1,
					 .nclasses = 3,
					 .version = SPRITE_VERSION + 1};
	sprite_writer *w;
	char err[SPRITE_ERR_MAX] = "", path[256];
	snprintf(path, sizeof(path), "%s/v9.sprites", dir);
	CHECK(sprite_writer_open(path, &p, &w, err) == -EINVAL && strstr(err, "newer"),
	      "writer of a newer version: %s", err);
}

/* Open b (expected fine), read sheet i, expect code and message. */
static void expect_sheet(const char *what, uint8_t *b, uint32_t i, int code, const char *want)
{
	char path[256], err[SPRITE_ERR_MAX] = "";
	snprintf(path, sizeof(path), "%s/bad.sprites", dir);
	spit(path, b, base_len);
	free(b);
	sprite_store *s;
	int r = sprite_store_open(path, &s, err);
	CHECK(r == 0, "%s: open: %s", what, err);
	if (r)
		return;
	size_t cap = (size_t)sprite_store_sheet_raw_size(s, 0);
	void *raw = malloc(cap);
	int64_t n = sprite_store_read_sheet(s, i, raw, cap, err);
	CHECK(n == -code && strstr(err, want), "%s: got %lld '%s', want %d '%s'", what,
	      (long long)n, err, -code, want);
	err[0] = 0;
	r = sprite_store_verify(s, err);
	CHECK(r == -code && strstr(err, want), "%s: verify got %d '%s'", what, r, err);
	/* the other sheets still read */
	n = sprite_store_read_sheet(s, i ? 0 : 1, raw, cap, err);
	CHECK(n > 0, "%s: an intact sheet failed: %s", what, err);
	free(raw);
	sprite_store_close(s);
}

static void check_damage(void)
{
	uint8_t *b;
	const struct sprite_header *h0 = HDR(base);
	const struct sprite_sheet_entry *e0 = IDX(base);
	char msg[128];

	/* flipped bytes */
	b = copy();
	b[e0[2].offset + e0[2].stored_size / 2] ^= 0x10;
	expect_sheet("flip in sheet 2", b, 2, SPRITE_ECHECKSUM, "sheet 2: checksum mismatch");
	b = copy();
	b[h0->index_offset + 48 + 5] ^= 1;
	expect_open("flip in index", b, base_len, SPRITE_ECHECKSUM, "index: checksum mismatch");
	b = copy();
	b[offsetof(struct sprite_header, name) + 1] ^= 1;
	expect_open("flip in header name", b, base_len, SPRITE_ECHECKSUM,
		    "header: checksum mismatch");
	b = copy();
	b[offsetof(struct sprite_header, tile_h)] ^= 4;
	expect_open("flip in header tile_h", b, base_len, SPRITE_ECHECKSUM,
		    "header: checksum mismatch");
	b = copy();
	b[3000] ^= 0x80;
	expect_open("flip in header padding", b, base_len, SPRITE_ECHECKSUM,
		    "header: checksum mismatch");
	b = copy();
	b[h0->names_offset + 3] ^= 0x20;
	expect_open("flip in names", b, base_len, SPRITE_ECHECKSUM,
		    "class names: checksum mismatch");

	/* truncation, magic, version */
	snprintf(msg, sizeof(msg), "truncated: file is %zu bytes, header says %zu", base_len - 4096,
		 base_len);
	expect_open("truncated by 4 KiB", copy(), base_len - 4096, SPRITE_ETRUNC, msg);
	expect_open("truncated by 1 byte", copy(), base_len - 1, SPRITE_ETRUNC, "truncated");
	expect_open("truncated to 100 bytes", copy(), 100, SPRITE_ETRUNC,
		    "truncated: file is 100 bytes");
	expect_open("truncated to 5 bytes", copy(), 5, SPRITE_EBADMAGIC,
		    "not a sprite store (bad magic)");
	expect_open("empty file", copy(), 0, SPRITE_EBADMAGIC, "bad magic");
	b = copy();
	b[0] = 'X';
	expect_open("bad magic", b, base_len, SPRITE_EBADMAGIC, "not a sprite store (bad magic)");
	b = copy();
	HDR(b)->version = 7;
	expect_open("version 7", b, base_len, SPRITE_EVERSION, "version 7 is newer than 3");
	b = copy();
	HDR(b)->version = 4;
	fix_header(b);
	expect_open("version 4 with checksum", b, base_len, SPRITE_EVERSION,
		    "version 4 is newer than 3");
	check_tables(h0);
	check_order_window(h0);
	b = realloc(copy(), base_len + 4096);
	memset(b + base_len, 0, 4096);
	expect_open("trailing data", b, base_len + 4096, SPRITE_ECORRUPT, "header says");

	/* header fields out of range, behind a valid checksum */
	struct {
		const char *what, *want;
		size_t off;
		uint64_t val;
		int width, code;
	} hf[] = {
#define F(field) offsetof(struct sprite_header, field), 0
		{"tile_h huge", "tile size 1000000x28", F(tile_h), 4, SPRITE_ECORRUPT},
		{"tile_w zero", "tile size 28x0", F(tile_w), 4, SPRITE_ECORRUPT},
		{"tile_c 5", "tile channels 5", F(tile_c), 4, SPRITE_ECORRUPT},
		{"sheet_tiles 0", "sheet tiles 0", F(sheet_tiles), 4, SPRITE_ECORRUPT},
		{"sheet_tiles huge", "sheet tiles 4000000000", F(sheet_tiles), 4, SPRITE_ECORRUPT},
		{"nclasses 0", "class count 0", F(nclasses), 4, SPRITE_ECORRUPT},
		{"nsplits 9", "split count 9", F(nsplits), 4, SPRITE_ECORRUPT},
		{"nsheets huge", "sheet count 4294967295", F(nsheets), 4, SPRITE_ECORRUPT},
		{"nsheets +1", "index size", F(nsheets), 4, SPRITE_ECORRUPT},
		{"flags", "unknown flags", F(flags), 4, SPRITE_ECORRUPT},
		{"file_size larger", "truncated: file is", F(file_size), 8, SPRITE_ETRUNC},
		{"index offset past EOF", "index offset", F(index_offset), 8, SPRITE_ECORRUPT},
		{"index offset unaligned", "index offset", F(index_offset), 8, SPRITE_ECORRUPT},
		{"index size", "index size", F(index_size), 8, SPRITE_ECORRUPT},
		{"names offset past EOF", "names offset", F(names_offset), 8, SPRITE_ECORRUPT},
		{"names size huge", "names size", F(names_size), 8, SPRITE_ECORRUPT},
		{"names at EOF", "names extend past end", F(names_offset), 8, SPRITE_ECORRUPT},
		{"split count too big", "samples do not match", F(splits[0].count), 8,
		 SPRITE_ECORRUPT},
		{"split nsheets", "samples do not match", F(splits[1].nsheets), 4, SPRITE_ECORRUPT},
		{"split first sheet", "first sheet", F(splits[1].first_sheet), 4, SPRITE_ECORRUPT},
		{"split name empty", "split 1: bad name", F(splits[1].name), 1, SPRITE_ECORRUPT},
#undef F
	};
	hf[0].val = 1000000;
	hf[1].val = 0;
	hf[2].val = 5;
	hf[3].val = 0;
	hf[4].val = 4000000000u;
	hf[5].val = 0;
	hf[6].val = 9;
	hf[7].val = UINT32_MAX;
	hf[8].val = h0->nsheets + 1;
	hf[9].val = 1;
	hf[10].val = base_len + 4096;
	hf[11].val = base_len + 4096;
	hf[12].val = h0->index_offset + 8;
	hf[13].val = h0->index_size + 48;
	hf[14].val = base_len + 8192;
	hf[15].val = 1 << 30;
	hf[16].val = base_len;
	hf[17].val = h0->splits[0].count + h0->sheet_tiles;
	hf[18].val = h0->splits[1].nsheets + 1;
	hf[19].val = h0->splits[1].first_sheet - 1;
	hf[20].val = 0;
	for (size_t i = 0; i < sizeof(hf) / sizeof(hf[0]); i++) {
		b = copy();
		memcpy(b + hf[i].off, &hf[i].val, (size_t)hf[i].width);
		fix_header(b);
		expect_open(hf[i].what, b, base_len, hf[i].code, hf[i].want);
	}
	b = copy();
	memset(HDR(b)->name, 'a', SPRITE_NAME_MAX);
	fix_header(b);
	expect_open("name without NUL", b, base_len, SPRITE_ECORRUPT, "not NUL-terminated");
	b = copy();
	strcpy(HDR(b)->splits[1].name, "train");
	fix_header(b);
	expect_open("repeated split name", b, base_len, SPRITE_ECORRUPT, "repeated");

	/* index entries out of range, behind valid checksums */
	b = copy();
	IDX(b)[1].offset = base_len + 4096;
	fix_index(b);
	expect_open("entry offset past EOF", b, base_len, SPRITE_ECORRUPT,
		    "index entry 1: offset past end of file");
	b = copy();
	IDX(b)[3].offset = IDX(b)[2].offset;
	fix_index(b);
	expect_open("overlapping sheets", b, base_len, SPRITE_ECORRUPT,
		    "index entry 3: overlaps the previous sheet");
	b = copy();
	IDX(b)[0].offset = 0;
	fix_index(b);
	expect_open("sheet over the header", b, base_len, SPRITE_ECORRUPT,
		    "index entry 0: offset 0 out of range");
	b = copy();
	IDX(b)[1].offset += 100;
	fix_index(b);
	expect_open("unaligned sheet", b, base_len, SPRITE_ECORRUPT, "index entry 1: offset");
	b = copy();
	IDX(b)[2].stored_size = 0x7fffffff;
	fix_index(b);
	expect_open("stored size huge", b, base_len, SPRITE_ECORRUPT, "index entry 2:");
	b = copy();
	IDX(b)[1].count += 1;
	fix_index(b);
	expect_open("entry count", b, base_len, SPRITE_ECORRUPT, "index entry 1: split");
	b = copy();
	IDX(b)[1].first = 0;
	fix_index(b);
	expect_open("entry first", b, base_len, SPRITE_ECORRUPT, "index entry 1: split");
	b = copy();
	IDX(b)[1].split = 1;
	fix_index(b);
	expect_open("entry split", b, base_len, SPRITE_ECORRUPT, "index entry 1: split");
	b = copy();
	IDX(b)[1].raw_size += 64;
	fix_index(b);
	expect_open("entry raw size", b, base_len, SPRITE_ECORRUPT, "index entry 1: raw size");
	b = copy();
	IDX(b)[1].codec = 9;
	fix_index(b);
	expect_open("entry codec", b, base_len, SPRITE_ECORRUPT, "index entry 1: unknown codec 9");

	/* names out of range, behind valid checksums */
	b = copy();
	memcpy(b + h0->names_offset, "a/b", 3);
	HDR(b)->names_checksum = sprite_checksum(b + h0->names_offset, (size_t)h0->names_size);
	fix_header(b);
	expect_open("class name with /", b, base_len, SPRITE_ECORRUPT, "class name 0");
	b = copy();
	b[h0->names_offset + h0->names_size - 1] = 'x';
	HDR(b)->names_checksum = sprite_checksum(b + h0->names_offset, (size_t)h0->names_size);
	fix_header(b);
	expect_open("last class name unterminated", b, base_len, SPRITE_ECORRUPT,
		    "not NUL-terminated");

	/* hostile sheet contents behind valid checksums */
	b = copy();
	memset(b + e0[1].offset, 0xA5, e0[1].stored_size);
	IDX(b)[1].checksum = sprite_checksum(b + e0[1].offset, e0[1].stored_size);
	fix_index(b);
	expect_sheet("garbage lz4 sheet", b, 1, SPRITE_ECORRUPT, "sheet 1: lz4 data");

	/* a wrong raw checksum: decoding trusts the stored one, --verify does not */
	b = copy();
	IDX(b)[1].raw_checksum ^= 1;
	fix_index(b);
	char path[256], err[SPRITE_ERR_MAX] = "";
	snprintf(path, sizeof(path), "%s/bad.sprites", dir);
	spit(path, b, base_len);
	free(b);
	sprite_store *s;
	if (sprite_store_open(path, &s, err) < 0) {
		CHECK(0, "raw checksum: open: %s", err);
		return;
	}
	size_t cap = (size_t)sprite_store_sheet_raw_size(s, 0);
	void *raw = malloc(cap);
	int64_t n = sprite_store_read_sheet(s, 1, raw, cap, err);
	CHECK(n > 0, "raw checksum: decode failed: %s", err);
	int r = sprite_store_verify(s, err);
	CHECK(r == -SPRITE_ECHECKSUM && strstr(err, "sheet 1: decoded checksum mismatch"),
	      "raw checksum: verify got %d '%s'", r, err);
	free(raw);
	sprite_store_close(s);
}

/* Damage inside the decoded bytes of a raw-codec store, checksums fixed. */
static void check_raw_damage(const char *path)
{
	size_t len;
	uint8_t *orig = slurp(path, &len);
	struct {
		const char *what, *want;
		size_t off; /* into sheet 1's batch bytes */
		uint32_t val;
	} c[] = {
		{"batch count", "sheet 1: total size", 16, 3},
		{"batch magic", "sheet 1: not a sprite batch", 0, 0},
		{"batch tiles offset", "sheet 1: tiles offset", 40, 0},
		{"batch split", "sheet 1: batch header does not match", 44, 1},
		{"label out of range", "sheet 1: slot 2 has label 999, only 10 classes", 64 + 4,
		 999},
		{"id out of order", "sheet 1: slot 0 has id", 0, 77},
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		uint8_t *b = malloc(len);
		memcpy(b, orig, len);
		struct sprite_sheet_entry *e = &IDX(b)[1];
		uint8_t *sheet = b + e->offset;
		size_t off = c[i].off;
		if (i == 5)
			off = ((struct sprite_batch_header *)(void *)sheet)->ids_offset;
		if (i == 4)
			memcpy(sheet + off, &(uint16_t){(uint16_t)c[i].val}, 2);
		else
			memcpy(sheet + off, &c[i].val, 4);
		e->checksum = sprite_checksum(sheet, e->stored_size);
		e->raw_checksum = e->checksum;
		fix_index(b);
		char p2[256], err[SPRITE_ERR_MAX] = "";
		snprintf(p2, sizeof(p2), "%s/bad.sprites", dir);
		spit(p2, b, len);
		free(b);
		sprite_store *s;
		if (sprite_store_open(p2, &s, err) < 0) {
			CHECK(0, "%s: open: %s", c[i].what, err);
			continue;
		}
		size_t cap = (size_t)sprite_store_sheet_raw_size(s, 0);
		void *raw = malloc(cap);
		int64_t n = sprite_store_read_sheet(s, 1, raw, cap, err);
		CHECK(n == -SPRITE_ECORRUPT && strstr(err, c[i].want), "%s: got %lld '%s'",
		      c[i].what, (long long)n, err);
		free(raw);
		sprite_store_close(s);
	}
	free(orig);
}

static void check_decode_args(const char *path)
{
	sprite_store *s;
	char err[SPRITE_ERR_MAX];
	if (sprite_store_open(path, &s, err) < 0) {
		CHECK(0, "open: %s", err);
		return;
	}
	const struct sprite_sheet_entry *e = &sprite_store_info(s)->sheets[0];
	size_t len;
	uint8_t *file = slurp(path, &len);
	void *raw = malloc(e->raw_size);
	CHECK(sprite_sheet_decode(s, 0, file + e->offset, e->stored_size - 1, raw, e->raw_size,
				  err) == -SPRITE_ETRUNC,
	      "short stored buffer");
	CHECK(sprite_sheet_decode(s, 0, file + e->offset, e->stored_size, raw, e->raw_size - 1,
				  err) == -ENOBUFS,
	      "small raw buffer");
	CHECK(sprite_sheet_decode(s, 99999, file + e->offset, e->stored_size, raw, e->raw_size,
				  err) == -ERANGE,
	      "sheet out of range");
	/* a whole aligned extent, as O_DIRECT readers pass it */
	CHECK(sprite_sheet_decode(s, 0, file + e->offset, (e->stored_size + 4095u) & ~4095u, raw,
				  e->raw_size, err) == e->raw_size,
	      "decode of an aligned extent: %s", err);
	free(raw);
	free(file);
	sprite_store_close(s);
}

/* ---- writer atomicity and argument checks ---------------------------- */

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	/* the first two roundtrip shapes of test_store: lz4, then raw (damage after decode) */
	const struct shape lz = {28, 28, 1, 100, SPRITE_CODEC_LZ4, {250, 37}, 0, 10};
	const struct shape raw = {28, 28, 1, 100, SPRITE_CODEC_RAW, {250, 37}, 0, 10};
	char path[256], rpath[256];
	snprintf(path, sizeof(path), "%s/rt0.sprites", dir);
	snprintf(rpath, sizeof(rpath), "%s/rt1.sprites", dir);
	if (write_store(path, &lz) || write_store(rpath, &raw)) {
		fprintf(stderr, "test_store_damage: cannot write the good stores in %s\n", dir);
		return 1;
	}
	check_decode_args(path);
	base = slurp(path, &base_len);
	check_damage();
	free(base);
	check_raw_damage(rpath);

	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	if (failures) {
		fprintf(stderr, "test_store_damage: %d failures\n", failures);
		return 1;
	}
	printf("test_store_damage: ok\n");
	return 0;
}
