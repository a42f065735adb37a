/*
 * test_store - the store writer and the validating reader.
 *
 * Roundtrips a matrix of shapes and codecs (gray and RGB, short last sheets,
 * two splits, sheets that lz4 cannot shrink, or shrinks by less than
 * SPRITE_LZ4_MIN_GAIN, and are stored raw), reads them
 * from several threads at once, and checks the writer's refusals (damaged
 * stores: test_store_damage.c). The writer must never leave anything under the
 * final name unless finished, and an aborted writer leaves no temp file.
 * (The helpers of util.c, error.c and folder.c: test_util.c.)
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

#include "tests/store_gen.h"

/* Temporary files of base (base.tmp.*) left in dir. */
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
		/* the codec rule: lz4 when it saves SPRITE_LZ4_MIN_GAIN, raw otherwise */
		if (sh->codec == SPRITE_CODEC_LZ4) {
			void *rb = malloc(e->raw_size);
			char *cb = malloc((size_t)LZ4_compressBound((int)e->raw_size));
			if (sprite_store_read_sheet(s, i, rb, e->raw_size, err) > 0) {
				int n = LZ4_compress_default(rb, cb, (int)e->raw_size,
							     LZ4_compressBound((int)e->raw_size));
				int lz = n > 0 &&
					 (uint64_t)n * 100 <= (uint64_t)e->raw_size *
								      (100 - SPRITE_LZ4_MIN_GAIN);
				if (sh->noisy == 2) /* lz4 saves a little: raw by the rule */
					CHECK(n > 0 && (uint32_t)n < e->raw_size && !lz,
					      "case %d sheet %u: lz4 gives %d of %u, expected a "
					      "small gain",
					      idx, i, n, e->raw_size);
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

static void check_writer(void)
{
	char path[256], err[SPRITE_ERR_MAX];
	struct stat st;
	uint8_t tile[16] = {0};
	struct sprite_writer_params p = {
		"w", 4, 4, 1, 8, SPRITE_CODEC_LZ4, 3, NULL, 0, 0, SPRITE_FIT_STRETCH, 0};
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

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	const struct shape cases[] = {
		{28, 28, 1, 100, SPRITE_CODEC_LZ4, {250, 37}, 0, 10},
		{28, 28, 1, 100, SPRITE_CODEC_RAW, {250, 37}, 0, 10},
		{32, 32, 3, 64, SPRITE_CODEC_LZ4, {128, 64}, 0, 10},  /* full sheets
									 only */
		{128, 128, 3, 2, SPRITE_CODEC_LZ4, {5, 0}, 1, 10},    /* lz4 cannot shrink noise */
		{128, 128, 3, 2, SPRITE_CODEC_LZ4, {5, 0}, 2, 10},    /* lz4 saves 5%: raw */
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
