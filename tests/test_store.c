/*
 * test_store - the store writer and the validating reader.
 *
 * Roundtrips a matrix of shapes and codecs (gray and RGB, short last sheets,
 * two splits, sheets that lz4 cannot shrink and are stored raw), then feeds
 * the reader damaged stores: flipped bytes in a sheet, the index, the header
 * and the names, truncation, bad magic, a newer version, and fields that are
 * out of range behind valid checksums (so the range checks themselves are
 * tested, not just the checksums). Each must fail with the right code and a
 * message naming the problem. The writer must never leave anything under the
 * final name unless finished, and an aborted writer leaves no temp file.
 * Also the util.c helpers beside them: the checksum, UTF-8 lengths, the
 * mountinfo reader, sprite_escape and sprite_list_dir.
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

static char dir[] = "/tmp/test_store.XXXXXX";

struct shape {
	uint32_t h, w, c, sheet;
	enum sprite_codec codec;
	uint64_t count[2]; /* train, test; 0 = no such split */
	int noisy;	   /* incompressible pixels: lz4 falls back to raw */
	uint32_t nclasses;
};

static uint64_t mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

static void gen(const struct shape *sh, uint32_t split, uint64_t i, uint8_t *tile, uint16_t *lab)
{
	uint64_t key = mix(((uint64_t)split << 40) ^ i);
	size_t n = (size_t)sh->h * sh->w * sh->c;
	for (size_t k = 0; k < n; k++)
		tile[k] = sh->noisy ? (uint8_t)mix(key + k) : (uint8_t)((key >> 8) + k / 7);
	*lab = (uint16_t)(key % sh->nclasses);
}

/* The path written for a sample: none for train's first three (""). */
static void want_path(uint32_t split, uint64_t i, char *out)
{
	if (split == 0 && i < 3)
		out[0] = 0;
	else if (split == 1 && i == 5) /* a control byte is stored as '?' */
		strcpy(out, "test/a\nb.png");
	else
		snprintf(out, 64, "%s/c/%llu.png", split ? "test" : "train", (unsigned long long)i);
}

static int write_store(const char *path, const struct shape *sh)
{
	char err[SPRITE_ERR_MAX];
	const char *names[] = {"t-shirt", "trouser", "pullover", "dress", "coat",
			       "sandal",  "shirt",   "sneaker",	 "bag",	  "ankle boot"};
	struct sprite_writer_params p = {
		"unit",	   sh->h,     sh->w,	    sh->c,
		sh->sheet, sh->codec, sh->nclasses, sh->nclasses <= 10 ? names : NULL,
		0,	   0,	      SPRITE_FIT_STRETCH};
	sprite_writer *w;
	int r = sprite_writer_open(path, &p, &w, err);
	if (r < 0) {
		fprintf(stderr, "writer_open: %s\n", err);
		return r;
	}
	uint8_t *tile = malloc((size_t)sh->h * sh->w * sh->c);
	static const char *splits[2] = {"train", "test"};
	for (uint32_t s = 0; s < 2 && r >= 0; s++) {
		if (!sh->count[s])
			continue;
		r = sprite_writer_begin_split(w, splits[s]);
		for (uint64_t i = 0; i < sh->count[s] && r >= 0; i++) {
			uint16_t lab;
			gen(sh, s, i, tile, &lab);
			char pb[64];
			want_path(s, i, pb);
			r = sprite_writer_add_path(w, tile, lab, s == 0 && i < 3 ? NULL : pb);
		}
	}
	free(tile);
	if (r < 0) {
		sprite_writer_abort(w);
		return r;
	}
	r = sprite_writer_finish(w, err);
	if (r < 0)
		fprintf(stderr, "writer_finish: %s\n", err);
	return r;
}

static void *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	fstat(fd, &st);
	void *p = malloc((size_t)st.st_size + 1);
	*len = (size_t)st.st_size;
	if (pread(fd, p, *len, 0) != (ssize_t)*len)
		abort();
	close(fd);
	return p;
}

static void spit(const char *path, const void *p, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, p, len) != (ssize_t)len)
		abort();
	close(fd);
}

static int tmp_leftovers(const char *base)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	char pre[256];
	snprintf(pre, sizeof(pre), "%s.tmp.", base);
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, pre, strlen(pre)))
			n++;
	closedir(d);
	return n;
}

