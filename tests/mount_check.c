/*
 * mount_check - compare every file of a spritefs mount with the store, byte
 * for byte.
 *
 *   mount_check STORE MOUNTPOINT [--seed S] [--epochs E] [--only LIST]
 *               [--direct] [--order K] [--step N]
 *
 * The expected bytes are built here from the store (sprite_store_read_sheet)
 * and the documented layouts (docs/FORMAT.md, "The mount"), never from the
 * daemon's code. Sheets that fail to decode here are "bad": every range of a
 * file that needs one must fail with EIO, and no byte of such a range may
 * ever be returned; the rest must read exactly. Because the kernel groups
 * reads into requests of up to 1 MiB, a failure is also accepted within
 * NEAR bytes of a bad range, never farther.
 *
 * --only takes a comma list of: json, batches, images, labels, byclass,
 * sheets, epochs (default: all). --direct opens files with O_DIRECT so that
 * every read reaches the daemon (concurrency tests). --order K visits files
 * in an order shuffled by K, and reads them in chunks of varying size.
 * --step N checks every N-th by-class image and epoch batch file only, and
 * each epoch's last (large splits).
 * Exit 0: all good; 1: a mismatch (printed); 2: usage or setup problem.
 *
 *   mount_check --labels STORE SPLIT
 *
 * writes the labels of SPLIT as its sheets hold them, in labels.npy's dtype
 * (uint8 up to 256 classes, else uint16 little-endian).
 *
 *   mount_check --corrupt STORE SHEET
 *
 * flips one byte in the middle of the stored bytes of SHEET (in place) and
 * prints the sheet's split and sample range, for the fault tests.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/batch.h"
#include "common/perm.h"
#include "common/store.h"
#include "common/util.h"

#define NEAR (2u << 20)

static const struct sprite_store_info *in;
static sprite_store *st;
static uint8_t **raw; /* decoded sheets; NULL when bad */
static uint32_t *raw_len;
static const char *mnt;
static int use_direct;
static uint64_t order_seed;
static int failures;
static uint64_t files_checked, bytes_checked, eio_seen;
static struct sprite_rng rng;

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "mount_check: " __VA_ARGS__);                                      \
		fputc('\n', stderr);                                                               \
		if (++failures > 20)                                                               \
			exit(1);                                                                   \
	} while (0)

struct range {
	uint64_t lo, hi;
};

struct expect {
	uint8_t *data;
	uint64_t size;
	struct range *bad;
	int nbad, capbad;
};

static void bad_range(struct expect *e, uint64_t lo, uint64_t hi)
{
	if (lo >= hi)
		return;
	if (e->nbad && e->bad[e->nbad - 1].hi >= lo) {
		if (hi > e->bad[e->nbad - 1].hi)
			e->bad[e->nbad - 1].hi = hi;
		return;
	}
	if (e->nbad == e->capbad) {
		e->capbad = e->capbad ? 2 * e->capbad : 8;
		e->bad = realloc(e->bad, (size_t)e->capbad * sizeof(*e->bad));
	}
	e->bad[e->nbad++] = (struct range){lo, hi};
}

static int overlaps_bad(const struct expect *e, uint64_t lo, uint64_t hi)
{
	for (int k = 0; k < e->nbad; k++)
		if (lo < e->bad[k].hi && e->bad[k].lo < hi)
			return 1;
	return 0;
}

static int near_bad(const struct expect *e, uint64_t p)
{
	for (int k = 0; k < e->nbad; k++)
		if (p + NEAR >= e->bad[k].lo && p < e->bad[k].hi + NEAR)
			return 1;
	return 0;
}

static void expect_free(struct expect *e)
{
	free(e->data);
	free(e->bad);
	memset(e, 0, sizeof(*e));
}

