/*
 * store_write.c - write sprite stores (format.h, docs/FORMAT.md); store.c
 * reads them.
 *
 * Samples are gathered into one sheet buffer laid out as a batch
 * file, compressed with LZ4 (kept raw when that is not smaller) and written
 * 4 KiB-aligned and zero-padded to the next 4 KiB, so that O_DIRECT readers
 * can read whole aligned extents. The index, the names and finally the header
 * follow; everything goes to a new "<path>.tmp.<pid>" (safe_open.h: never
 * through a link), which is fsynced and renamed over path, then the
 * directory is fsynced. A crash leaves at worst a stray
 * temp file, never a half-written store under the final name.
 */
#include "common/store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lz4.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/batch.h"
#include "common/perm.h"
#include "common/safe_open.h"
#include "common/store_int.h"
#include "common/util.h"

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
	struct sprite_outfile out; /* the temporary, beside the store (safe_open.h) */
	int fd;			   /* out.fd while the store is written */
	int tmp_slot;		   /* in tmp_name[], or -1 */
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
	/* the skipped-file list: lines "PATH\tREASON\n", capped at SPRITE_SKIPPED_MAX */
	char *skip_str;
	uint64_t skip_len, skip_cap, skip_lines, skip_dropped;
};

static void writer_free(sprite_writer *w)
{
	tmp_unregister(w->tmp_slot);
	sprite_outfile_abort(&w->out); /* nothing once committed */
	free(w->names);
	free(w->sheet);
	free(w->packed);
	free(w->idx);
	free(w->labels);
	free(w->path_off);
	free(w->path_str);
	free(w->skip_str);
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
		return sprite_fail(err, -EINVAL, "tile shape %ux%ux%u out of range", p->tile_h,
				   p->tile_w, p->tile_c);
	if (t > SPRITE_MAX_SHEET_TILES)
		return sprite_fail(err, -EINVAL, "sheet of %u tiles exceeds %u", t,
				   SPRITE_MAX_SHEET_TILES);
	if ((uint32_t)p->fit > SPRITE_FIT_PAD)
		return sprite_fail(err, -EINVAL, "unknown fit mode %u", (unsigned)p->fit);
	uint64_t raw_max = sheet_raw_size(t, p->tile_h, p->tile_w, p->tile_c);
	if (raw_max > SPRITE_MAX_SHEET_RAW)
		return sprite_fail(err, -EINVAL, "a sheet of %u tiles of %ux%ux%u exceeds 1 GiB", t,
				   p->tile_h, p->tile_w, p->tile_c);
	if (p->nclasses == 0 || p->nclasses > SPRITE_MAX_CLASSES)
		return sprite_fail(err, -EINVAL, "class count %u out of range (1..%u)", p->nclasses,
				   SPRITE_MAX_CLASSES);
	if (p->codec != SPRITE_CODEC_RAW && p->codec != SPRITE_CODEC_LZ4)
		return sprite_fail(err, -EINVAL, "unknown codec %d", (int)p->codec);
	const char *name = p->name ? p->name : "";
	if (strlen(name) >= SPRITE_NAME_MAX)
		return sprite_fail(err, -EINVAL, "data set name longer than %u bytes",
				   SPRITE_NAME_MAX - 1);

	if (p->version > SPRITE_VERSION)
		return sprite_fail(err, -EINVAL, "version %u is newer than %u", p->version,
				   SPRITE_VERSION);

	sprite_writer *w = calloc(1, sizeof(*w));
	if (!w)
		return sprite_fail(err, -ENOMEM, "out of memory");
	w->fd = w->out.fd = w->out.dirfd = -1;
	w->tmp_slot = -1;

	/* Names block: given names, or the class numbers. */
	size_t cap = (size_t)p->nclasses * (CLASS_NAME_MAX + 1);
	w->names = malloc(cap);
	if (!w->names) {
		r = sprite_fail(err, -ENOMEM, "out of memory");
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
			r = sprite_fail(err, -EINVAL,
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
	w->h.background = p->background;
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
	if (!w->sheet || !w->packed) {
		r = sprite_fail(err, -ENOMEM, "out of memory for a sheet of %llu bytes",
				(unsigned long long)raw_max);
		goto bad;
	}
	/* Created new, never through a link, in a folder checked and held open (safe_open.h). */
	sigset_t fatal, old;
	sigemptyset(&fatal);
	for (size_t i = 0; i < NFATAL; i++)
		sigaddset(&fatal, fatal_signals[i]);
	/* a signal waits until the temporary is armed for the handler to remove */
	pthread_sigmask(SIG_BLOCK, &fatal, &old);
	r = sprite_outfile_open(&w->out, path, 0644, 0, err);
	if (r == 0)
		w->tmp_slot = tmp_register(w->out.tmp_path);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0)
		goto bad;
	w->fd = w->out.fd;
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
		/* raw unless lz4 saves SPRITE_LZ4_MIN_GAIN: a raw sheet costs no decode */
		if (n > 0 && (uint64_t)n * 100 <= raw_size * (100 - SPRITE_LZ4_MIN_GAIN)) {
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

static int write_padded(sprite_writer *w, const void *p, size_t len, uint64_t *off);

/* Append s to the skipped list with its control bytes as '?'. */
static void skip_put(sprite_writer *w, const char *s, size_t n)
{
	for (size_t k = 0; k < n; k++)
		w->skip_str[w->skip_len++] = (unsigned char)s[k] < 0x20 ? '?' : s[k];
}

int sprite_writer_add_skipped(sprite_writer *w, const char *path, const char *why)
{
	if (!path || !why)
		return -EINVAL;
	/* Neither part may be empty: a reader checks each line has both. */
	const char *p = path[0] ? path : "?", *y = why[0] ? why : "?";
	size_t pl = strlen(p), yl = strlen(y), need = pl + yl + 2;
	/* Room is kept for the line that says how many were left out. */
	if (w->skip_len + need > SPRITE_SKIPPED_MAX - 128) {
		w->skip_dropped++;
		return 0;
	}
	if (grow((void **)&w->skip_str, &w->skip_cap, w->skip_len + need, 1) < 0)
		return -ENOMEM;
	skip_put(w, p, pl);
	w->skip_str[w->skip_len++] = '\t';
	skip_put(w, y, yl);
	w->skip_str[w->skip_len++] = '\n';
	w->skip_lines++;
	return 0;
}

/* The skipped-file list after the other tables, when a file was skipped. */
static int write_skipped(sprite_writer *w, char *err)
{
	struct sprite_header *h = &w->h;
	if (h->version < 3 || (!w->skip_lines && !w->skip_dropped))
		return 0;
	if (w->skip_dropped) {
		char line[128];
		int n = snprintf(
			line, sizeof line,
			"...\t%llu more skipped files not listed (the list holds %u MiB)\n",
			(unsigned long long)w->skip_dropped, SPRITE_SKIPPED_MAX >> 20);
		if (grow((void **)&w->skip_str, &w->skip_cap, w->skip_len + (uint64_t)n, 1) < 0)
			return sprite_fail(err, -ENOMEM, "out of memory for the skipped list");
		memcpy(w->skip_str + w->skip_len, line, (size_t)n);
		w->skip_len += (uint64_t)n;
		w->skip_lines++;
	}
	h->skipped_size = w->skip_len;
	h->skipped_count = w->skip_lines;
	h->skipped_checksum = sprite_checksum(w->skip_str, (size_t)w->skip_len);
	int r = write_padded(w, w->skip_str, (size_t)w->skip_len, &h->skipped_offset);
	if (r < 0)
		return sprite_fail(err, r, "writing the skipped list: %s", strerror(-r));
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
		r = sprite_fail(err, -EINVAL, "no split was written");
		goto bad;
	}
	r = flush_sheet(w);
	if (r < 0) {
		r = sprite_fail(err, r, "writing the last sheet: %s", strerror(-r));
		goto bad;
	}
	h->index_size = (uint64_t)h->nsheets * sizeof(struct sprite_sheet_entry);
	h->index_checksum = sprite_checksum(w->idx, (size_t)h->index_size);
	r = write_padded(w, w->idx, (size_t)h->index_size, &h->index_offset);
	if (r < 0) {
		r = sprite_fail(err, r, "writing the index: %s", strerror(-r));
		goto bad;
	}
	h->names_size = w->names_size;
	h->names_checksum = sprite_checksum(w->names, w->names_size);
	r = write_padded(w, w->names, w->names_size, &h->names_offset);
	if (r < 0) {
		r = sprite_fail(err, r, "writing the class names: %s", strerror(-r));
		goto bad;
	}
	if (h->version >= 3) {
		h->labels_size = w->nsamples * 2;
		h->labels_checksum = sprite_checksum(w->labels, (size_t)h->labels_size);
		r = write_padded(w, w->labels, (size_t)h->labels_size, &h->labels_offset);
		if (r < 0) {
			r = sprite_fail(err, r, "writing the label table: %s", strerror(-r));
			goto bad;
		}
	}
	if (h->version >= 3 && w->path_off) {
		/* nsamples + 1 offsets, then the strings */
		size_t no = (size_t)(w->nsamples + 1) * 8;
		h->paths_size = no + w->path_len;
		uint8_t *t = malloc((size_t)h->paths_size);
		if (!t) {
			r = sprite_fail(err, -ENOMEM, "out of memory for the path table");
			goto bad;
		}
		memcpy(t, w->path_off, no);
		memcpy(t + no, w->path_str, (size_t)w->path_len);
		h->paths_checksum = sprite_checksum(t, (size_t)h->paths_size);
		r = write_padded(w, t, (size_t)h->paths_size, &h->paths_offset);
		free(t);
		if (r < 0) {
			r = sprite_fail(err, r, "writing the path table: %s", strerror(-r));
			goto bad;
		}
	}
	r = write_skipped(w, err);
	if (r < 0)
		goto bad;
	h->file_size = w->pos;
	h->header_checksum = 0;
	h->header_checksum = sprite_checksum(h, sizeof(*h));
	r = sprite_pwrite_full(w->fd, h, sizeof(*h), 0);
	if (r < 0) {
		r = sprite_fail(err, r, "writing the header: %s", strerror(-r));
		goto bad;
	}
	/* fsync, rename over the store's name, fsync the folder; the temporary goes on failure */
	w->fd = -1;
	r = sprite_outfile_commit(&w->out, err);
	if (r < 0)
		goto bad;
	/* (A signal from here on unlinks a temp name that no longer exists: harmless.) */
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
	writer_free(w); /* the temporary removed */
}