/* ---- roundtrip ------------------------------------------------------- */

static void check_roundtrip(const struct shape *sh, int idx)
{
	char path[256], err[SPRITE_ERR_MAX] = "";
	snprintf(path, sizeof(path), "%s/rt%d.sprites", dir, idx);
	int r = write_store(path, sh);
	CHECK(r == 0, "case %d: write %d", idx, r);
	if (r)
		return;
	CHECK(tmp_leftovers("rt0") == 0, "temp file left behind");
	sprite_store *s;
	r = sprite_store_open(path, &s, err);
	CHECK(r == 0, "case %d (%ux%ux%u sheet %u): open: %s", idx, sh->h, sh->w, sh->c, sh->sheet,
	      err);
	if (r)
		return;
	const struct sprite_store_info *in = sprite_store_info(s);
	uint32_t T = sh->sheet ? sh->sheet : sprite_default_sheet_tiles(sh->h, sh->w, sh->c);
	uint32_t nsplits = (sh->count[0] != 0) + (sh->count[1] != 0);
	CHECK(in->tile_h == sh->h && in->tile_w == sh->w && in->tile_c == sh->c, "case %d shape",
	      idx);
	CHECK(in->sheet_tiles == T, "case %d: sheet_tiles %u", idx, in->sheet_tiles);
	CHECK(in->nsplits == nsplits, "case %d: nsplits %u", idx, in->nsplits);
	CHECK(in->nclasses == sh->nclasses, "case %d nclasses", idx);
	CHECK(!strcmp(in->name, "unit"), "case %d name '%s'", idx, in->name);
	CHECK(in->file_size % 4096 == 0, "case %d: file size %llu not aligned", idx,
	      (unsigned long long)in->file_size);
	if (sh->nclasses <= 10)
		CHECK(!strcmp(in->class_names[sh->nclasses - 1],
			      (const char *[]){"t-shirt", "trouser", "pullover", "dress", "coat",
					       "sandal", "shirt", "sneaker", "bag",
					       "ankle boot"}[sh->nclasses - 1]),
		      "case %d: class name", idx);
	else
		CHECK(!strcmp(in->class_names[11], "11"), "case %d: default class name '%s'", idx,
		      in->class_names[11]);

	size_t len;
	uint8_t *file = slurp(path, &len);
	CHECK(len == in->file_size, "case %d: file size", idx);
	uint64_t nsheets = 0;
	int saw_raw = 0, saw_lz4 = 0;
	for (uint32_t i = 0; i < in->nsheets; i++) {
		const struct sprite_sheet_entry *e = &in->sheets[i];
		CHECK(e->offset % 4096 == 0, "case %d sheet %u offset", idx, i);
		uint64_t end = (e->offset + e->stored_size + 4095) & ~4095ull;
		for (uint64_t b = e->offset + e->stored_size; b < end && b < len; b++)
			if (file[b]) {
				CHECK(0, "case %d sheet %u: padding byte %llu not zero", idx, i,
				      (unsigned long long)b);
				break;
			}
		saw_raw |= e->codec == SPRITE_CODEC_RAW;
		saw_lz4 |= e->codec == SPRITE_CODEC_LZ4;
		/* the codec rule: lz4 when it is smaller, raw otherwise */
		if (sh->codec == SPRITE_CODEC_LZ4) {
			void *rb = malloc(e->raw_size);
			char *cb = malloc((size_t)LZ4_compressBound((int)e->raw_size));
			if (sprite_store_read_sheet(s, i, rb, e->raw_size, err) > 0) {
				int n = LZ4_compress_default(rb, cb, (int)e->raw_size,
							     LZ4_compressBound((int)e->raw_size));
				int lz = n > 0 && (uint32_t)n < e->raw_size;
				CHECK(e->codec == (lz ? SPRITE_CODEC_LZ4 : SPRITE_CODEC_RAW) &&
					      e->stored_size == (lz ? (uint32_t)n : e->raw_size),
				      "case %d sheet %u: codec %u stored %u, lz4 gives %d of %u",
				      idx, i, e->codec, e->stored_size, n, e->raw_size);
			}
			free(rb);
			free(cb);
		}
	}
	free(file);
	if (sh->codec == SPRITE_CODEC_RAW || sh->noisy)
		CHECK(!saw_lz4, "case %d: lz4 sheet where raw expected", idx);
	else
		CHECK(saw_lz4, "case %d: no lz4 sheet", idx);
	CHECK(saw_raw == (sh->codec == SPRITE_CODEC_RAW || sh->noisy), "case %d: raw sheets", idx);

	size_t tb = (size_t)sh->h * sh->w * sh->c;
	uint8_t *want = malloc(tb);
	void *raw = malloc(SPRITE_BATCH_HEADER_SIZE + (size_t)T * (6 + tb) + 256);
	const char *names[2] = {"train", "test"};
	for (uint32_t s2 = 0; s2 < 2; s2++) {
		if (!sh->count[s2])
			continue;
		int sp = sprite_store_find_split(s, names[s2]);
		CHECK(sp >= 0 && in->splits[sp].count == sh->count[s2], "case %d split %s", idx,
		      names[s2]);
		if (sp < 0)
			continue;
		nsheets += in->splits[sp].nsheets;
		int64_t have = -1;
		struct sprite_batch b = {0};
		for (uint64_t i = 0; i < sh->count[s2]; i++) {
			uint32_t sheet, slot;
			uint16_t lab;
			r = sprite_store_locate(s, (uint32_t)sp, i, &sheet, &slot);
			CHECK(r == 0 && slot == i % T, "case %d locate %llu", idx,
			      (unsigned long long)i);
			if (r)
				break;
			if (have != sheet) {
				int64_t n = sprite_store_read_sheet(
					s, sheet, raw,
					SPRITE_BATCH_HEADER_SIZE + (size_t)T * (6 + tb) + 256, err);
				CHECK(n == sprite_store_sheet_raw_size(s, sheet),
				      "case %d read sheet %u: %s", idx, sheet, err);
				if (n < 0)
					break;
				r = sprite_batch_parse(raw, (size_t)n, &b, err);
				CHECK(r == 0, "case %d parse: %s", idx, err);
				if (r)
					break;
				CHECK(b.split == (uint32_t)sp, "case %d split in batch", idx);
				have = sheet;
			}
			gen(sh, s2, i, want, &lab);
			CHECK(b.labels[slot] == lab, "case %d %s[%llu] label %u want %u", idx,
			      names[s2], (unsigned long long)i, b.labels[slot], lab);
			const uint16_t *lt = sprite_store_labels(s, (uint32_t)sp);
			CHECK(lt && lt[i] == lab, "case %d %s[%llu]: label table", idx, names[s2],
			      (unsigned long long)i);
			char pb[64];
			want_path(s2, i, pb);
			if (strchr(pb, '\n'))
				*strchr(pb, '\n') = '?';
			const char *pp = sprite_store_sample_path(s, (uint32_t)sp, i);
			CHECK(pp && !strcmp(pp, pb), "case %d %s[%llu]: path '%s' want '%s'", idx,
			      names[s2], (unsigned long long)i, pp ? pp : "(null)", pb);
			CHECK(b.ids[slot] == i, "case %d id", idx);
			if (memcmp(b.tiles + slot * tb, want, tb)) {
				CHECK(0, "case %d %s[%llu]: pixels differ", idx, names[s2],
				      (unsigned long long)i);
				break;
			}
		}
		uint32_t sheet, slot;
		CHECK(sprite_store_locate(s, (uint32_t)sp, sh->count[s2], &sheet, &slot) == -ERANGE,
		      "case %d locate past end", idx);
	}
	CHECK(nsheets == in->nsheets, "case %d nsheets", idx);
	CHECK(sprite_store_find_split(s, "valid") == -ENOENT, "find_split of a missing split");
	CHECK(sprite_store_locate(s, 7, 0, &(uint32_t){0}, &(uint32_t){0}) == -ERANGE,
	      "locate in missing split");
	CHECK(sprite_store_sheet_raw_size(s, in->nsheets) == -ERANGE, "raw size out of range");
	CHECK(sprite_store_verify(s, err) == 0, "case %d verify: %s", idx, err);
	free(raw);
	free(want);
	sprite_store_close(s);
}