/* Read path and compare with e; chunks of varying size when --order is given. */
static void check_file(const char *rel, const struct expect *e)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", mnt, rel);
	struct stat sb;
	files_checked++;
	if (stat(path, &sb) < 0) {
		FAIL("%s: stat: %s", rel, strerror(errno));
		return;
	}
	if ((uint64_t)sb.st_size != e->size) {
		FAIL("%s: size %lld, expected %" PRIu64, rel, (long long)sb.st_size, e->size);
		return;
	}
	int fd = open(path, O_RDONLY | (use_direct ? O_DIRECT : 0));
	if (fd < 0) {
		FAIL("%s: open: %s", rel, strerror(errno));
		return;
	}
	size_t cap = 1u << 20;
	uint8_t *buf = aligned_alloc(4096, cap + 4096);
	uint64_t pos = 0;
	int saw_error = 0;
	while (pos < e->size) {
		size_t want = cap;
		if (order_seed && !use_direct)
			want = 1 + (size_t)sprite_rng_below(&rng, cap);
		ssize_t n = pread(fd, buf, want, (off_t)pos);
		if (n < 0) {
			if (errno != EIO) {
				FAIL("%s: pread at %" PRIu64 ": %s", rel, pos, strerror(errno));
				break;
			}
			eio_seen++;
			saw_error = 1;
			if (!near_bad(e, pos)) {
				FAIL("%s: EIO at %" PRIu64 ", far from any bad sheet", rel, pos);
				break;
			}
			pos = (pos & ~4095ull) + 4096;
			continue;
		}
		if (n == 0) {
			FAIL("%s: EOF at %" PRIu64 " of %" PRIu64, rel, pos, e->size);
			break;
		}
		if (overlaps_bad(e, pos, pos + (uint64_t)n)) {
			FAIL("%s: bytes %" PRIu64 "..%" PRIu64 " were served from a bad sheet", rel,
			     pos, pos + (uint64_t)n);
			break;
		}
		if (memcmp(buf, e->data + pos, (size_t)n)) {
			uint64_t k = 0;
			while (buf[k] == e->data[pos + k])
				k++;
			FAIL("%s: byte %" PRIu64 " is %u, expected %u", rel, pos + k, buf[k],
			     e->data[pos + k]);
			break;
		}
		bytes_checked += (uint64_t)n;
		pos += (uint64_t)n;
	}
	if (e->nbad && !saw_error)
		FAIL("%s: needs a bad sheet but read without error", rel);
	/* reading at or past the end gives 0 bytes */
	if (!e->nbad && pread(fd, buf, 4096, (off_t)((e->size + 4095) & ~4095ull)) != 0 &&
	    !use_direct)
		FAIL("%s: read past the end returned data", rel);
	free(buf);
	close(fd);
}

static void tiles_of_sheet(uint32_t i, uint32_t *labels_off, uint32_t *tiles_off)
{
	struct sprite_batch_header h;
	sprite_batch_layout(in->sheets[i].count, in->tile_h, in->tile_w, in->tile_c, &h);
	*labels_off = h.labels_offset;
	*tiles_off = h.tiles_offset;
}

static int digits(uint64_t n)
{
	int d = 1;
	while (n >= 10) {
		n /= 10;
		d++;
	}
	return d & 31; /* at most 20; the mask tells the compiler so */
}

static const char *ext(void)
{
	return in->tile_c == 1 ? "pgm" : in->tile_c == 3 ? "ppm" : "pam";
}

static int pnm(char *buf, size_t cap, uint32_t h, uint32_t w, uint32_t c)
{
	if (c == 1)
		return snprintf(buf, cap, "P5\n%u %u\n255\n", w, h);
	if (c == 3)
		return snprintf(buf, cap, "P6\n%u %u\n255\n", w, h);
	return snprintf(buf, cap,
			"P7\nWIDTH %u\nHEIGHT %u\nDEPTH %u\nMAXVAL 255\nTUPLTYPE %s\nENDHDR\n", w,
			h, c, c == 2 ? "GRAYSCALE_ALPHA" : "RGB_ALPHA");
}

