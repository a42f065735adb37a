/*
 * test_pack_lib.c - sprite_pack() and sprite_pack_fingerprint() through the
 * library API (spritefs uses them directly, without the command).
 *
 * Checks: the report (found/packed/skipped, per split counts, bytes in/out),
 * on_skip called in source order with the reasons, on_ignore for what is
 * not an image of a class folder (a file beside them, a FIFO) before that
 * and counted apart, --strict stopping at the FIFO, the progress counter
 * reaching the total, jobs = 0 (all cores), labels and sample order read
 * back from the store, strict mode, a data set name too long for the header
 * refused, a fingerprint that is stable and changes when a file is added,
 * removed, rewritten or renamed, which files of a cache folder
 * sprite_cache_prune removes, and one canonical path for a folder reached
 * by a symbolic link or "..".
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <tiffio.h>

#include "common/batch.h"
#include "common/cachestore.h"
#include "common/image.h"
#include "common/pack.h"
#include "common/store.h"
#include "tests/check.h"

static char dir[256];

struct skips {
	int n;
	char paths[8][512];
	char why[8][256];
	int nign;
	char ign[4][800];
};

static void on_skip(void *ctx, const char *path, const char *why)
{
	struct skips *s = ctx;
	if (s->n < 8) {
		snprintf(s->paths[s->n], sizeof s->paths[0], "%s", path);
		snprintf(s->why[s->n], sizeof s->why[0], "%s", why);
	}
	s->n++;
}

static void on_ignore(void *ctx, const char *path, const char *why)
{
	struct skips *s = ctx;
	CHECK(s->n == 0, "on_ignore after on_skip: %s", path);
	if (s->nign < 4)
		snprintf(s->ign[s->nign], sizeof s->ign[0], "%s: %s", path, why);
	s->nign++;
}

static void put(const char *rel, uint8_t v, int png)
{
	char p[512], err[SPRITE_ERR_MAX];
	uint8_t px[6 * 5];
	memset(px, v, sizeof px);
	snprintf(p, sizeof p, "%s/%s", dir, rel);
	int r = png ? sprite_png_write(p, px, 6, 5, 1, err)
		    : sprite_tiff_write(p, px, 6, 5, 1, COMPRESSION_LZW, err);
	if (r < 0) {
		fprintf(stderr, "setup: %s\n", err);
		exit(1);
	}
}

static void put_raw(const char *rel, const char *text)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", dir, rel);
	FILE *f = fopen(p, "w");
	fputs(text, f);
	fclose(f);
}

static void sub(const char *rel)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", dir, rel);
	mkdir(p, 0755);
}

/* Write dir/cache/name as a copy of from (NULL: a text file) with its mtime age seconds ago. */
static void place(const char *name, const char *from, long age)
{
	char p[700], buf[1 << 16];
	snprintf(p, sizeof p, "%s/cache/%s", dir, name);
	FILE *out = fopen(p, "w");
	if (!out) {
		fprintf(stderr, "setup: %s: %s\n", p, strerror(errno));
		exit(1);
	}
	if (from) {
		FILE *in = fopen(from, "r");
		size_t n;
		while (in && (n = fread(buf, 1, sizeof buf, in)) > 0)
			fwrite(buf, 1, n, out);
		if (in)
			fclose(in);
	} else {
		fputs("not a store\n", out);
	}
	fclose(out);
	struct timespec ts[2] = {{time(NULL) - age, 0}, {time(NULL) - age, 0}};
	utimensat(AT_FDCWD, p, ts, 0);
}

static int in_cache(const char *name)
{
	char p[700];
	struct stat st;
	snprintf(p, sizeof p, "%s/cache/%s", dir, name);
	return lstat(p, &st) == 0;
}

/* A store of src whose data set name is name, at dir/<file>; its path in out. */
static void named_store(const char *src, const char *name, const char *file, char *out, size_t cap)
{
	char err[SPRITE_ERR_MAX];
	struct sprite_pack_options o = {.codec = SPRITE_CODEC_LZ4, .name = name};
	snprintf(out, cap, "%s/%s", dir, file);
	if (sprite_pack(src, out, &o, NULL, err) < 0) {
		fprintf(stderr, "setup: %s\n", err);
		exit(1);
	}
}

/*
 * sprite_cache_prune: the older stores of the source (same id), and the
 * stores of the earlier naming "<folder>-<fingerprint>.sprites" of the same
 * folder name, go; nothing else does. (A store a mount serves is kept:
 * mount_source.sh, which mounts.)
 */