/* ---- concurrency ----------------------------------------------------- */

struct thr {
	sprite_store *s;
	int bad;
};

static void *reader(void *arg)
{
	struct thr *t = arg;
	const struct sprite_store_info *in = sprite_store_info(t->s);
	char err[SPRITE_ERR_MAX];
	size_t cap = (size_t)sprite_store_sheet_raw_size(t->s, 0);
	void *raw = malloc(cap);
	for (int rep = 0; rep < 20; rep++)
		for (uint32_t i = 0; i < in->nsheets; i++) {
			int64_t n = sprite_store_read_sheet(t->s, i, raw, cap, err);
			if (n != in->sheets[i].raw_size ||
			    sprite_checksum(raw, (size_t)n) != in->sheets[i].raw_checksum)
				t->bad++;
		}
	free(raw);
	return NULL;
}

static void check_threads(const char *path)
{
	sprite_store *s;
	char err[SPRITE_ERR_MAX];
	if (sprite_store_open(path, &s, err) < 0) {
		CHECK(0, "open: %s", err);
		return;
	}
	pthread_t th[4];
	struct thr t[4];
	for (int i = 0; i < 4; i++) {
		t[i] = (struct thr){s, 0};
		pthread_create(&th[i], NULL, reader, &t[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK(t[i].bad == 0, "thread %d: %d bad sheets", i, t[i].bad);
	}
	sprite_store_close(s);
}

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

static void check_writer(void)
{
	char path[256], err[SPRITE_ERR_MAX];
	struct stat st;
	uint8_t tile[16] = {0};
	struct sprite_writer_params p = {"w", 4, 4, 1, 8, SPRITE_CODEC_LZ4, 3, NULL, 0, 0,
					 SPRITE_FIT_STRETCH};
	sprite_writer *w;
	snprintf(path, sizeof(path), "%s/w.sprites", dir);

	CHECK(sprite_writer_open(path, &p, &w, err) == 0, "open: %s", err);
	CHECK(sprite_writer_add(w, tile, 0) == -EINVAL, "add before a split");
	CHECK(sprite_writer_begin_split(w, "train") == 0, "begin");
	CHECK(sprite_writer_begin_split(w, "train") == -EEXIST, "repeated split");
	CHECK(sprite_writer_begin_split(w, "a/b") == -EINVAL, "split with /");
	CHECK(sprite_writer_add(w, tile, 3) == -ERANGE, "label out of range");
	for (int i = 0; i < 20; i++)
		sprite_writer_add(w, tile, 1);
	CHECK(stat(path, &st) < 0 && errno == ENOENT, "final name exists before finish");
	CHECK(tmp_leftovers("w.sprites") == 1, "no temp file while writing");
	sprite_writer_abort(w);
	CHECK(stat(path, &st) < 0 && errno == ENOENT, "final name exists after abort");
	CHECK(tmp_leftovers("w.sprites") == 0, "temp file left after abort");
	sprite_writer_abort(NULL);

	/* finish without a split fails and cleans up */
	CHECK(sprite_writer_open(path, &p, &w, err) == 0, "open: %s", err);
	CHECK(sprite_writer_finish(w, err) == -EINVAL, "finish without a split");
	CHECK(stat(path, &st) < 0 && tmp_leftovers("w.sprites") == 0, "failed finish leftovers");

	/* a writer killed mid-way never leaves the final name */
	pid_t pid = fork();
	if (pid == 0) {
		if (sprite_writer_open(path, &p, &w, err) == 0 &&
		    sprite_writer_begin_split(w, "train") == 0)
			for (int i = 0; i < 100; i++)
				sprite_writer_add(w, tile, 2);
		raise(SIGKILL);
		_exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	CHECK(WIFSIGNALED(status), "child was not killed");
	CHECK(stat(path, &st) < 0 && errno == ENOENT, "killed writer left the final name");
	char tmp[300];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)pid);
	CHECK(stat(tmp, &st) == 0, "killed writer's temp file is missing (%s)", tmp);
	unlink(tmp);

	/* finish replaces an existing store atomically */
	spit(path, "old", 3);
	CHECK(sprite_writer_open(path, &p, &w, err) == 0, "open: %s", err);
	sprite_writer_begin_split(w, "train");
	sprite_writer_add(w, tile, 2);
	CHECK(sprite_writer_finish(w, err) == 0, "finish: %s", err);
	sprite_store *s;
	CHECK(sprite_store_open(path, &s, err) == 0, "reopen: %s", err);
	sprite_store_close(s);
	CHECK(tmp_leftovers("w.sprites") == 0, "temp file left after finish");
	unlink(path);

	/* bad parameters */
	struct sprite_writer_params q = p;
	q.tile_h = 0;
	CHECK(sprite_writer_open(path, &q, &w, err) == -EINVAL, "tile 0");
	q = p;
	q.tile_c = 5;
	CHECK(sprite_writer_open(path, &q, &w, err) == -EINVAL, "5 channels");
	q = p;
	q.nclasses = 0;
	CHECK(sprite_writer_open(path, &q, &w, err) == -EINVAL, "no classes");
	q = p;
	q.sheet_tiles = SPRITE_MAX_SHEET_TILES + 1;
	CHECK(sprite_writer_open(path, &q, &w, err) == -EINVAL, "huge sheet");
	q = p;
	const char *bad_names[] = {"ok", "..", "x"};
	q.class_names = bad_names;
	CHECK(sprite_writer_open(path, &q, &w, err) == -EINVAL && strstr(err, "class name 1"),
	      "class name '..': %s", err);
	snprintf(tmp, sizeof(tmp), "%s/no/such/dir/x.sprites", dir);
	CHECK(sprite_writer_open(tmp, &p, &w, err) == -ENOENT, "missing directory: %s", err);
	CHECK(tmp_leftovers("w.sprites") == 0 && stat(path, &st) < 0, "leftovers after bad params");
}

/*
 * sprite_checksum may take the AVX2 build of XXH3: it must give libxxhash's
 * hash for every length (XXH3 has separate paths up to 16, 128 and 240 bytes,
 * then stripes of 64 and blocks of 1024) and alignment.
 */
static void check_checksum(void)
{
	size_t cap = (1u << 20) + 64;
	uint8_t *b = malloc(cap);
	if (!b) {
		FAIL("out of memory");
		return;
	}
	for (size_t i = 0; i < cap; i++)
		b[i] = (uint8_t)mix(i);
	int bad = 0;
	for (size_t len = 0; len <= 2100 && bad < 5; len++)
		for (size_t off = 0; off < 3; off++)
			if (sprite_checksum(b + off, len) != XXH3_64bits(b + off, len)) {
				FAIL("checksum of %zu bytes at offset %zu differs from libxxhash",
				     len, off);
				bad++;
			}
	const size_t big[] = {4095, 65536, 800000, 1u << 20};
	for (size_t k = 0; k < sizeof(big) / sizeof(big[0]); k++)
		CHECK(sprite_checksum(b + 1, big[k]) == XXH3_64bits(b + 1, big[k]),
		      "checksum of %zu bytes differs from libxxhash", big[k]);
	free(b);
}

/* sprite_utf8_len: what JSON writers rely on to keep their output UTF-8; sprite_utf8_cut. */
static void check_utf8(void)
{
	static const struct {
		const char *s;
		int len;
	} cases[] = {
		{"a", 1},
		{"\xc3\xa9", 2},
		{"\xe2\x82\xac", 3},
		{"\xf0\x9f\x98\x80", 4},
		{"\xf4\x8f\xbf\xbf", 4},
		{"\xe9", 0},
		{"\xc0\xaf", 0},
		{"\xc1\xbf", 0},
		{"\xe0\x80\xaf", 0},
		{"\xed\xa0\x80", 0},
		{"\xf0\x80\x80\xaf", 0},
		{"\xf4\x90\x80\x80", 0},
		{"\xf5\x80\x80\x80", 0},
		{"\x80", 0},
		{"\xe2\x82", 0},
		{"\xf0\x9f\x98", 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		CHECK(sprite_utf8_len((const unsigned char *)cases[i].s) == cases[i].len,
		      "utf8 case %zu: %d, expected %d", i,
		      sprite_utf8_len((const unsigned char *)cases[i].s), cases[i].len);

	/* sprite_utf8_cut: a name cut to fit a field never ends inside a character */
	static const struct {
		const char *s;
		size_t max, len;
	} cuts[] = {
		{"abc", 2, 2},
		{"ab", 10, 2},
		{"a\xc3\xa9", 2, 1},
		{"a\xc3\xa9", 3, 3},
		{"\xe2\x82\xac", 2, 0},
		{"x\xf0\x9f\x98\x80y", 4, 1},
		{"x\xf0\x9f\x98\x80y", 5, 5},
		{"\xff\xfe", 1, 1}, /* not UTF-8: cut anywhere, byte by byte */
		{"a\xe2\x82", 2, 2},
		{"", 5, 0},
	};
	for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++)
		CHECK(sprite_utf8_cut(cuts[i].s, cuts[i].max) == cuts[i].len,
		      "utf8 cut case %zu: %zu, expected %zu", i,
		      sprite_utf8_cut(cuts[i].s, cuts[i].max), cuts[i].len);
}

/*
 * sprite_escape: what the packer and hntrain print of a path read from a
 * folder. Control bytes and bytes that are not UTF-8 become escapes, printable
 * UTF-8 stays, and a cut falls between characters, never inside an escape.
 */
static void check_escape(void)
{
	static const struct {
		const char *in;
		size_t cap;
		const char *out;
	} cases[] = {
		{"/data/train/ant/x.png", 64, "/data/train/ant/x.png"},
		{"", 64, ""},
		{"a\nb", 64, "a\\nb"},
		{"t\tr\r", 64, "t\\tr\\r"},
		{"back\\slash \\n", 64, "back\\\\slash \\\\n"}, /* a literal \n stays apart */
		{"\033[31mred\033[0m", 64, "\\x1b[31mred\\x1b[0m"},
		{"\x01\x1f\x7f", 64, "\\x01\\x1f\\x7f"},
		{"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 64,
		 "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
		{"nb\xc2\xa0sp", 64, "nb\xc2\xa0sp"},	    /* U+00A0 prints */
		{"csi\xc2\x9b[2J", 64, "csi\\xc2\\x9b[2J"}, /* a C1 control does not */
		{"gnp\xe2\x80\xae"
		 "exe",
		 64, "gnp\\xe2\\x80\\xaeexe"}, /* U+202E reorders */
		{"a\xe2\x81\xa6"
		 "b\xe2\x80\x8f",
		 64, "a\\xe2\\x81\\xa6b\\xe2\\x80\\x8f"},
		{"\xd8\x9c\xd8\xa7", 64, "\\xd8\\x9c\xd8\xa7"}, /* ALM; Arabic alef prints */
		{"\xe2\x80\x94", 64, "\xe2\x80\x94"},		/* an em dash prints */
		{"caf\xe9.png", 64, "caf\\xe9.png"},		/* Latin-1 */
		{"\xff\xfe", 64, "\\xff\\xfe"},
		{"\xc0\xaf", 64, "\\xc0\\xaf"},		 /* overlong '/' */
		{"\xed\xa0\x80", 64, "\\xed\\xa0\\x80"}, /* a surrogate */
		{"\xe2\x82", 64, "\\xe2\\x82"},		 /* cut short by the end */
		{"\xe2\x82x", 64, "\\xe2\\x82x"},	 /* ... or by an ASCII byte */
		{"abcdefg", 8, "abcdefg"},		 /* fits exactly */
		{"abcdefgh", 8, "abcd..."},
		{"abc\ndef", 8, "abc..."}, /* not "abc\\..." */
		{"ab\nc", 8, "ab\\nc"},
		{"\x01\x02", 8, "\\x01..."},
		{"\xc3\xa9\xc3\xa9\xc3\xa9", 6, "\xc3\xa9..."}, /* not half an é */
		{"abcd", 4, "..."},
		{"abc", 4, "abc"},
		{"abc", 3, ""},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char out[80]; /* past cap: a write there shows */
		memset(out, '#', sizeof out);
		const char *r = sprite_escape(cases[i].in, out, cases[i].cap);
		CHECK(r == out && !strcmp(out, cases[i].out) && strlen(out) < cases[i].cap,
		      "escape case %zu: \"%s\", expected \"%s\"", i, out, cases[i].out);
		CHECK(out[cases[i].cap] == '#', "escape case %zu: wrote past cap %zu", i,
		      cases[i].cap);
	}
}

/*
 * sprite_list_dir: visible entries in byte order, links followed, and what
 * an entry is when it is neither a file nor a folder.
 */
static void check_list_dir(void)
{
	char d[300], p[400], q[400];
	snprintf(d, sizeof d, "%s/list", dir);
	mkdir(d, 0755);
	static const char *const files[] = {"b.png", "a\nb", ".hidden", "Z"};
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		snprintf(p, sizeof p, "%s/%s", d, files[i]);
		fclose(fopen(p, "w"));
	}
	snprintf(p, sizeof p, "%s/sub", d);
	mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/to-sub", d);
	CHECK(symlink("sub", p) == 0, "symlink");
	snprintf(p, sizeof p, "%s/to-b", d);
	CHECK(symlink("b.png", p) == 0, "symlink");
	snprintf(p, sizeof p, "%s/gone", d);
	CHECK(symlink("nowhere", p) == 0, "symlink");
	snprintf(p, sizeof p, "%s/self", d);
	CHECK(symlink("self", p) == 0, "symlink");
	snprintf(p, sizeof p, "%s/fifo", d);
	CHECK(mkfifo(p, 0644) == 0, "mkfifo");
	static const struct {
		const char *name;
		char kind;
		const char *why;
	} want[] = {
		{"Z", 'f', NULL},
		{"a\nb", 'f', NULL},
		{"b.png", 'f', NULL},
		{"fifo", 0, "a FIFO, not a file or folder"},
		{"gone", 0, "a dangling symbolic link"},
		{"self", 0, NULL}, /* ELOOP: strerror's text */
		{"sub", 'd', NULL},
		{"to-b", 'f', NULL},
		{"to-sub", 'd', NULL},
	};
	struct sprite_dirent **v = NULL;
	size_t n = 0;
	int r = sprite_list_dir(d, &v, &n);
	CHECK(r == 0 && n == sizeof want / sizeof want[0], "list: %d, %zu entries", r, n);
	for (size_t i = 0; r == 0 && i < n && i < sizeof want / sizeof want[0]; i++) {
		CHECK(!strcmp(v[i]->name, want[i].name) && v[i]->kind == want[i].kind,
		      "list entry %zu: \"%s\" kind %d, expected \"%s\" kind %d", i, v[i]->name,
		      v[i]->kind, want[i].name, want[i].kind);
		CHECK((v[i]->kind == 0) == (v[i]->why != NULL),
		      "list entry %zu: why %s with kind %d", i, v[i]->why ? v[i]->why : "NULL",
		      v[i]->kind);
		if (want[i].why && v[i]->why)
			CHECK(!strcmp(v[i]->why, want[i].why), "list entry %zu: why \"%s\"", i,
			      v[i]->why);
	}
	sprite_dirents_free(v, n);
	snprintf(q, sizeof q, "%s/nosuch", d);
	CHECK(sprite_list_dir(q, &v, &n) == -ENOENT, "list of a missing folder");
}

/* sprite_mountinfo_unescape and _next: mount points and sources with odd bytes. */
static void check_mountinfo_unescape(void)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"/mnt/plain", "/mnt/plain"},
		{"/mnt/a\\040b", "/mnt/a b"},
		{"/x\\011\\012\\134y", "/x\t\n\\y"},
		{"\\134134", "\\134"}, /* one escape, not two */
		{"/bad\\09x\\4", "/bad\\09x\\4"},
		{"/end\\", "/end\\"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char buf[64];
		snprintf(buf, sizeof buf, "%s", cases[i].in);
		sprite_mountinfo_unescape(buf);
		CHECK(!strcmp(buf, cases[i].out), "mountinfo case %zu: \"%s\", expected \"%s\"", i,
		      buf, cases[i].out);
	}
	/* whole lines: optional tags before " - ", escapes in point and source,
	 * junk passed over */
	FILE *f = tmpfile();
	fputs("36 35 98:0 / /mnt/a\\040b rw,noatime shared:1 master:2 - ext4 "
	      "/dev/sda1 rw\n"
	      "not a mountinfo line\n"
	      "90 36 0:52 /d\\011ir /mnt/s rw - fuse.spritefs /var/x\\040y.sprites "
	      "ro,user_id=0\n",
	      f);
	rewind(f);
	struct sprite_mount m;
	CHECK(sprite_mountinfo_next(f, &m) == 1 && m.id == 36 && !strcmp(m.dev, "98:0") &&
		      !strcmp(m.root, "/") && !strcmp(m.point, "/mnt/a b") &&
		      !strcmp(m.type, "ext4") && !strcmp(m.source, "/dev/sda1"),
	      "mountinfo line 1: %lu %s %s %s %s %s", m.id, m.dev, m.root, m.point, m.type,
	      m.source);
	CHECK(sprite_mountinfo_next(f, &m) == 1 && m.id == 90 && !strcmp(m.dev, "0:52") &&
		      !strcmp(m.root, "/d\tir") && !strcmp(m.point, "/mnt/s") &&
		      !strcmp(m.type, "fuse.spritefs") && !strcmp(m.source, "/var/x y.sprites"),
	      "mountinfo line 3: %lu %s %s %s %s %s", m.id, m.dev, m.root, m.point, m.type,
	      m.source);
	CHECK(sprite_mountinfo_next(f, &m) == 0, "mountinfo: a line after the last");
	fclose(f);
}