/* sample -> (sheet, slot) from the index, independently of the daemon */
static uint32_t sheet_of(uint32_t split, uint64_t s, uint32_t *slot)
{
	const struct sprite_split_entry *sp = &in->splits[split];
	for (uint32_t k = 0; k < sp->nsheets; k++) {
		const struct sprite_sheet_entry *e = &in->sheets[sp->first_sheet + k];
		if (s >= e->first && s < e->first + e->count) {
			*slot = (uint32_t)(s - e->first);
			return sp->first_sheet + k;
		}
	}
	fprintf(stderr, "mount_check: sample %" PRIu64 " not in split %u\n", s, split);
	exit(2);
}

static void shuffle(uint32_t *v, uint32_t n)
{
	if (!order_seed)
		return;
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = (uint32_t)sprite_rng_below(&rng, i);
		uint32_t t = v[i - 1];
		v[i - 1] = v[j];
		v[j] = t;
	}
}

static uint32_t *iota(uint32_t n)
{
	uint32_t *v = malloc((n ? n : 1) * sizeof(uint32_t));
	for (uint32_t i = 0; i < n; i++)
		v[i] = i;
	shuffle(v, n);
	return v;
}

static void check_batches(uint32_t split)
{
	const struct sprite_split_entry *sp = &in->splits[split];
	int d = digits(sp->nsheets ? sp->nsheets - 1 : 0);
	uint32_t *ord = iota(sp->nsheets);
	for (uint32_t k = 0; k < sp->nsheets; k++) {
		uint32_t n = ord[k], i = sp->first_sheet + n;
		char rel[256];
		struct expect e = {0};
		e.size = in->sheets[i].raw_size;
		e.data = calloc(1, e.size);
		if (raw[i])
			memcpy(e.data, raw[i], e.size);
		else
			bad_range(&e, 0, e.size);
		snprintf(rel, sizeof(rel), "%.16s/batches/%0*u.sprite", sp->name, d, n);
		check_file(rel, &e);
		if (k == 0) { /* the unpadded name is the same file */
			snprintf(rel, sizeof(rel), "%.16s/batches/%u.sprite", sp->name, n);
			check_file(rel, &e);
		}
		expect_free(&e);
	}
	free(ord);
}

static int npy_ok(const uint8_t *h, uint64_t size, const char *descr, const char *shape,
		  uint64_t *hl)
{
	if (size < 10 || memcmp(h, "\x93NUMPY\x01\x00", 8))
		return 0;
	uint64_t len = 10 + (uint64_t)(h[8] | (h[9] << 8));
	if (len % 64 || len > size || h[len - 1] != '\n')
		return 0;
	char dict[512];
	size_t n = len - 10 < sizeof(dict) - 1 ? len - 10 : sizeof(dict) - 1;
	memcpy(dict, h + 10, n);
	dict[n] = 0;
	char want[256];
	snprintf(want, sizeof(want), "'descr': '%s'", descr);
	if (!strstr(dict, want) || !strstr(dict, "'fortran_order': False"))
		return 0;
	snprintf(want, sizeof(want), "'shape': %s", shape);
	if (!strstr(dict, want))
		return 0;
	*hl = len;
	return 1;
}

/*
 * The npy header alone, read with O_DIRECT so the kernel asks the daemon for
 * these bytes only (a buffered read would pull in data that may be bad).
 */
static void read_head(const char *rel, uint8_t *buf, size_t len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", mnt, rel);
	memset(buf, 0, len);
	int fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0)
		fd = open(path, O_RDONLY);
	if (fd < 0)
		return;
	uint8_t *tmp = aligned_alloc(4096, 4096);
	if (pread(fd, tmp, 10, 0) == 10) {
		size_t hl = 10 + (size_t)(tmp[8] | (tmp[9] << 8));
		if (hl <= len && pread(fd, tmp, hl, 0) == (ssize_t)hl)
			memcpy(buf, tmp, hl);
	}
	free(tmp);
	close(fd);
}

