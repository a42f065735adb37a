/*
 * readbench.c - spritefs-readbench: how fast can a reader that does no
 * training get bytes, and decoded samples, out of a medium?
 *
 * It reads every file under the given paths (or the sheets of a store, or
 * the rows of an images.npy) with N threads and prints one JSON object:
 * raw MB/s and files/s, and, with --decode, samples/s delivered as decoded
 * uint8 tiles in memory. Decoding is the work any trainer must do before the
 * maths: a TIFF/PNG/JPEG file goes through common/image.h, a spritefs batch
 * file through common/batch.h (parse and point into the bytes), a store
 * sheet through lz4 + checksums (common/store.h), an images.npy is cut into
 * rows. --decode lz4 reads a store's sheets into memory first and times
 * only their decoding (checksum, lz4, checks: a mount's decode worker's
 * work), the rate that bounds a cold mount per decode thread; each sheet
 * decodes into its own buffer (up to 64 a thread, cycled), so that, as in
 * the mount, the decoded bytes go to memory and not to a buffer the cache
 * still holds. --decode copy decodes the sheets before the clock and times
 * one memcpy of each into such buffers: the rate of the one copy per
 * delivered byte that a reader of a mount cannot avoid (the floor of
 * spritefs-bench's cold-path CPU, with --decode lz4's). Every
 * delivered sample is hashed (XXH3) and the hashes are summed, an
 * order-independent fingerprint: the same samples give the same
 * "sample_sum" whatever the medium, the number of threads or the file order,
 * so the bench can show that two media delivered the same data.
 *
 * Threads take the next file (or sheet, or chunk of rows) from one atomic
 * counter, so a slow file does not stall the others; the wall time covers
 * all of it, from the first open to the last close.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/batch.h"
#include "common/image.h"
#include "common/store.h"
#include "common/util.h"

enum rb_decode { RB_RAW, RB_IMAGE, RB_BATCH, RB_NPY, RB_STORE, RB_LZ4, RB_COPY };

struct rb_item {
	char *path;
	uint32_t sheet;	 /* RB_STORE: sheet index; RB_NPY: first row */
	uint32_t rows;	 /* RB_NPY: rows in this chunk */
	int src;	 /* RB_STORE / RB_NPY / RB_LZ4: index into srcs */
	uint8_t *stored; /* RB_LZ4: the sheet's stored bytes, read before the clock */
};

/* An opened store or npy file shared by the items that refer to it. */
struct rb_src {
	char *path;
	sprite_store *store;
	int fd;
	uint64_t data_off, row_bytes, rows;
};

struct rb_ctx {
	enum rb_decode decode;
	size_t bs;
	int direct;
	struct rb_item *items;
	size_t nitems, cap;
	struct rb_src *srcs;
	int nsrcs;
	const char *match;
	uint32_t passes;
	double seconds, deadline; /* --seconds: passes until then */
	uint64_t next;		  /* atomic: next item to take, over passes * nitems */
	/* totals, atomic */
	uint64_t files, bytes, samples, sum, errors;
	pthread_mutex_t err_lock;
	char first_err[512];
	uint32_t shape[3];
	uint32_t th, tw, tc; /* --tile: images fitted as spritefs-pack would */
	enum sprite_fit fit;
};

static struct rb_ctx ctx;

static int rb_fail(const char *fmt, const char *a, const char *b)
{
	__atomic_add_fetch(&ctx.errors, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&ctx.err_lock);
	if (!ctx.first_err[0])
		snprintf(ctx.first_err, sizeof(ctx.first_err), fmt, a, b);
	pthread_mutex_unlock(&ctx.err_lock);
	return -1;
}