/* Each SPRITE_E* code has a name of its own; other codes read as strerror's. */
static void check_strerror(void)
{
	const int codes[] = {SPRITE_EBADMAGIC, SPRITE_EVERSION, SPRITE_ECORRUPT, SPRITE_ECHECKSUM,
			     SPRITE_ETRUNC};
	char unknown[64];
	snprintf(unknown, sizeof unknown, "%s", strerror(SPRITE_ECORRUPT));
	for (size_t i = 0; i < sizeof codes / sizeof *codes; i++) {
		const char *m = sprite_strerror(codes[i]);
		CHECK(m && m[0] && strcmp(m, unknown) != 0, "code %d: '%s'", codes[i], m ? m : "");
		for (size_t j = 0; j < i; j++)
			CHECK(strcmp(m, sprite_strerror(codes[j])) != 0,
			      "codes %d and %d: same text", codes[i], codes[j]);
	}
	CHECK(!strcmp(sprite_strerror(ENOENT), strerror(ENOENT)), "ENOENT: '%s'",
	      sprite_strerror(ENOENT));
	CHECK(!strcmp(sprite_strerror(SPRITE_ECHECKSUM), "checksum mismatch"), "'%s'",
	      sprite_strerror(SPRITE_ECHECKSUM));
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	check_checksum();
	check_utf8();
	check_mountinfo_unescape();
	check_escape();
	check_list_dir();
	check_strerror();
	const struct shape cases[] = {
		{28, 28, 1, 100, SPRITE_CODEC_LZ4, {250, 37}, 0, 10},
		{28, 28, 1, 100, SPRITE_CODEC_RAW, {250, 37}, 0, 10},
		{32, 32, 3, 64, SPRITE_CODEC_LZ4, {128, 64}, 0, 10},  /* full sheets
									 only */
		{128, 128, 3, 2, SPRITE_CODEC_LZ4, {5, 0}, 1, 10},    /* lz4 cannot shrink noise */
		{8, 8, 4, 1, SPRITE_CODEC_LZ4, {3, 2}, 0, 10},	      /* one tile per sheet
								       */
		{16, 16, 1, 0, SPRITE_CODEC_LZ4, {1500, 10}, 0, 300}, /* default 1024, 300 classes
								       */
		{1, 1, 1, 7, SPRITE_CODEC_RAW, {0, 20}, 0, 2},	      /* only a test split
								       */
		{224, 224, 3, 0, SPRITE_CODEC_LZ4, {60, 5}, 0, 10},   /* default: 27 a
									 sheet */
	};
	/* The default sheet: 4 MiB decoded at most, 1..1024 tiles. */
	CHECK(sprite_default_sheet_tiles(28, 28, 1) == 1024, "28x28: %u",
	      sprite_default_sheet_tiles(28, 28, 1));
	CHECK(sprite_default_sheet_tiles(56, 56, 1) == 1024, "56x56");
	CHECK(sprite_default_sheet_tiles(64, 64, 3) == 341, "64x64x3: %u",
	      sprite_default_sheet_tiles(64, 64, 3));
	CHECK(sprite_default_sheet_tiles(224, 224, 3) == 27, "224x224x3: %u",
	      sprite_default_sheet_tiles(224, 224, 3));
	CHECK(sprite_default_sheet_tiles(4096, 4096, 4) == 1, "4096x4096x4: %u",
	      sprite_default_sheet_tiles(4096, 4096, 4));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_roundtrip(&cases[i], (int)i);

	char path[256];
	snprintf(path, sizeof(path), "%s/rt0.sprites", dir);
	check_threads(path);
	check_decode_args(path);
	base = slurp(path, &base_len);
	check_damage();
	free(base);
	snprintf(path, sizeof(path), "%s/rt1.sprites", dir);
	check_raw_damage(path);
	check_writer();

	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	if (failures) {
		fprintf(stderr, "test_store: %d failures\n", failures);
		return 1;
	}
	printf("test_store: ok\n");
	return 0;
}