static void check_images(uint32_t split)
{
	const struct sprite_split_entry *sp = &in->splits[split];
	uint64_t tb = (uint64_t)in->tile_h * in->tile_w * in->tile_c, hl;
	char rel[256], shape[128];
	uint8_t head[256];
	snprintf(rel, sizeof(rel), "%.16s/images.npy", sp->name);
	if (in->tile_c == 1)
		snprintf(shape, sizeof(shape), "(%" PRIu64 ", %u, %u)", sp->count, in->tile_h,
			 in->tile_w);
	else
		snprintf(shape, sizeof(shape), "(%" PRIu64 ", %u, %u, %u)", sp->count, in->tile_h,
			 in->tile_w, in->tile_c);
	read_head(rel, head, sizeof(head));
	if (!npy_ok(head, sizeof(head), "|u1", shape, &hl)) {
		FAIL("%s: bad npy header", rel);
		return;
	}
	struct expect e = {0};
	e.size = hl + sp->count * tb;
	e.data = calloc(1, e.size);
	memcpy(e.data, head, hl);
	for (uint32_t k = 0; k < sp->nsheets; k++) {
		uint32_t i = sp->first_sheet + k, lo, to;
		const struct sprite_sheet_entry *s = &in->sheets[i];
		tiles_of_sheet(i, &lo, &to);
		if (raw[i])
			memcpy(e.data + hl + s->first * tb, raw[i] + to, s->count * tb);
		else
			bad_range(&e, hl + s->first * tb, hl + (s->first + s->count) * tb);
	}
	check_file(rel, &e);
	expect_free(&e);
}

/*
 * Sample s's label as the mount must serve it: from the store's label table
 * (version 3) whatever its sheet, else from its sheet (*bad when that is bad).
 */
static uint16_t label_of(uint32_t split, uint64_t s, int *bad)
{
	uint32_t slot, lo, to;
	uint32_t i = sheet_of(split, s, &slot);
	const uint16_t *table = sprite_store_labels(st, split);
	if (table) {
		*bad = 0;
		return table[s];
	}
	if (!raw[i]) {
		*bad = 1;
		return 0;
	}
	tiles_of_sheet(i, &lo, &to);
	uint16_t l;
	memcpy(&l, raw[i] + lo + 2 * slot, 2);
	*bad = 0;
	return l;
}