static int rb_add_item(const char *path, uint32_t sheet, uint32_t rows, int src)
{
	if (ctx.nitems == ctx.cap) {
		size_t ncap = ctx.cap ? ctx.cap * 2 : 1024;
		struct rb_item *n = realloc(ctx.items, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		ctx.items = n;
		ctx.cap = ncap;
	}
	struct rb_item *it = &ctx.items[ctx.nitems];
	*it = (struct rb_item){.path = path ? strdup(path) : NULL};
	if (path && !it->path)
		return -ENOMEM;
	it->sheet = sheet;
	it->rows = rows;
	it->src = src;
	ctx.nitems++;
	return 0;
}

static int rb_walk_cb(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)st;
	(void)f;
	if (type != FTW_F)
		return 0;
	if (ctx.match) {
		size_t n = strlen(path), m = strlen(ctx.match);
		if (n < m || strcmp(path + n - m, ctx.match) != 0)
			return 0;
	}
	return rb_add_item(path, 0, 0, -1) ? 1 : 0;
}

static int rb_cmp_item(const void *a, const void *b)
{
	return strcmp(((const struct rb_item *)a)->path, ((const struct rb_item *)b)->path);
}

/*
 * Read a whole file into *buf (grown as needed, huge-page backed for
 * --direct, sprite_huge_alloc); returns its length or -errno.
 */
static int64_t rb_slurp(const char *path, uint8_t **buf, size_t *cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | (ctx.direct ? O_DIRECT : 0));
	if (fd < 0)
		return -errno;
	struct stat st;
	size_t want = 0;
	if (fstat(fd, &st) == 0 && st.st_size > 0)
		want = (size_t)st.st_size + 1; /* +1 to see EOF in one pass */
	size_t len = 0;
	for (;;) {
		if (len == *cap || want > *cap) {
			size_t ncap = *cap ? *cap * 2 : 1 << 20;
			while (ncap < want)
				ncap *= 2;
			uint8_t *n = sprite_huge_alloc(&ncap);
			if (!n) {
				close(fd);
				return -ENOMEM;
			}
			memcpy(n, *buf, len);
			free(*buf);
			*buf = n;
			*cap = ncap;
		}
		ssize_t r = read(fd, *buf + len, *cap - len);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = -errno;
			close(fd);
			return e;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	return (int64_t)len;
}

static int64_t rb_read_raw(const char *path, uint8_t *buf, size_t bs)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | (ctx.direct ? O_DIRECT : 0));
	if (fd < 0)
		return -errno;
	int64_t total = 0;
	for (;;) {
		ssize_t r = read(fd, buf, bs);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = -errno;
			close(fd);
			return e;
		}
		if (r == 0)
			break;
		total += r;
	}
	close(fd);
	return total;
}

/* --decode lz4: a sheet's stored bytes, read into memory before the clock starts */
static int rb_load_stored(struct rb_src *s, struct rb_item *it)
{
	const struct sprite_sheet_entry *e = &sprite_store_info(s->store)->sheets[it->sheet];
	int fd = open(s->path, O_RDONLY | O_CLOEXEC), r = -errno;
	it->stored = malloc(e->stored_size ? e->stored_size : 1);
	if (!it->stored)
		r = -ENOMEM;
	else if (fd >= 0)
		r = sprite_pread_full(fd, it->stored, e->stored_size, e->offset);
	if (fd >= 0)
		close(fd);
	if (r < 0)
		fprintf(stderr, "spritefs-readbench: %s: sheet %u: %s\n", s->path, it->sheet,
			strerror(-r));
	return r;
}

/* --decode copy: the stored bytes (rb_load_stored) replaced by the decoded sheet */
static int rb_load_decoded(struct rb_src *s, struct rb_item *it)
{
	char err[SPRITE_ERR_MAX] = "";
	const struct sprite_sheet_entry *e = &sprite_store_info(s->store)->sheets[it->sheet];
	uint8_t *raw = malloc(e->raw_size ? e->raw_size : 1);
	int64_t n = raw ? sprite_sheet_decode(s->store, it->sheet, it->stored, e->stored_size, raw,
					      e->raw_size, err)
			: -ENOMEM;
	free(it->stored);
	it->stored = raw;
	if (n < 0)
		fprintf(stderr, "spritefs-readbench: %s: sheet %u: %s\n", s->path, it->sheet,
			err[0] ? err : strerror((int)-n));
	return n < 0 ? (int)n : 0;
}