static void check_cache_prune(const char *src)
{
	char p[700], src_store[600], data_store[600], long_store[600];
	snprintf(p, sizeof p, "%s/cache", dir);
	mkdir(p, 0755);
	named_store(src, "src", "named-src.sprites", src_store, sizeof src_store);
	const long day = 86400;
	static const char *const gone[] = {
		"src-1111111111111111-00000000000000a1.sprites", /* same id, older */
		"src-00000000000000b1.sprites",			 /* earlier naming, same folder */
	};
	static const char *const kept[] = {
		"src-2222222222222222-00000000000000c1.sprites", /* another source id */
		"other-00000000000000d1.sprites", /* earlier naming, another folder */
		"xsrc-00000000000000d2.sprites",
		"src-00000000000000D3.sprites", /* not as the packer writes hex */
		"src-0000000000000d4.sprites",	/* 15 digits */
		"src-00000000000000d5.sprites.tmp.1",
		"src-00000000000000d6.sprites.bak",
		"src-1111111111111111-00000000000000d7.sprite",
	};
	place("src-1111111111111111-00000000000000f0.sprites", src_store, 0); /* keep */
	for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
		place(gone[i], src_store, 2 * day);
	for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
		place(kept[i], src_store, 2 * day);
	place("src-00000000000000e1.sprites", NULL, 2 * day);	/* not a store */
	place("src-00000000000000e2.sprites", src_store, -day); /* newer than keep */
	place("src-1111111111111111-00000000000000e3.sprites", src_store, -day);
	place("src-1111111111111111-00000000000000e4.sprites", NULL, 2 * day);
	place("target.sprites", src_store, 2 * day);
	snprintf(p, sizeof p, "%s/cache/src-00000000000000e5.sprites", dir); /* a link: kept */
	CHECK(symlink("target.sprites", p) == 0, "symlink %s", strerror(errno));
	snprintf(p, sizeof p, "%s/cache/src-00000000000000e6.sprites", dir); /* a folder: kept */
	mkdir(p, 0755);

	snprintf(p, sizeof p, "%s/cache", dir);
	CHECK(sprite_cache_prune(p, "src-f0.sprites", 0x1111111111111111ull) == -EINVAL,
	      "a keep name of another form is refused");
	CHECK(sprite_cache_prune(p, "src-2222222222222222-00000000000000c1.sprites",
				 0x1111111111111111ull) == -EINVAL,
	      "a keep name of another source id is refused");
	int r = sprite_cache_prune(p, "src-1111111111111111-00000000000000f0.sprites",
				   0x1111111111111111ull);
	CHECK(r == 2, "pruned %d stores, want 2", r);
	for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
		CHECK(!in_cache(gone[i]), "%s was kept", gone[i]);
	for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
		CHECK(in_cache(kept[i]), "%s was removed", kept[i]);
	/* and those placed apart: keep, not a store, newer than keep, a link, a folder */
	static const char *const kept2[] = {
		"src-1111111111111111-00000000000000f0.sprites",
		"src-00000000000000e1.sprites",
		"src-00000000000000e2.sprites",
		"src-1111111111111111-00000000000000e3.sprites",
		"src-1111111111111111-00000000000000e4.sprites",
		"src-00000000000000e5.sprites",
		"src-00000000000000e6.sprites",
		"target.sprites",
	};
	for (size_t i = 0; i < sizeof kept2 / sizeof kept2[0]; i++)
		CHECK(in_cache(kept2[i]), "%s was removed", kept2[i]);

	/*
	 * A folder named "data-<16 hex>": "data-<hex>-<hex>.sprites" is both the
	 * earlier name of one of its stores and a store name of a folder "data";
	 * the data set name in the store tells them apart.
	 */
	named_store(src, "data", "named-data.sprites", data_store, sizeof data_store);
	place("data-0123456789abcdef-3333333333333333-00000000000000f1.sprites", src_store, 0);
	place("data-0123456789abcdef-00000000000000a2.sprites", data_store, 2 * day);
	named_store(src, "data-0123456789abcdef", "named-data2.sprites", data_store,
		    sizeof data_store);
	place("data-0123456789abcdef-00000000000000a3.sprites", data_store, 2 * day);
	r = sprite_cache_prune(p, "data-0123456789abcdef-3333333333333333-00000000000000f1.sprites",
			       0x3333333333333333ull);
	CHECK(r == 1 && in_cache("data-0123456789abcdef-00000000000000a2.sprites") &&
		      !in_cache("data-0123456789abcdef-00000000000000a3.sprites"),
	      "folder data-<hex>: pruned %d, the store named data %s, data-<hex>'s %s", r,
	      in_cache("data-0123456789abcdef-00000000000000a2.sprites") ? "kept" : "removed",
	      in_cache("data-0123456789abcdef-00000000000000a3.sprites") ? "kept" : "removed");

	/* a folder name over 63 bytes: the earlier packer cut the data set name bytewise */
	char folder[80], name[160], cut[64];
	memset(folder, 'f', 70);
	folder[68] = (char)0xc3; /* a 2-byte character over the cut does not matter here */
	folder[69] = (char)0xa9;
	folder[70] = 0;
	memcpy(cut, folder, 63);
	cut[63] = 0;
	named_store(src, cut, "named-long.sprites", long_store, sizeof long_store);
	snprintf(name, sizeof name, "%s-4444444444444444-00000000000000f2.sprites", folder);
	place(name, src_store, 0);
	snprintf(name, sizeof name, "%s-00000000000000a4.sprites", folder);
	place(name, long_store, 2 * day);
	snprintf(name, sizeof name, "%s-4444444444444444-00000000000000f2.sprites", folder);
	r = sprite_cache_prune(p, name, 0x4444444444444444ull);
	snprintf(name, sizeof name, "%s-00000000000000a4.sprites", folder);
	CHECK(r == 1 && !in_cache(name), "long folder name: pruned %d", r);
}