static void check_labels(uint32_t split)
{
	const struct sprite_split_entry *sp = &in->splits[split];
	int lb = in->nclasses <= 256 ? 1 : 2;
	uint64_t hl;
	char rel[256], shape[64];
	uint8_t head[256];
	snprintf(rel, sizeof(rel), "%.16s/labels.npy", sp->name);
	snprintf(shape, sizeof(shape), "(%" PRIu64 ",)", sp->count);
	read_head(rel, head, sizeof(head));
	if (!npy_ok(head, sizeof(head), lb == 1 ? "|u1" : "<u2", shape, &hl)) {
		FAIL("%s: bad npy header", rel);
		return;
	}
	struct expect e = {0};
	e.size = hl + sp->count * (uint64_t)lb;
	e.data = calloc(1, e.size);
	memcpy(e.data, head, hl);
	for (uint64_t s = 0; s < sp->count; s++) {
		int bad;
		uint16_t l = label_of(split, s, &bad);
		if (bad)
			bad_range(&e, hl + s * (uint64_t)lb, hl + (s + 1) * (uint64_t)lb);
		else if (lb == 1)
			e.data[hl + s] = (uint8_t)l;
		else
			memcpy(e.data + hl + 2 * s, &l, 2);
	}
	check_file(rel, &e);
	expect_free(&e);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void check_byclass(uint32_t split, uint32_t step)
{
	const struct sprite_split_entry *sp = &in->splits[split];
	uint64_t tb = (uint64_t)in->tile_h * in->tile_w * in->tile_c;
	int d = digits(sp->count ? sp->count - 1 : 0);
	char hdr[160];
	int hl = pnm(hdr, sizeof(hdr), in->tile_h, in->tile_w, in->tile_c);
	for (uint32_t c = 0; c < in->nclasses; c++) {
		char dir[4096], rel[512];
		/* class directories are named by class name (docs/FORMAT.md) */
		snprintf(dir, sizeof(dir), "%s/%.16s/by-class/%s", mnt, sp->name,
			 in->class_names[c]);
		/* by-class lists only the classes with samples in the split */
		uint64_t nwant = 0;
		for (uint64_t s = 0; s < sp->count; s++) {
			int bad;
			if (label_of(split, s, &bad) == c && !bad)
				nwant++;
		}
		DIR *dp = opendir(dir);
		if (!dp) {
			if (errno != ENOENT || nwant)
				FAIL("%s: %s", dir, strerror(errno));
			continue;
		}
		if (!nwant)
			FAIL("%s: listed, but the class has no sample in the split", dir);
		char **names = NULL;
		size_t nn = 0, cap = 0;
		struct dirent *de;
		while ((de = readdir(dp))) {
			if (de->d_name[0] == '.')
				continue;
			if (nn == cap) {
				cap = cap ? 2 * cap : 256;
				names = realloc(names, cap * sizeof(char *));
			}
			names[nn++] = strdup(de->d_name);
		}
		closedir(dp);
		sprite_sort(names, nn, sizeof(char *), cmp_str);
		size_t k = 0;
		for (uint64_t s = 0; s < sp->count; s++) {
			int bad;
			uint16_t l = label_of(split, s, &bad);
			if (bad || l != c)
				continue;
			char want[128];
			snprintf(want, sizeof(want), "%0*" PRIu64 ".%s", d, s, ext());
			if (k >= nn || strcmp(names[k], want)) {
				FAIL("%s: expected entry %s, found %s", dir, want,
				     k < nn ? names[k] : "(end)");
				break;
			}
			k++;
			if (s % step)
				continue;
			uint32_t slot, lo, to, i = sheet_of(split, s, &slot);
			tiles_of_sheet(i, &lo, &to);
			struct expect e = {0};
			e.size = (uint64_t)hl + tb;
			e.data = malloc(e.size);
			memcpy(e.data, hdr, (size_t)hl);
			if (raw[i]) /* a bad sheet's sample is listed (label table) but gives EIO */
				memcpy(e.data + hl, raw[i] + to + slot * tb, tb);
			else
				bad_range(&e, (uint64_t)hl, (uint64_t)hl + tb);
			snprintf(rel, sizeof(rel), "%.16s/by-class/%s/%s", sp->name,
				 in->class_names[c], want);
			check_file(rel, &e);
			expect_free(&e);
		}
		if (k != nn && !failures)
			FAIL("%s: %zu entries, expected %zu", dir, nn, k);
		for (size_t q = 0; q < nn; q++)
			free(names[q]);
		free(names);
	}
}

static void check_sheets(uint32_t split)
{
	const struct sprite_split_entry *sp = &in->splits[split];
	uint64_t tb = (uint64_t)in->tile_h * in->tile_w * in->tile_c;
	uint64_t trow = (uint64_t)in->tile_w * in->tile_c;
	int d = digits(sp->nsheets ? sp->nsheets - 1 : 0);
	for (uint32_t n = 0; n < sp->nsheets; n++) {
		uint32_t i = sp->first_sheet + n, lo, to, cols = 1;
		uint32_t cnt = in->sheets[i].count;
		while ((uint64_t)cols * cols < cnt)
			cols++;
		uint32_t rows = (cnt + cols - 1) / cols;
		char hdr[200], rel[256];
		int hl = pnm(hdr, sizeof(hdr), rows * in->tile_h, cols * in->tile_w, in->tile_c);
		struct expect e = {0};
		e.size = (uint64_t)hl + (uint64_t)rows * cols * tb;
		e.data = calloc(1, e.size);
		memcpy(e.data, hdr, (size_t)hl);
		tiles_of_sheet(i, &lo, &to);
		if (!raw[i])
			bad_range(&e, (uint64_t)hl, e.size);
		else
			for (uint32_t t = 0; t < cnt; t++)
				for (uint32_t y = 0; y < in->tile_h; y++)
					memcpy(e.data + hl +
						       ((uint64_t)(t / cols) * in->tile_h + y) *
							       cols * trow +
						       (t % cols) * trow,
					       raw[i] + to + t * tb + y * trow, trow);
		snprintf(rel, sizeof(rel), "%.16s/sheets/%0*u.%s", sp->name, d, n, ext());
		check_file(rel, &e);
		expect_free(&e);
	}
}

/* The split's order and window, from dataset.json (the daemon's choice). */
static void split_order(const char *json, const char *name, uint32_t *window, uint32_t *batch)
{
	char key[64];
	snprintf(key, sizeof(key), "\"%s\": {", name);
	const char *p = strstr(json, key);
	const char *w = p ? strstr(p, "\"window\": ") : NULL;
	*window = w ? (uint32_t)strtoul(w + 10, NULL, 10) : 0;
	const char *b = strstr(json, "\"batch\": ");
	*batch = b ? (uint32_t)strtoul(b + 9, NULL, 10) : 0;
}

static void check_epochs(uint32_t split, const char *json, uint64_t seed, uint32_t nepochs,
			 uint32_t step)
{
	const struct sprite_split_entry *sp = &in->splits[split];
	uint64_t tb = (uint64_t)in->tile_h * in->tile_w * in->tile_c;
	uint32_t window, batch;
	split_order(json, sp->name, &window, &batch);
	if (!batch) {
		FAIL("dataset.json: no epoch batch size");
		return;
	}
	uint32_t n = (uint32_t)sp->count;
	uint32_t *perm = malloc((n ? n : 1) * sizeof(uint32_t));
	uint32_t nb = (n + batch - 1) / batch;
	int d = digits(nb ? nb - 1 : 0);
	for (uint32_t ep = 0; ep < nepochs; ep++) {
		if (window)
			sprite_perm_windowed(seed, ep, n, in->sheet_tiles, window, perm);
		else
			sprite_perm(seed, ep, n, perm);
		uint32_t *ord = iota(nb);
		for (uint32_t q = 0; q < nb; q++) {
			uint32_t b = ord[q];
			if (b % step && b != nb - 1)
				continue;
			uint32_t cnt = n - b * batch < batch ? n - b * batch : batch;
			struct expect e = {0};
			struct sprite_batch_header h;
			sprite_batch_layout(cnt, in->tile_h, in->tile_w, in->tile_c, &h);
			e.size = h.total_size;
			e.data = calloc(1, e.size);
			sprite_batch_init(e.data, cnt, in->tile_h, in->tile_w, in->tile_c, split);
			for (uint32_t k = 0; k < cnt; k++) {
				uint32_t s = perm[(uint64_t)b * batch + k], slot, lo, to;
				uint32_t i = sheet_of(split, s, &slot);
				memcpy(e.data + h.ids_offset + 4 * k, &s, 4);
				if (!raw[i]) {
					/* its label and its tile need the bad sheet */
					bad_range(&e, h.labels_offset + 2 * k,
						  h.labels_offset + 2 * k + 2);
					continue;
				}
				tiles_of_sheet(i, &lo, &to);
				memcpy(e.data + h.labels_offset + 2 * k, raw[i] + lo + 2 * slot, 2);
				memcpy(e.data + h.ids_offset + 4 * k, &s, 4);
				memcpy(e.data + h.tiles_offset + k * tb, raw[i] + to + slot * tb,
				       tb);
			}
			for (uint32_t k = 0; k < cnt; k++) {
				uint32_t slot,
					i = sheet_of(split, perm[(uint64_t)b * batch + k], &slot);
				if (!raw[i])
					bad_range(&e, h.tiles_offset + k * tb,
						  h.tiles_offset + (k + 1) * tb);
			}
			char rel[512];
			snprintf(rel, sizeof(rel), "%.16s/epochs/%" PRIu64 "/%u/%0*u.sprite",
				 sp->name, seed, ep, d, b);
			check_file(rel, &e);
			expect_free(&e);
		}
		free(ord);
	}
	free(perm);
}

static char *slurp(const char *rel)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", mnt, rel);
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	char *buf = calloc(1, 1 << 20);
	size_t n = fread(buf, 1, (1 << 20) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

static int want(const char *only, const char *what)
{
	if (!only)
		return 1;
	size_t n = strlen(what);
	for (const char *p = only; (p = strstr(p, what)); p += n)
		if ((p == only || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
			return 1;
	return 0;
}

/*
 * --labels: the labels of split as its sheets hold them (each decoded, as
 * its batch file is), in labels.npy's dtype, to stdout.
 */
static int print_labels(const char *store, const char *split)
{
	char err[SPRITE_ERR_MAX];
	if (sprite_store_open(store, &st, err) < 0) {
		fprintf(stderr, "mount_check: %s: %s\n", store, err);
		return 2;
	}
	in = sprite_store_info(st);
	int k = sprite_store_find_split(st, split);
	if (k < 0)
		return 2;
	const struct sprite_split_entry *sp = &in->splits[k];
	for (uint32_t i = sp->first_sheet; i < sp->first_sheet + sp->nsheets; i++) {
		uint8_t *b = malloc(in->sheets[i].raw_size);
		struct sprite_batch bt;
		if (!b || sprite_store_read_sheet(st, i, b, in->sheets[i].raw_size, err) < 0 ||
		    sprite_batch_parse(b, in->sheets[i].raw_size, &bt, err) < 0) {
			fprintf(stderr, "mount_check: %s: %s\n", store, err);
			return 2;
		}
		for (uint32_t j = 0; j < bt.count; j++) {
			uint16_t l = bt.labels[j];
			if (in->nclasses <= 256)
				putchar(l);
			else
				fwrite(&l, 2, 1, stdout);
		}
		free(b);
	}
	return fflush(stdout) ? 2 : 0;
}

int main(int argc, char **argv)
{
	uint64_t seed = 0;
	uint32_t nepochs = 2, step = 1;
	const char *only = NULL;
	char err[SPRITE_ERR_MAX];
	if (argc == 4 && !strcmp(argv[1], "--corrupt")) {
		if (sprite_store_open(argv[2], &st, err) < 0) {
			fprintf(stderr, "mount_check: %s: %s\n", argv[2], err);
			return 2;
		}
		in = sprite_store_info(st);
		uint32_t i = (uint32_t)strtoul(argv[3], NULL, 10);
		if (i >= in->nsheets)
			return 2;
		const struct sprite_sheet_entry *e = &in->sheets[i];
		uint64_t off = e->offset + e->stored_size / 2;
		int fd = open(argv[2], O_RDWR);
		uint8_t b;
		if (fd < 0 || pread(fd, &b, 1, (off_t)off) != 1)
			return 2;
		b ^= 0x5a;
		if (pwrite(fd, &b, 1, (off_t)off) != 1)
			return 2;
		close(fd);
		printf("%.16s %" PRIu64 " %u\n", in->splits[e->split].name, e->first, e->count);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "--labels"))
		return print_labels(argv[2], argv[3]);
	if (argc < 3) {
		fprintf(stderr, "usage: mount_check STORE MOUNTPOINT [--seed S] [--epochs E] "
				"[--only LIST] [--direct] [--order K] [--step N]\n");
		return 2;
	}
	mnt = argv[2];
	for (int a = 3; a < argc; a++) {
		if (!strcmp(argv[a], "--seed") && a + 1 < argc)
			seed = strtoull(argv[++a], NULL, 10);
		else if (!strcmp(argv[a], "--epochs") && a + 1 < argc)
			nepochs = (uint32_t)strtoul(argv[++a], NULL, 10);
		else if (!strcmp(argv[a], "--only") && a + 1 < argc)
			only = argv[++a];
		else if (!strcmp(argv[a], "--direct"))
			use_direct = 1;
		else if (!strcmp(argv[a], "--order") && a + 1 < argc)
			order_seed = strtoull(argv[++a], NULL, 10);
		else if (!strcmp(argv[a], "--step") && a + 1 < argc)
			step = (uint32_t)strtoul(argv[++a], NULL, 10);
		else {
			fprintf(stderr, "mount_check: unknown argument %s\n", argv[a]);
			return 2;
		}
	}
	if (!step)
		step = 1;
	sprite_rng_init(&rng, order_seed, 7);
	if (sprite_store_open(argv[1], &st, err) < 0) {
		fprintf(stderr, "mount_check: %s: %s\n", argv[1], err);
		return 2;
	}
	in = sprite_store_info(st);
	raw = calloc(in->nsheets ? in->nsheets : 1, sizeof(*raw));
	raw_len = calloc(in->nsheets ? in->nsheets : 1, sizeof(*raw_len));
	uint32_t nbad = 0;
	for (uint32_t i = 0; i < in->nsheets; i++) {
		raw[i] = malloc(in->sheets[i].raw_size);
		if (sprite_store_read_sheet(st, i, raw[i], in->sheets[i].raw_size, err) < 0) {
			free(raw[i]);
			raw[i] = NULL;
			nbad++;
		}
	}
	char *json = slurp("dataset.json");
	if (!json) {
		fprintf(stderr, "mount_check: %s/dataset.json: %s\n", mnt, strerror(errno));
		return 1;
	}
	if (want(only, "json")) {
		for (uint32_t s = 0; s < in->nsplits; s++) {
			char key[96];
			snprintf(key, sizeof(key), "\"count\": %" PRIu64, in->splits[s].count);
			if (!strstr(json, key) || !strstr(json, in->splits[s].name))
				FAIL("dataset.json does not give split %.16s with %s",
				     in->splits[s].name, key);
		}
		char *stats = slurp(".spritefs/stats.json");
		if (!stats || !strstr(stats, "\"cache_hits\"") || !strstr(stats, "\"rss\""))
			FAIL(".spritefs/stats.json missing or incomplete");
		free(stats);
	}
	for (uint32_t s = 0; s < in->nsplits; s++) {
		if (want(only, "batches"))
			check_batches(s);
		if (want(only, "images"))
			check_images(s);
		if (want(only, "labels"))
			check_labels(s);
		if (want(only, "byclass"))
			check_byclass(s, step);
		if (want(only, "sheets"))
			check_sheets(s);
		if (want(only, "epochs"))
			check_epochs(s, json, seed, nepochs, step);
	}
	if (nbad) {
		char *stats = slurp(".spritefs/stats.json");
		const char *p = stats ? strstr(stats, "\"checksum_failures\": ") : NULL;
		unsigned long cf = p ? strtoul(p + 21, NULL, 10) : 0;
		if (cf < 1)
			FAIL("%u bad sheets, but stats.json counts %lu checksum failures", nbad,
			     cf);
		if (!eio_seen)
			FAIL("%u bad sheets, but no read failed", nbad);
		free(stats);
	}
	printf("mount_check: %" PRIu64 " files, %" PRIu64 " bytes compared, %u bad sheets, "
	       "%" PRIu64 " EIO seen, %d failures\n",
	       files_checked, bytes_checked, nbad, eio_seen, failures);
	free(json);
	return failures ? 1 : 0;
}