static void rb_note_shape(uint32_t h, uint32_t w, uint32_t c)
{
	uint32_t zero = 0;
	if (__atomic_compare_exchange_n(&ctx.shape[0], &zero, h, 0, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED)) {
		ctx.shape[1] = w;
		ctx.shape[2] = c;
	}
}

struct rb_thread {
	pthread_t tid;
	uint8_t *buf, *aux;
	size_t cap, auxcap;
	uint8_t **outs; /* --decode lz4: one output per sheet, cycled */
	size_t nouts;
	uint64_t files, bytes, samples, sum;
	double cpu; /* the thread's CPU time on the timed work */
};

static int rb_do_item(struct rb_thread *t, const struct rb_item *it)
{
	char err[SPRITE_ERR_MAX] = "";
	if (ctx.decode == RB_RAW) {
		int64_t n = rb_read_raw(it->path, t->buf, ctx.bs);
		if (n < 0)
			return rb_fail("%s: %s", it->path, strerror((int)-n));
		t->files++;
		t->bytes += (uint64_t)n;
		return 0;
	}
	if (ctx.decode == RB_STORE) {
		struct rb_src *s = &ctx.srcs[it->src];
		const struct sprite_store_info *in = sprite_store_info(s->store);
		const struct sprite_sheet_entry *e = &in->sheets[it->sheet];
		int64_t n = sprite_store_read_sheet(s->store, it->sheet, t->buf, t->cap, err);
		if (n < 0)
			return rb_fail("%s: %s", s->path, err[0] ? err : strerror((int)-n));
		struct sprite_batch b;
		if (sprite_batch_parse(t->buf, (size_t)n, &b, err) < 0)
			return rb_fail("%s: %s", s->path, err);
		size_t tile = (size_t)b.h * b.w * b.c;
		for (uint32_t i = 0; i < b.count; i++)
			t->sum += sprite_checksum(b.tiles + i * tile, tile);
		rb_note_shape(b.h, b.w, b.c);
		t->files++;
		t->bytes += e->stored_size;
		t->samples += b.count;
		return 0;
	}
	if (ctx.decode == RB_LZ4) {
		struct rb_src *s = &ctx.srcs[it->src];
		const struct sprite_sheet_entry *e =
			&sprite_store_info(s->store)->sheets[it->sheet];
		uint8_t *dst = t->nouts ? t->outs[t->files % t->nouts] : t->buf;
		int64_t n = sprite_sheet_decode(s->store, it->sheet, it->stored, e->stored_size,
						dst, t->cap, err);
		if (n < 0)
			return rb_fail("%s: %s", s->path, err);
		t->files++;
		t->bytes += (uint64_t)n;
		t->samples += e->count;
		return 0;
	}
	if (ctx.decode == RB_COPY) {
		const struct sprite_sheet_entry *e =
			&sprite_store_info(ctx.srcs[it->src].store)->sheets[it->sheet];
		uint8_t *dst = t->nouts ? t->outs[t->files % t->nouts] : t->buf;
		memcpy(dst, it->stored, e->raw_size);
		t->files++;
		t->bytes += e->raw_size;
		t->samples += e->count;
		return 0;
	}
	if (ctx.decode == RB_NPY) {
		struct rb_src *s = &ctx.srcs[it->src];
		size_t need = (size_t)it->rows * s->row_bytes;
		uint64_t off = s->data_off + (uint64_t)it->sheet * s->row_bytes;
		size_t got = 0;
		while (got < need) {
			ssize_t r = pread(s->fd, t->buf + got, need - got, (off_t)(off + got));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				return rb_fail("%s: %s", s->path,
					       r < 0 ? strerror(errno) : "short read");
			got += (size_t)r;
		}
		for (uint32_t i = 0; i < it->rows; i++)
			t->sum += sprite_checksum(t->buf + i * s->row_bytes, s->row_bytes);
		t->bytes += need;
		t->samples += it->rows;
		return 0;
	}
	int64_t n = rb_slurp(it->path, &t->buf, &t->cap);
	if (n < 0)
		return rb_fail("%s: %s", it->path, strerror((int)-n));
	t->files++;
	t->bytes += (uint64_t)n;
	if (ctx.decode == RB_IMAGE) {
		struct sprite_image im = {0};
		int r = sprite_image_decode_for(t->buf, (size_t)n, it->path, ctx.th, ctx.tw,
						ctx.fit, 0, &im, err);
		if (r < 0)
			return rb_fail("%s: %s", it->path, err[0] ? err : strerror(-r));
		if (ctx.th) {
			/* the tile a trainer gets: the same fit as the store's */
			uint32_t c = ctx.tc ? ctx.tc : im.c;
			size_t tb = (size_t)ctx.th * ctx.tw * c;
			uint8_t *tile = malloc(tb);
			if (!tile || sprite_image_fit(&im, ctx.th, ctx.tw, c, ctx.fit, tile) < 0) {
				free(tile);
				sprite_image_free(&im);
				return rb_fail("%s: %s", it->path,
					       "cannot fit the image to --tile");
			}
			t->sum += sprite_checksum(tile, tb);
			rb_note_shape(ctx.th, ctx.tw, c);
			free(tile);
		} else {
			t->sum += sprite_checksum(im.px, (size_t)im.h * im.w * im.c);
			rb_note_shape(im.h, im.w, im.c);
		}
		sprite_image_free(&im);
		t->samples++;
	} else { /* RB_BATCH */
		struct sprite_batch b;
		if (sprite_batch_parse(t->buf, (size_t)n, &b, err) < 0)
			return rb_fail("%s: %s", it->path, err);
		size_t tile = (size_t)b.h * b.w * b.c;
		for (uint32_t i = 0; i < b.count; i++)
			t->sum += sprite_checksum(b.tiles + i * tile, tile);
		rb_note_shape(b.h, b.w, b.c);
		t->samples += b.count;
	}
	return 0;
}