/*
 * sprite_cache_source_path: one path for a folder whichever way it is given
 * (a bind mount too: mount_source.sh, which mounts).
 */
static void check_source_path(const char *src)
{
	char canon[PATH_MAX], other[PATH_MAX], p[600];
	CHECK(sprite_cache_source_path(src, canon) == 0 && canon[0] == '/' &&
		      !strcmp(strrchr(canon, '/'), "/src"),
	      "canonical path of %s: %s", src, canon);
	snprintf(p, sizeof p, "%s/link", dir);
	CHECK(symlink("src", p) == 0, "symlink: %s", strerror(errno));
	const char *const ways[] = {"/link", "/link/", "/src/../src", "/./src/.", "//src"};
	for (size_t i = 0; i < sizeof ways / sizeof ways[0]; i++) {
		snprintf(p, sizeof p, "%s%s", dir, ways[i]);
		CHECK(sprite_cache_source_path(p, other) == 0 && !strcmp(other, canon),
		      "%s: %s, not %s", p, other, canon);
	}
	snprintf(p, sizeof p, "%s/nosuch", dir);
	CHECK(sprite_cache_source_path(p, other) == -ENOENT, "a missing folder");
}

int main(void)
{
	snprintf(dir, sizeof dir, "%s/test_pack_lib.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return 1;
	char src[300], store[300], err[SPRITE_ERR_MAX];
	snprintf(src, sizeof src, "%s/src", dir);
	snprintf(store, sizeof store, "%s/s.sprites", dir);
	sub("src");
	sub("src/train");
	sub("src/test");
	sub("src/train/b");
	sub("src/train/a");
	sub("src/test/a");
	sub("src/test/c");
	/* Values encode (split, class, index) so the order can be read back. */
	put("src/train/b/2.png", 12, 1);
	put("src/train/b/10.tif", 11, 0); /* "10.tif" < "2.png" bytewise */
	put("src/train/a/x.tif", 1, 0);
	put_raw("src/train/a/y.png", "junk");
	put("src/train/a/z.png", 3, 1);
	put("src/test/c/k.tif", 21, 0);
	put_raw("src/test/a/bad.tif", "II*\0garbage");
	put("src/test/a/m.png", 20, 1);
	put_raw("src/test/notes.txt", "not in a class folder");
	char fifo[300];
	snprintf(fifo, sizeof fifo, "%s/src/train/b/pipe", dir);
	CHECK(mkfifo(fifo, 0644) == 0, "mkfifo %s", fifo);

	struct skips sk = {0};
	struct sprite_progress prog;
	struct sprite_pack_options o = {.codec = SPRITE_CODEC_LZ4,
					.jobs = 0,
					.on_skip = on_skip,
					.on_ignore = on_ignore,
					.ctx = &sk,
					.progress = &prog,
					.sheet_tiles = 2};
	struct sprite_pack_report rep;
	int r = sprite_pack(src, store, &o, &rep, err);
	CHECK(r == 0, "pack: %s", err);
	/* split folders' own entries are listed before the class folders are walked */
	CHECK(rep.ignored == 2 && sk.nign == 2, "ignored %llu, on_ignore %d",
	      (unsigned long long)rep.ignored, sk.nign);
	CHECK(strstr(sk.ign[0], "/src/test/notes.txt: not in a class folder") &&
		      strstr(sk.ign[1], "/src/train/b/pipe: a FIFO, not a file or folder"),
	      "ignored: %s; %s", sk.ign[0], sk.ign[1]);
	CHECK(rep.found == 8 && rep.packed == 6 && rep.skipped == 2,
	      "report found %llu packed %llu skipped %llu", (unsigned long long)rep.found,
	      (unsigned long long)rep.packed, (unsigned long long)rep.skipped);
	CHECK(rep.split_count[0] == 4 && rep.split_count[1] == 2, "split counts %llu %llu",
	      (unsigned long long)rep.split_count[0], (unsigned long long)rep.split_count[1]);
	CHECK(rep.bytes_in > 0 && rep.bytes_out > 0, "bytes in/out not counted");
	CHECK(prog.done == 8, "progress at %llu of 8", (unsigned long long)prog.done);
	CHECK(sk.n == 2 && strstr(sk.paths[0], "train/a/y.png") &&
		      strstr(sk.paths[1], "test/a/bad.tif"),
	      "skips out of order or missing (%d)", sk.n);
	CHECK(sk.n >= 1 && strstr(sk.why[0], "not a PNG/TIFF/JPEG"), "reason: %s", sk.why[0]);
	CHECK(sk.n >= 1 && !strstr(sk.why[0], "y.png"), "reason repeats the path: %s", sk.why[0]);

	/* Read the store back: order train (a/x, a/z, b/10, b/2), test (a/m, c/k). */
	sprite_store *s = NULL;
	r = sprite_store_open(store, &s, err);
	CHECK(r == 0, "open: %s", err);
	if (r == 0) {
		const struct sprite_store_info *in = sprite_store_info(s);
		CHECK(in->nclasses == 3 && !strcmp(in->class_names[0], "a") &&
			      !strcmp(in->class_names[2], "c"),
		      "classes");
		CHECK(in->nsplits == 2 && !strcmp(in->splits[0].name, "train") &&
			      !strcmp(in->splits[1].name, "test"),
		      "splits");
		CHECK(in->tile_h == 6 && in->tile_w == 5 && in->tile_c == 1, "tile shape");
		CHECK(!strcmp(in->name, "src"), "name '%s'", in->name);
		static const uint8_t want_v[] = {1, 3, 11, 12, 20, 21};
		static const uint16_t want_l[] = {0, 0, 1, 1, 0, 2};
		int k = 0;
		static uint8_t raw[1 << 16];
		for (uint32_t i = 0; i < in->nsheets; i++) {
			int64_t n = sprite_store_read_sheet(s, i, raw, sizeof raw, err);
			struct sprite_batch b;
			CHECK(n > 0 && sprite_batch_parse(raw, (size_t)n, &b, err) == 0,
			      "sheet %u: %s", i, err);
			if (n <= 0)
				break;
			for (uint32_t j = 0; j < b.count && k < 6; j++, k++) {
				CHECK(b.tiles[j * 30] == want_v[k] && b.labels[j] == want_l[k],
				      "sample %d: value %u label %u, want %u %u", k,
				      b.tiles[j * 30], b.labels[j], want_v[k], want_l[k]);
			}
		}
		CHECK(k == 6, "read %d samples", k);
		sprite_store_close(s);
	}

	/* strict: fails at the first bad file, no store left behind. */
	char store2[300];
	snprintf(store2, sizeof store2, "%s/strict.sprites", dir);
	o.strict = 1;
	o.progress = NULL;
	sk.n = 0;
	r = sprite_pack(src, store2, &o, &rep, err);
	CHECK(r == -SPRITE_ECORRUPT && strstr(err, "train/b/pipe: a FIFO"), "strict: r=%d err=%s",
	      r, err);
	unlink(fifo);
	r = sprite_pack(src, store2, &o, &rep, err);
	CHECK(r < 0 && strstr(err, "y.png"), "strict: r=%d err=%s", r, err);
	CHECK(access(store2, F_OK) != 0, "strict left a store");

	/* a name longer than the header's field is refused before the source is read */
	char store3[300];
	snprintf(store3, sizeof store3, "%s/long.sprites", dir);
	o.strict = 0;
	o.name = "0123456789012345678901234567890123456789012345678901234567890123";
	r = sprite_pack(src, store3, &o, &rep, err);
	CHECK(r == -ENAMETOOLONG && strstr(err, "64 bytes") && rep.found == 0,
	      "64-byte name: r=%d err=%s", r, err);
	CHECK(access(store3, F_OK) != 0, "64-byte name left a store");
	o.name = NULL;

	check_cache_prune(src);
	check_source_path(src);

	/* fingerprint */
	uint64_t f1, f2;
	CHECK(sprite_pack_fingerprint(src, 0, 0, 0, SPRITE_FIT_CROP, 0, &f1, err) == 0,
	      "fingerprint: %s", err);
	CHECK(sprite_pack_fingerprint(src, 0, 0, 0, SPRITE_FIT_CROP, 0, &f2, err) == 0 && f1 == f2,
	      "fingerprint not stable");
	put("src/test/c/new.png", 5, 1);
	CHECK(sprite_pack_fingerprint(src, 0, 0, 0, SPRITE_FIT_CROP, 0, &f2, err) == 0 && f2 != f1,
	      "added file not seen");
	char a[512], b2[512];
	snprintf(a, sizeof a, "%s/src/test/c/new.png", dir);
	snprintf(b2, sizeof b2, "%s/src/test/c/new2.png", dir);
	uint64_t f3, f4;
	rename(a, b2);
	CHECK(sprite_pack_fingerprint(src, 0, 0, 0, SPRITE_FIT_CROP, 0, &f3, err) == 0 && f3 != f2,
	      "rename not seen");
	unlink(b2);
	/* (folder mtimes count too, so this differs from f1 as well) */
	CHECK(sprite_pack_fingerprint(src, 0, 0, 0, SPRITE_FIT_CROP, 0, &f4, err) == 0 &&
		      f4 != f3 && f4 != f2,
	      "removal not seen");
	put("src/train/a/z.png", 4, 1); /* rewrite: new mtime (and content) */
	struct stat st;
	snprintf(a, sizeof a, "%s/src/train/a/z.png", dir);
	stat(a, &st);
	CHECK(sprite_pack_fingerprint(src, 0, 0, 0, SPRITE_FIT_CROP, 0, &f2, err) == 0 && f2 != f4,
	      "rewrite not seen");
	/* the same folder packed another way is another store */
	uint64_t fc = 0, fp = 0, fs = 0, ft = 0; /* read only when all four were made */
	CHECK(sprite_pack_fingerprint(src, 8, 8, 3, SPRITE_FIT_CROP, 0, &fc, err) == 0 &&
		      sprite_pack_fingerprint(src, 8, 8, 3, SPRITE_FIT_PAD, 0, &fp, err) == 0 &&
		      sprite_pack_fingerprint(src, 8, 8, 3, SPRITE_FIT_STRETCH, 0, &fs, err) == 0 &&
		      sprite_pack_fingerprint(src, 8, 6, 3, SPRITE_FIT_CROP, 0, &ft, err) == 0,
	      "fingerprint with a tile: %s", err);
	CHECK(fc != fp && fc != fs && fp != fs && ft != fc && fc != f2,
	      "the fit mode or the tile does not change the fingerprint");
	/* and with another background; none is the default however spelled */
	uint64_t fw, fn;
	CHECK(sprite_pack_fingerprint(src, 8, 8, 3, SPRITE_FIT_CROP, SPRITE_BG_RGB(255, 255, 255),
				      &fw, err) == 0 &&
		      sprite_pack_fingerprint(src, 8, 8, 3, SPRITE_FIT_CROP, SPRITE_BG_STORED, &fn,
					      err) == 0,
	      "fingerprint with a background: %s", err);
	CHECK(fw != fc && fn == fc, "the background does not change the fingerprint as it should");
	CHECK(sprite_pack_fingerprint("/nonexistent/x", 0, 0, 0, SPRITE_FIT_CROP, 0, &f2, err) ==
		      -ENOENT,
	      "missing source");

	char cmd[400];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	if (failures) {
		fprintf(stderr, "test_pack_lib: %d failures\n", failures);
		return 1;
	}
	printf("test_pack_lib: ok\n");
	return 0;
}