static void *rb_worker(void *arg)
{
	struct rb_thread *t = arg;
	struct timespec c0, c1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	for (;;) {
		uint64_t i = __atomic_fetch_add(&ctx.next, 1, __ATOMIC_RELAXED);
		if (ctx.seconds > 0 ? i >= ctx.nitems && sprite_now() >= ctx.deadline
				    : i >= ctx.nitems * ctx.passes)
			break;
		/* sample_sum fingerprints one pass: later passes leave it alone */
		uint64_t sum = t->sum;
		rb_do_item(t, &ctx.items[i % ctx.nitems]);
		if (i >= ctx.nitems)
			t->sum = sum;
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	t->cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
	return NULL;
}

/*
 * Parse a .npy header (format 1.0/2.0/3.0) of a C-order uint8 array and
 * set data offset, rows and bytes per row. Hostile input: every field is
 * checked against the file size.
 */
static int rb_npy_open(struct rb_src *s, char *err, size_t errcap)
{
	uint8_t h[4096];
	ssize_t n = pread(s->fd, h, sizeof(h) - 1, 0);
	if (n < 10 || memcmp(h, "\x93NUMPY", 6) != 0) {
		snprintf(err, errcap, "%s: not a .npy file (bad magic)", s->path);
		return -EINVAL;
	}
	uint64_t hlen, hoff;
	if (h[6] == 1) {
		hlen = h[8] | (uint64_t)h[9] << 8;
		hoff = 10;
	} else {
		hlen = h[8] | (uint64_t)h[9] << 8 | (uint64_t)h[10] << 16 | (uint64_t)h[11] << 24;
		hoff = 12;
	}
	if (hoff + hlen > (uint64_t)n) {
		snprintf(err, errcap, "%s: .npy header longer than 4 KiB or truncated", s->path);
		return -EINVAL;
	}
	h[hoff + hlen] = 0;
	const char *d = (const char *)h + hoff;
	if (!strstr(d, "'|u1'") && !strstr(d, "'u1'")) {
		snprintf(err, errcap, "%s: .npy dtype is not uint8", s->path);
		return -EINVAL;
	}
	if (strstr(d, "'fortran_order': True")) {
		snprintf(err, errcap, "%s: .npy in Fortran order", s->path);
		return -EINVAL;
	}
	const char *sh = strstr(d, "'shape':");
	if (!sh || !(sh = strchr(sh, '('))) {
		snprintf(err, errcap, "%s: .npy header has no shape", s->path);
		return -EINVAL;
	}
	uint64_t dims[8], nd = 0;
	sh++;
	while (nd < 8) {
		while (*sh == ' ' || *sh == ',')
			sh++;
		if (*sh < '0' || *sh > '9')
			break;
		dims[nd++] = strtoull(sh, (char **)&sh, 10);
	}
	if (nd < 1) {
		snprintf(err, errcap, "%s: .npy shape is empty", s->path);
		return -EINVAL;
	}
	uint64_t row = 1;
	for (uint64_t i = 1; i < nd; i++) {
		if (dims[i] == 0 || row > UINT32_MAX / dims[i]) {
			snprintf(err, errcap, "%s: .npy row size out of range", s->path);
			return -EINVAL;
		}
		row *= dims[i];
	}
	struct stat st;
	if (fstat(s->fd, &st) < 0)
		return -errno;
	s->data_off = hoff + hlen;
	s->row_bytes = row;
	s->rows = dims[0];
	if (s->rows > ((uint64_t)st.st_size - s->data_off) / row) {
		snprintf(err, errcap,
			 "%s: .npy holds %" PRIu64 " rows of %" PRIu64
			 " bytes but the file is %lld bytes",
			 s->path, s->rows, row, (long long)st.st_size);
		return -EINVAL;
	}
	if (nd == 3)
		rb_note_shape((uint32_t)dims[1], (uint32_t)dims[2], 1);
	else if (nd == 4)
		rb_note_shape((uint32_t)dims[1], (uint32_t)dims[2], (uint32_t)dims[3]);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: spritefs-readbench [options] PATH...\n"
		   "Read every file under PATH (files or folders) and print one JSON line with\n"
		   "raw MB/s, files/s and, with --decode, decoded samples/s.\n"
		   "  --decode KIND  none (raw read, default) | image (TIFF/PNG/JPEG files) |\n"
		   "                 batch (spritefs *.sprite batch files) | npy (uint8 .npy "
		   "files) |\n"
		   "                 store (sheets of *.sprites store files) |\n"
		   "                 lz4 (sheets of a store read into memory first: decoding\n"
		   "                 alone is timed, bytes are decoded bytes) |\n"
		   "                 copy (sheets decoded first: one memcpy of each is timed)\n"
		   "  --match SUFFIX only files whose path ends with SUFFIX\n"
		   "  --threads N    reader threads (default 1)\n"
		   "  --bs SIZE      read size for raw reads, rows chunk for npy (default 1M)\n"
		   "  --direct       O_DIRECT for raw reads and batch files\n"
		   "  --limit N      at most N files / sheets (in path order)\n"
		   "  --passes N     read everything N times (warm reads: a pass of a few\n"
		   "                 milliseconds is all noise); sample_sum covers one pass\n"
		   "  --seconds S    passes until S seconds have gone (at least one; replaces\n"
		   "                 --passes)\n"
		   "  --tile HxW[xC] with --decode image: fit each image to this tile as\n"
		   "                 spritefs-pack does (its decode and resize are timed too)\n"
		   "  --fit MODE     crop (default), pad or stretch, with --tile\n"
		   "  --label TEXT   copied into the JSON output\n");
}

/* The command line into ctx and the out-parameters: -1 to go on, else the exit code. */
static int rb_parse(int argc, char **argv, int *threads, uint64_t *limit, uint64_t *bs,
		    const char **label)
{
	static const struct option opts[] = {{"decode", required_argument, 0, 'd'},
					     {"match", required_argument, 0, 'm'},
					     {"threads", required_argument, 0, 't'},
					     {"bs", required_argument, 0, 'b'},
					     {"direct", no_argument, 0, 'D'},
					     {"limit", required_argument, 0, 'l'},
					     {"passes", required_argument, 0, 'P'},
					     {"label", required_argument, 0, 'L'},
					     {"seconds", required_argument, 0, 'S'},
					     {"tile", required_argument, 0, 'T'},
					     {"fit", required_argument, 0, 'F'},
					     {"help", no_argument, 0, 'h'},
					     {0, 0, 0, 0}};
	pthread_mutex_init(&ctx.err_lock, NULL);
	ctx.fit = SPRITE_FIT_CROP; /* spritefs-pack's default */
	ctx.passes = 1;
	int o;
	while ((o = getopt_long(argc, argv, "d:m:t:b:Dl:L:P:S:T:F:h", opts, NULL)) != -1) {
		switch (o) {
		case 'd':
			if (!strcmp(optarg, "none") || !strcmp(optarg, "raw"))
				ctx.decode = RB_RAW;
			else if (!strcmp(optarg, "image"))
				ctx.decode = RB_IMAGE;
			else if (!strcmp(optarg, "batch"))
				ctx.decode = RB_BATCH;
			else if (!strcmp(optarg, "npy"))
				ctx.decode = RB_NPY;
			else if (!strcmp(optarg, "store"))
				ctx.decode = RB_STORE;
			else if (!strcmp(optarg, "lz4"))
				ctx.decode = RB_LZ4;
			else if (!strcmp(optarg, "copy"))
				ctx.decode = RB_COPY;
			else {
				fprintf(stderr, "spritefs-readbench: unknown --decode %s\n",
					optarg);
				return 2;
			}
			break;
		case 'm':
			ctx.match = optarg;
			break;
		case 'T':
			if (sprite_parse_tile(optarg, &ctx.th, &ctx.tw, &ctx.tc) < 0) {
				fprintf(stderr,
					"spritefs-readbench: bad --tile %s (HxW or HxWxC)\n",
					optarg);
				return 2;
			}
			break;
		case 'F':
			if (sprite_fit_parse(optarg, &ctx.fit) < 0) {
				fprintf(stderr,
					"spritefs-readbench: bad --fit %s (crop, pad or "
					"stretch)\n",
					optarg);
				return 2;
			}
			break;
		case 't':
			*threads = atoi(optarg);
			if (*threads < 1 || *threads > 256) {
				fprintf(stderr, "spritefs-readbench: --threads must be 1..256\n");
				return 2;
			}
			break;
		case 'b':
			if (sprite_parse_size(optarg, bs) < 0 || *bs < 4096 || *bs > (1ull << 30)) {
				fprintf(stderr, "spritefs-readbench: bad --bs %s (4K..1G)\n",
					optarg);
				return 2;
			}
			break;
		case 'D':
			ctx.direct = 1;
			break;
		case 'l':
			*limit = strtoull(optarg, NULL, 10);
			break;
		case 'P':
			ctx.passes = (uint32_t)atoi(optarg);
			if (ctx.passes < 1 || ctx.passes > 1000) {
				fprintf(stderr, "spritefs-readbench: --passes must be 1..1000\n");
				return 2;
			}
			break;
		case 'S': {
			char *end;
			ctx.seconds = strtod(optarg, &end);
			if (*end || !(ctx.seconds > 0 && ctx.seconds <= 3600)) {
				fprintf(stderr, "spritefs-readbench: --seconds must be 0..3600\n");
				return 2;
			}
			break;
		}
		case 'L':
			*label = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	return -1;
}

/*
 * The items to read from the paths argv[first..]: a store's sheets, a .npy's
 * row chunks, or a folder's files in sorted order. *bufcap grows to the
 * largest item. 0, or the exit code.
 */
static int rb_items(int argc, char **argv, int first, uint64_t limit, int sheets_first,
		    size_t *bufcap)
{
	char err[SPRITE_ERR_MAX + 512];
	int npaths = argc - first;
	if (ctx.decode == RB_STORE || ctx.decode == RB_NPY || sheets_first) {
		ctx.srcs = calloc((size_t)npaths, sizeof(*ctx.srcs));
		if (!ctx.srcs)
			return 1;
	}
	for (int a = first; a < argc; a++) {
		const char *p = argv[a];
		if (ctx.decode == RB_STORE || sheets_first) {
			struct rb_src *s = &ctx.srcs[ctx.nsrcs];
			s->path = argv[a];
			int r = sprite_store_open(p, &s->store, err);
			if (r < 0) {
				fprintf(stderr, "spritefs-readbench: %s: %s\n", p,
					err[0] ? err : strerror(-r));
				return 1;
			}
			const struct sprite_store_info *in = sprite_store_info(s->store);
			for (uint32_t i = 0; i < in->nsheets; i++) {
				if (limit && ctx.nitems >= limit)
					break;
				if (in->sheets[i].raw_size > *bufcap)
					*bufcap = in->sheets[i].raw_size;
				if (rb_add_item(NULL, i, 0, ctx.nsrcs) < 0)
					return 1;
				if (sheets_first &&
				    rb_load_stored(s, &ctx.items[ctx.nitems - 1]) < 0)
					return 1;
				if (ctx.decode == RB_COPY &&
				    rb_load_decoded(s, &ctx.items[ctx.nitems - 1]) < 0)
					return 1;
			}
			ctx.nsrcs++;
			continue;
		}
		if (ctx.decode == RB_NPY) {
			struct rb_src *s = &ctx.srcs[ctx.nsrcs];
			s->path = argv[a];
			s->fd = open(p, O_RDONLY | O_CLOEXEC);
			if (s->fd < 0) {
				fprintf(stderr, "spritefs-readbench: %s: %s\n", p, strerror(errno));
				return 1;
			}
			if (rb_npy_open(s, err, sizeof(err)) < 0) {
				fprintf(stderr, "spritefs-readbench: %s\n", err);
				return 1;
			}
			/* chunks of about bs bytes, whole rows */
			uint64_t per = ctx.bs / s->row_bytes ? ctx.bs / s->row_bytes : 1;
			if (per * s->row_bytes > *bufcap)
				*bufcap = per * s->row_bytes;
			uint64_t rows = s->rows;
			if (limit && rows > limit)
				rows = limit;
			for (uint64_t r0 = 0; r0 < rows; r0 += per) {
				uint64_t k = rows - r0 < per ? rows - r0 : per;
				if (rb_add_item(NULL, (uint32_t)r0, (uint32_t)k, ctx.nsrcs) < 0)
					return 1;
			}
			ctx.nsrcs++;
			continue;
		}
		struct stat st;
		if (stat(p, &st) < 0) {
			fprintf(stderr, "spritefs-readbench: %s: %s\n", p, strerror(errno));
			return 1;
		}
		size_t before = ctx.nitems;
		if (S_ISDIR(st.st_mode)) {
			if (nftw(p, rb_walk_cb, 64, FTW_PHYS) != 0) {
				fprintf(stderr, "spritefs-readbench: cannot walk %s\n", p);
				return 1;
			}
		} else if (rb_add_item(p, 0, 0, -1) < 0) {
			return 1;
		}
		sprite_sort(ctx.items + before, ctx.nitems - before, sizeof(*ctx.items),
			    rb_cmp_item);
	}
	return 0;
}

/* Read every item on threads workers: the wall time (their CPU time in *cpu), or < 0. */
static double rb_run(int threads, size_t bufcap, int sheets_first, double *cpu)
{
	struct rb_thread *th = calloc((size_t)threads, sizeof(*th));
	if (!th)
		return -1;
	for (int i = 0; i < threads; i++) {
		th[i].cap = bufcap;
		/* the floor's own (--decode lz4 / copy) buffers stay as they were */
		if (!sheets_first)
			th[i].buf = sprite_huge_alloc(&th[i].cap);
		else if (posix_memalign((void **)&th[i].buf, 4096, bufcap) != 0)
			th[i].buf = NULL;
		if (!th[i].buf) {
			fprintf(stderr, "spritefs-readbench: out of memory\n");
			return -1;
		}
		if (!sheets_first)
			continue;
		/* as many as memory gives, up to 64; each faulted in before the clock */
		size_t want = ctx.nitems < 64 ? ctx.nitems : 64;
		th[i].outs = calloc(want ? want : 1, sizeof(*th[i].outs));
		for (size_t k = 0; th[i].outs && k < want; k++) {
			void *out;
			if (posix_memalign(&out, 4096, bufcap) != 0)
				break;
			memset(out, 0, bufcap);
			th[i].outs[k] = out;
			th[i].nouts = k + 1;
		}
	}
	double t0 = sprite_now();
	ctx.deadline = t0 + ctx.seconds;
	for (int i = 0; i < threads; i++) {
		if (pthread_create(&th[i].tid, NULL, rb_worker, &th[i]) != 0) {
			fprintf(stderr, "spritefs-readbench: cannot start threads\n");
			return -1;
		}
	}
	*cpu = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(th[i].tid, NULL);
		ctx.files += th[i].files;
		ctx.bytes += th[i].bytes;
		ctx.samples += th[i].samples;
		ctx.sum += th[i].sum;
		*cpu += th[i].cpu;
		free(th[i].buf);
		for (size_t k = 0; k < th[i].nouts; k++)
			free(th[i].outs[k]);
		free(th[i].outs);
	}
	double wall = sprite_now() - t0;
	free(th);
	return wall;
}

/* What rb_items opened and read: items' paths and bytes, the stores and npy files. */
static void rb_free(void)
{
	for (size_t i = 0; i < ctx.nitems; i++) {
		free(ctx.items[i].path);
		free(ctx.items[i].stored);
	}
	free(ctx.items);
	for (int k = 0; k < ctx.nsrcs; k++) {
		if (ctx.srcs[k].store)
			sprite_store_close(ctx.srcs[k].store);
		else
			close(ctx.srcs[k].fd);
	}
	free(ctx.srcs);
}

static int rb_main(int argc, char **argv)
{
	int threads = 1;
	uint64_t limit = 0, bs = 1 << 20;
	const char *label = "";
	int r = rb_parse(argc, argv, &threads, &limit, &bs, &label);
	if (r >= 0)
		return r;
	ctx.bs = (size_t)((bs + 4095) & ~4095ull);
	size_t bufcap = ctx.bs;
	int sheets_first = ctx.decode == RB_LZ4 || ctx.decode == RB_COPY;
	r = rb_items(argc, argv, optind, limit, sheets_first, &bufcap);
	if (r)
		return r;
	for (; limit && ctx.nitems > limit; ctx.nitems--) {
		free(ctx.items[ctx.nitems - 1].path);
		free(ctx.items[ctx.nitems - 1].stored);
	}
	if (ctx.nitems == 0) {
		fprintf(stderr, "spritefs-readbench: nothing to read%s%s\n",
			ctx.match ? " matching " : "", ctx.match ? ctx.match : "");
		return 1;
	}

	double cpu;
	double wall = rb_run(threads, bufcap, sheets_first, &cpu);
	if (wall < 0)
		return 1;
	if (wall <= 0)
		wall = 1e-9;
	static const char *names[] = {"none", "image", "batch", "npy", "store", "lz4", "copy"};
	printf("{\"label\":\"%s\",\"decode\":\"%s\",\"threads\":%d,\"passes\":%u,\"direct\":%s,"
	       "\"files\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"samples\":%" PRIu64
	       ",\"wall_s\":%.6f,\"cpu_s\":%.6f,\"mb_s\":%.3f,\"files_s\":%.1f,\"samples_s\":%.1f,"
	       "\"shape\":[%u,%u,%u],\"sample_sum\":\"%016" PRIx64 "\",\"errors\":%" PRIu64 "}\n",
	       label, names[ctx.decode], threads, ctx.passes, ctx.direct ? "true" : "false",
	       ctx.files, ctx.bytes, ctx.samples, wall, cpu, (double)ctx.bytes / 1e6 / wall,
	       (double)ctx.files / wall, (double)ctx.samples / wall, ctx.shape[0], ctx.shape[1],
	       ctx.shape[2], ctx.sum, ctx.errors);
	if (ctx.errors) {
		fprintf(stderr, "spritefs-readbench: %" PRIu64 " errors; first: %s\n", ctx.errors,
			ctx.first_err);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int r = rb_main(argc, argv);
	rb_free();
	return r;
}
