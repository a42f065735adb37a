/*
 * read.c - the bytes of spritefs's files, assembled from decoded sheets.
 *
 * A read is assembled from pinned, decoded sheets (cache.c). Where the bytes
 * of a reply are contiguous in a sheet (batch files, images.npy, by-class
 * images, and each tile of a page or more in an epoch view) the reply points
 * into the sheet (iovecs, no copy); where they are gathered in smaller
 * pieces (the tiles of small-tile epoch views, sheet images' rows) they are
 * copied into one per-thread buffer. A sheet that cannot be decoded turns every read that
 * needs it into EIO and no other.
 *
 * What to load ahead of a reader is decided in one place, sfs_readahead(),
 * by the kind of file it reads: batch files and images.npy ahead in store
 * order (on into the next split), by-class images within their split, epoch
 * views by the epoch's sample order, the label table's pass a few sheets at
 * a time.
 *
 * The label table of a split (labels.npy and by-class/ need it) is built
 * here too, on first need: from the store's label table (version 3), else
 * by decoding every sheet of the split. Which file
 * a name or an inode stands for, and how large it is, is tree.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/batch.h"
#include "common/image.h"
#include "fs/sfs.h"

/* ---- readahead --------------------------------------------------------- */

/*
 * The sheets that an epoch view's samples from position from of its order
 * on need, each once and only those not already present: the next two
 * batches' worth, and twice as many samples as o.prefetch + 1 sheets hold,
 * up to o.prefetch + 64 sheets (256 at most).
 */
static void epoch_ahead(struct sfs *fs, const struct sfs_split *sp, const uint32_t *perm,
			uint64_t from)
{
	uint32_t list[256];
	uint32_t k = 0, want = fs->o.prefetch + 64;
	if (want > 256)
		want = 256;
	uint64_t limit = from + (uint64_t)fs->o.batch * 2 +
			 (uint64_t)fs->info->sheet_tiles * (fs->o.prefetch + 1) * 2;
	if (limit > sp->count)
		limit = sp->count;
	for (uint64_t s = from; s < limit && k < want; s++) {
		uint32_t sheet, slot;
		if (sprite_store_locate(fs->store, sp->index, perm[s], &sheet, &slot) < 0)
			continue;
		if (sfs_sheet_present(fs, sheet))
			continue;
		int dup = 0;
		for (uint32_t q = 0; q < k && !dup; q++)
			dup = list[q] == sheet;
		if (!dup)
			list[k++] = sheet;
	}
	sfs_sheet_prefetch(fs, list, k, 0);
}

void sfs_readahead(struct sfs *fs, const struct sfs_reader *r)
{
	const struct sfs_split *sp = r->sp;
	const uint32_t split_end = sp->first_sheet + sp->nsheets;
	const uint32_t store_end = fs->info->nsheets;
	switch (r->kind) {
	case SFS_K_BATCH:
		/*
		 * Ahead in store order, on past the split's last sheet into the next
		 * split's (a pass over train/batches then test/batches, or a training
		 * epoch then its evaluation, reads the store front to back): the first
		 * reads of the next split then come from memory instead of the disk.
		 * Pushed to the kernel unless the reader has no page cache.
		 */
		sfs_sheet_prefetch_run(fs, r->sheet, fs->o.prefetch + 1, sp->first_sheet, store_end,
				       !r->direct);
		break;
	case SFS_K_IMAGES_NPY: {
		/*
		 * Every sheet of the request at once, then the next ones; on into
		 * the next split, as batch files.
		 */
		uint32_t nspan = (uint32_t)(r->len / (fs->tile_bytes * fs->info->sheet_tiles)) + 2;
		sfs_sheet_prefetch_run(fs, r->sheet, nspan + fs->o.prefetch, sp->first_sheet,
				       store_end, 0);
		break;
	}
	case SFS_K_CLASS_IMG:
		sfs_sheet_prefetch_run(fs, r->sheet, fs->o.prefetch + 1, sp->first_sheet, split_end,
				       0);
		break;
	case SFS_K_LABELS_NPY:
		/* the label table's pass over the split: every 4th sheet, the next ones */
		if ((r->sheet - sp->first_sheet) % 4 == 0)
			sfs_sheet_prefetch_run(fs, r->sheet + 1, fs->o.prefetch, sp->first_sheet,
					       split_end, 0);
		break;
	case SFS_K_EPOCH_BATCH:
		/*
		 * The order's plan, when there was memory for it: the cache follows
		 * the reader and loads in order of first use (cache.c). Else once
		 * per batch file, when its first bytes are read.
		 */
		if (sfs_epoch_plan(r->handle))
			sfs_cache_stream(fs, r->handle, r->n, 0, 0);
		else if (r->off == 0)
			epoch_ahead(fs, sp, r->perm, (uint64_t)r->n * fs->o.batch);
		break;
	}
}

/* ---- label table -------------------------------------------------------- */

int sfs_labels_ensure(struct sfs *fs, struct sfs_split *sp)
{
	const struct sprite_store_info *in = fs->info;
	int r = 0;
	pthread_mutex_lock(&sp->lab_lock);
	if (sp->lab_state) {
		pthread_mutex_unlock(&sp->lab_lock);
		return 0;
	}
	/* The store's label table, checked at open: no sheet to read or decode. */
	const uint16_t *table = sprite_store_labels(fs->store, sp->index);
	uint16_t *labels = table ? NULL : malloc((sp->count ? sp->count : 1) * sizeof(uint16_t));
	uint8_t *bad = calloc(sp->nsheets ? sp->nsheets : 1, 1);
	uint64_t *start = calloc((size_t)in->nclasses + 1, sizeof(uint64_t));
	uint32_t *samples = malloc((sp->count ? sp->count : 1) * sizeof(uint32_t));
	if ((!table && !labels) || !bad || !start || !samples) {
		r = -ENOMEM;
		goto fail;
	}
	if (table)
		goto group;
	for (uint32_t k = 0; k < sp->nsheets; k++) {
		uint32_t i = sp->first_sheet + k;
		const struct sprite_sheet_entry *e = &in->sheets[i];
		const uint8_t *raw;
		struct sprite_batch_header h;
		struct sfs_reader ra = {.kind = SFS_K_LABELS_NPY, .sp = sp, .sheet = i};
		sfs_readahead(fs, &ra);
		int64_t n = sfs_sheet_get(fs, i, &raw);
		if (n < 0) {
			bad[k] = 1;
			for (uint32_t s = 0; s < e->count; s++)
				labels[e->first + s] = UINT16_MAX;
			continue;
		}
		sprite_batch_layout(e->count, in->tile_h, in->tile_w, in->tile_c, &h);
		for (uint32_t s = 0; s < e->count; s++) {
			uint16_t l;
			memcpy(&l, raw + h.labels_offset + 2 * (size_t)s, 2);
			if (l >= in->nclasses) {
				if (!bad[k])
					sfs_log("spritefs: %s: sheet %u: label %u out of range; "
						"its "
						"samples are left out of by-class and labels.npy",
						fs->store_path, i, l);
				bad[k] = 1;
			}
			labels[e->first + s] = l;
		}
		sfs_sheet_put(fs, i);
		if (bad[k])
			for (uint32_t s = 0; s < e->count; s++)
				labels[e->first + s] = UINT16_MAX;
	}
	table = labels;
group:
	for (uint64_t s = 0; s < sp->count; s++)
		if (table[s] != UINT16_MAX)
			start[table[s] + 1]++;
	for (uint32_t c = 0; c < in->nclasses; c++)
		start[c + 1] += start[c];
	{
		uint64_t *fill = calloc(in->nclasses ? in->nclasses : 1, sizeof(uint64_t));
		if (!fill) {
			r = -ENOMEM;
			goto fail;
		}
		for (uint64_t s = 0; s < sp->count; s++)
			if (table[s] != UINT16_MAX)
				samples[start[table[s]] + fill[table[s]]++] = (uint32_t)s;
		free(fill);
	}
	sp->labels = table;
	sp->labels_owned = labels;
	sp->sheet_bad = bad;
	sp->class_start = start;
	sp->class_samples = samples;
	sp->lab_state = 1;
	pthread_mutex_unlock(&sp->lab_lock);
	return 0;
fail:
	free(labels);
	free(bad);
	free(start);
	free(samples);
	pthread_mutex_unlock(&sp->lab_lock);
	return r;
}

/* ---- reply assembly ---------------------------------------------------------- */

static pthread_key_t rb_key;
static pthread_once_t rb_once = PTHREAD_ONCE_INIT;

static void rb_free(void *p)
{
	struct sfs_rbuf *rb = p;
	if (!rb)
		return;
	SFS_SUB(rb->fs, scratch_bytes, rb->out_cap + rb->gen_cap);
	free(rb->out);
	free(rb->gen);
	free(rb);
}

static void rb_key_init(void)
{
	pthread_key_create(&rb_key, rb_free);
}

struct sfs_rbuf *sfs_rbuf_get(struct sfs *fs, size_t size)
{
	pthread_once(&rb_once, rb_key_init);
	struct sfs_rbuf *rb = pthread_getspecific(rb_key);
	if (!rb) {
		rb = calloc(1, sizeof(*rb));
		if (!rb)
			return NULL;
		rb->fs = fs;
		pthread_setspecific(rb_key, rb);
	}
	size_t need = size + 4096;
	if (rb->out_cap < need) {
		size_t cap = need < SFS_MAX_READ + 4096 ? SFS_MAX_READ + 4096 : need;
		uint8_t *o = malloc(cap), *g = malloc(cap);
		if (!o || !g) {
			free(o);
			free(g);
			return NULL;
		}
		SFS_ADD(fs, scratch_bytes, 2 * cap);
		SFS_SUB(fs, scratch_bytes, rb->out_cap + rb->gen_cap);
		free(rb->out);
		free(rb->gen);
		rb->out = o;
		rb->gen = g;
		rb->out_cap = rb->gen_cap = cap;
	}
	rb->niov = rb->npins = rb->flat = 0;
	rb->gen_used = rb->total = 0;
	return rb;
}

void sfs_rbuf_release(struct sfs *fs, struct sfs_rbuf *rb)
{
	for (int k = 0; k < rb->npins; k++)
		sfs_sheet_put(fs, rb->pins[k]);
	rb->npins = 0;
}

static void rb_flatten(struct sfs *fs, struct sfs_rbuf *rb)
{
	size_t at = 0;
	for (int k = 0; k < rb->niov; k++) {
		memcpy(rb->out + at, rb->iov[k].iov_base, rb->iov[k].iov_len);
		at += rb->iov[k].iov_len;
	}
	rb->niov = 0;
	rb->flat = 1;
	sfs_rbuf_release(fs, rb);
}

static void rb_add(struct sfs *fs, struct sfs_rbuf *rb, const void *p, size_t len)
{
	if (!len)
		return;
	if (!rb->flat && rb->niov &&
	    (const uint8_t *)rb->iov[rb->niov - 1].iov_base + rb->iov[rb->niov - 1].iov_len ==
		    (const uint8_t *)p) {
		rb->iov[rb->niov - 1].iov_len += len;
	} else {
		if (!rb->flat && rb->niov == SFS_RB_IOV)
			rb_flatten(fs, rb);
		if (rb->flat)
			memcpy(rb->out + rb->total, p, len);
		else
			rb->iov[rb->niov++] = (struct iovec){.iov_base = (void *)p, .iov_len = len};
	}
	rb->total += len;
}

/* Room for len generated bytes that will be part of the reply. */
static uint8_t *rb_gen(struct sfs_rbuf *rb, size_t len)
{
	if (rb->gen_used + len > rb->gen_cap)
		return NULL;
	uint8_t *p = rb->gen + rb->gen_used;
	rb->gen_used += len;
	return p;
}

/*
 * Where the next len bytes a read writes itself go: the flat buffer at the
 * reply's end, or (a reply of iovecs) generated room that rb_commit then
 * adds. NULL when the generated room is spent.
 */
static uint8_t *rb_room(struct sfs_rbuf *rb, size_t len)
{
	return rb->flat ? rb->out + rb->total : rb_gen(rb, len);
}

static void rb_commit(struct sfs *fs, struct sfs_rbuf *rb, const uint8_t *p, size_t len)
{
	if (rb->flat)
		rb->total += len;
	else
		rb_add(fs, rb, p, len);
}

/* Add bytes [off, off+len) of decoded sheet i. */
static int rb_add_sheet(struct sfs *fs, struct sfs_rbuf *rb, uint32_t i, uint64_t off, size_t len)
{
	const uint8_t *raw;
	int64_t n = sfs_sheet_get(fs, i, &raw);
	if (n < 0)
		return (int)n;
	if (off > (uint64_t)n || len > (uint64_t)n - off) {
		sfs_sheet_put(fs, i);
		return -EIO;
	}
	if (!rb->flat && rb->npins == SFS_RB_PINS)
		rb_flatten(fs, rb);
	rb_add(fs, rb, raw + off, len);
	if (rb->flat)
		sfs_sheet_put(fs, i);
	else
		rb->pins[rb->npins++] = i;
	return 0;
}

/* Add the part of mem[0..mlen), placed at file offset base, that falls in [*pos, end). */
static void add_span(struct sfs *fs, struct sfs_rbuf *rb, const void *mem, uint64_t base,
		     uint64_t mlen, uint64_t *pos, uint64_t end)
{
	if (*pos >= end || *pos < base || *pos >= base + mlen)
		return;
	uint64_t take = base + mlen - *pos;
	if (take > end - *pos)
		take = end - *pos;
	rb_add(fs, rb, (const uint8_t *)mem + (*pos - base), take);
	*pos += take;
}

static int locate(struct sfs *fs, uint32_t split, uint64_t sample, uint32_t *sheet, uint32_t *slot)
{
	int r = sprite_store_locate(fs->store, split, sample, sheet, slot);
	if (r < 0)
		return -EIO;
	const struct sprite_sheet_entry *e = &fs->info->sheets[*sheet];
	if (*sheet >= fs->info->nsheets || e->split != split || sample < e->first ||
	    sample - e->first != *slot || *slot >= e->count)
		return -EIO;
	return 0;
}

static uint32_t tiles_offset(struct sfs *fs, uint32_t count)
{
	struct sprite_batch_header h;
	sprite_batch_layout(count, fs->info->tile_h, fs->info->tile_w, fs->info->tile_c, &h);
	return h.tiles_offset;
}

static int read_images_npy(struct sfs *fs, struct sfs_split *sp, uint64_t pos, uint64_t end,
			   struct sfs_rbuf *rb)
{
	const uint64_t hl = sp->npy_images_len, tb = fs->tile_bytes;
	add_span(fs, rb, sp->npy_images, 0, hl, &pos, end);
	if (pos >= end)
		return 0;
	uint32_t sheet, slot, last = UINT32_MAX;
	int r = locate(fs, sp->index, (pos - hl) / tb, &sheet, &slot);
	if (r < 0)
		return r;
	struct sfs_reader ra = {
		.kind = SFS_K_IMAGES_NPY, .sp = sp, .sheet = sheet, .off = pos, .len = end - pos};
	sfs_readahead(fs, &ra);
	while (pos < end) {
		uint64_t d = pos - hl, s = d / tb;
		r = locate(fs, sp->index, s, &sheet, &slot);
		if (r < 0)
			return r;
		const struct sprite_sheet_entry *e = &fs->info->sheets[sheet];
		uint64_t run_start = e->first * tb, run_end = (e->first + e->count) * tb;
		uint64_t take = run_end - d;
		if (take > end - pos)
			take = end - pos;
		r = rb_add_sheet(fs, rb, sheet, tiles_offset(fs, e->count) + (d - run_start),
				 (size_t)take);
		if (r < 0)
			return r;
		pos += take;
		last = sheet;
	}
	(void)last;
	return 0;
}

static int read_labels_npy(struct sfs *fs, struct sfs_split *sp, uint64_t pos, uint64_t end,
			   struct sfs_rbuf *rb)
{
	const uint64_t hl = sp->npy_labels_len, lb = fs->label_bytes;
	add_span(fs, rb, sp->npy_labels, 0, hl, &pos, end);
	if (pos >= end)
		return 0;
	int r = sfs_labels_ensure(fs, sp);
	if (r < 0)
		return r;
	uint8_t *out = rb_gen(rb, (size_t)(end - pos));
	if (!out)
		return -ENOMEM;
	for (uint64_t p = pos; p < end; p++) {
		uint64_t s = (p - hl) / lb;
		uint16_t l = sp->labels[s];
		if (l == UINT16_MAX)
			return -EIO; /* its sheet failed: never guess a label */
		out[p - pos] = (uint8_t)(lb == 1 ? l : ((p - hl) % 2 ? l >> 8 : l & 0xff));
	}
	rb_add(fs, rb, out, (size_t)(end - pos));
	return 0;
}

/* The split's paths from the store's path table, one a line: its NULs as newlines. */
static int read_paths_txt(struct sfs *fs, struct sfs_split *sp, uint64_t pos, uint64_t end,
			  struct sfs_rbuf *rb)
{
	const char *str;
	char err[SPRITE_ERR_MAX] = "";
	int64_t n = sprite_store_load_paths(fs->store, err);
	if (n == 0)
		n = sprite_store_split_paths(fs->store, sp->index, &str);
	if (n < 0) {
		if (!__atomic_exchange_n(&fs->paths_bad_logged, 1, __ATOMIC_RELAXED))
			sfs_log("spritefs: %s: %s; paths.txt gives EIO", fs->store_path, err);
		return -EIO;
	}
	if ((uint64_t)n < end)
		end = (uint64_t)n;
	if (pos >= end)
		return 0;
	uint8_t *out = rb_gen(rb, (size_t)(end - pos));
	if (!out)
		return -ENOMEM;
	for (uint64_t p = pos; p < end; p++)
		out[p - pos] = str[p] ? (uint8_t)str[p] : '\n';
	rb_add(fs, rb, out, (size_t)(end - pos));
	return 0;
}

/*
 * .spritefs/skipped.txt: the store's skipped list, read and checked whole on
 * the first read (at most SPRITE_SKIPPED_MAX bytes, held until unmount); the
 * first reader to finish publishes it.
 */
static int read_skipped_txt(struct sfs *fs, uint64_t pos, uint64_t end, struct sfs_rbuf *rb)
{
	char *t = __atomic_load_n(&fs->skipped_txt, __ATOMIC_ACQUIRE);
	if (!t) {
		char err[SPRITE_ERR_MAX] = "", *mine;
		size_t len;
		int r = sprite_store_read_skipped(fs->store, &mine, &len, err);
		if (r == -ENOMEM)
			return r;
		if (r < 0) {
			if (!__atomic_exchange_n(&fs->skipped_bad, 1, __ATOMIC_RELAXED))
				sfs_log("spritefs: %s: %s; .spritefs/skipped.txt gives EIO",
					fs->store_path, err);
			return -EIO;
		}
		char *none = NULL;
		if (__atomic_compare_exchange_n(&fs->skipped_txt, &none, mine, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			t = mine;
		} else {
			free(mine);
			t = none;
		}
	}
	add_span(fs, rb, t, 0, sprite_store_skipped_size(fs->store), &pos, end);
	return 0;
}

static int read_batch(struct sfs *fs, struct sfs_split *sp, uint32_t n, uint64_t pos, uint64_t end,
		      struct sfs_rbuf *rb)
{
	uint32_t sheet = sp->first_sheet + n;
	struct sfs_reader ra = {.kind = SFS_K_BATCH,
				.sp = sp,
				.sheet = sheet,
				.off = pos,
				.len = end - pos,
				.direct = rb->direct};
	sfs_readahead(fs, &ra);
	return rb_add_sheet(fs, rb, sheet, pos, (size_t)(end - pos));
}

static int read_class_img(struct sfs *fs, struct sfs_split *sp, uint32_t n, uint64_t pos,
			  uint64_t end, struct sfs_rbuf *rb)
{
	const struct sprite_store_info *in = fs->info;
	char hdr[SPRITE_PNM_HEADER_MAX];
	uint32_t sheet, slot;
	int hl = sprite_pnm_header(hdr, sizeof(hdr), in->tile_h, in->tile_w, in->tile_c);
	if (pos < (uint64_t)hl) {
		uint8_t *g = rb_gen(rb, (size_t)hl);
		if (!g)
			return -ENOMEM;
		memcpy(g, hdr, (size_t)hl);
		add_span(fs, rb, g, 0, (uint64_t)hl, &pos, end);
	}
	if (pos >= end)
		return 0;
	int r = locate(fs, sp->index, n, &sheet, &slot);
	if (r < 0)
		return r;
	const struct sprite_sheet_entry *e = &in->sheets[sheet];
	struct sfs_reader ra = {
		.kind = SFS_K_CLASS_IMG, .sp = sp, .sheet = sheet, .off = pos, .len = end - pos};
	sfs_readahead(fs, &ra);
	return rb_add_sheet(fs, rb, sheet,
			    tiles_offset(fs, e->count) + (uint64_t)slot * fs->tile_bytes +
				    (pos - (uint64_t)hl),
			    (size_t)(end - pos));
}

static int read_sheet_img(struct sfs *fs, struct sfs_split *sp, uint32_t n, uint64_t pos,
			  uint64_t end, struct sfs_rbuf *rb)
{
	const struct sprite_store_info *in = fs->info;
	uint32_t sheet = sp->first_sheet + n, rows, cols;
	const struct sprite_sheet_entry *e = &in->sheets[sheet];
	char hdr[SPRITE_PNM_HEADER_MAX];
	sfs_sheet_grid(fs, e->count, &rows, &cols);
	int hl = sprite_pnm_header(hdr, sizeof(hdr), rows * in->tile_h, cols * in->tile_w,
				   in->tile_c);
	rb->flat = 1;
	if (pos < (uint64_t)hl)
		add_span(fs, rb, hdr, 0, (uint64_t)hl, &pos, end);
	if (pos >= end)
		return 0;
	const uint8_t *raw;
	int64_t got = sfs_sheet_get(fs, sheet, &raw);
	if (got < 0)
		return (int)got;
	const uint64_t tb = fs->tile_bytes, trow = (uint64_t)in->tile_w * in->tile_c;
	const uint64_t rowbytes = cols * trow;
	const uint8_t *tiles = raw + tiles_offset(fs, e->count);
	while (pos < end) {
		uint64_t d = pos - (uint64_t)hl;
		uint64_t y = d / rowbytes, xb = d % rowbytes;
		uint64_t col = xb / trow, within = xb % trow;
		uint64_t idx = (y / in->tile_h) * cols + col, ty = y % in->tile_h;
		uint64_t take = trow - within;
		if (take > end - pos)
			take = end - pos;
		uint8_t *dst = rb->out + rb->total;
		if (idx < e->count)
			memcpy(dst, tiles + idx * tb + ty * trow + within, take);
		else
			memset(dst, 0, take);
		rb->total += take;
		pos += take;
	}
	sfs_sheet_put(fs, sheet);
	return 0;
}

/* Pin-one memo for gathers: consecutive samples often share a sheet. */
struct memo {
	uint32_t sheet;
	const uint8_t *raw;
	uint32_t labels_off, tiles_off;
};

static int memo_sample(struct sfs *fs, struct memo *m, uint32_t split, uint64_t sample,
		       uint32_t *slot)
{
	uint32_t sheet;
	int r = locate(fs, split, sample, &sheet, slot);
	if (r < 0)
		return r;
	if (m->raw && m->sheet == sheet)
		return 0;
	if (m->raw)
		sfs_sheet_put(fs, m->sheet);
	m->raw = NULL;
	int64_t n = sfs_sheet_get(fs, sheet, &m->raw);
	if (n < 0) {
		m->raw = NULL;
		return (int)n;
	}
	m->sheet = sheet;
	const struct sprite_sheet_entry *e = &fs->info->sheets[sheet];
	struct sprite_batch_header h;
	sprite_batch_layout(e->count, fs->info->tile_h, fs->info->tile_w, fs->info->tile_c, &h);
	m->labels_off = h.labels_offset;
	m->tiles_off = h.tiles_offset;
	return 0;
}

static int read_epoch_batch(struct sfs *fs, struct sfs_split *sp, uint32_t a, uint32_t n,
			    uint64_t pos, uint64_t end, struct sfs_rbuf *rb)
{
	const struct sprite_store_info *in = fs->info;
	const uint32_t *perm;
	void *handle;
	int r = sfs_epoch_get(fs, sfs_ep_slot(a), sfs_ep_epoch(a), sp->index, &perm, &handle);
	if (r < 0)
		return r;
	uint32_t cnt = (uint32_t)sfs_epoch_batch_count(fs, sp, n);
	const uint32_t *ids = perm + (uint64_t)n * fs->o.batch;
	uint8_t hb[SPRITE_BATCH_HEADER_SIZE];
	struct sprite_batch_header h;
	sprite_batch_init(hb, cnt, in->tile_h, in->tile_w, in->tile_c, sp->index);
	memcpy(&h, hb, sizeof(h));
	struct sfs_reader ra = {.kind = SFS_K_EPOCH_BATCH,
				.sp = sp,
				.off = pos,
				.perm = perm,
				.handle = handle,
				.n = n};
	sfs_readahead(fs, &ra);
	const uint64_t start = pos, fend = end;

	struct memo m = {.raw = NULL};
	const uint64_t tb = fs->tile_bytes;
	/*
	 * Tiles of a page or more go into the reply as iovecs pointing into their
	 * pinned sheets (no copy here: the kernel's copy to the reader is the
	 * only one); smaller ones, and the header, labels and ids, are copied
	 * or generated into the thread's buffers.
	 */
	const int zc = tb >= 4096 && !rb->flat;
	if (!zc)
		rb->flat = 1;
	while (pos < end && r == 0) {
		uint64_t take;
		uint8_t *dst;
		if (pos >= h.tiles_offset && pos < h.tiles_offset + tb * cnt) {
			uint64_t k = (pos - h.tiles_offset) / tb,
				 within = (pos - h.tiles_offset) % tb;
			uint32_t slot;
			r = memo_sample(fs, &m, sp->index, ids[k], &slot);
			if (r < 0)
				break;
			take = tb - within;
			if (take > end - pos)
				take = end - pos;
			uint64_t at = m.tiles_off + (uint64_t)slot * tb + within;
			if (zc && !rb->flat) {
				r = rb_add_sheet(fs, rb, m.sheet, at, (size_t)take);
				pos += take;
				continue;
			}
			memcpy(rb_room(rb, take), m.raw + at, take);
			rb->total += take;
			pos += take;
			continue;
		}
		if (pos < SPRITE_BATCH_HEADER_SIZE) {
			take = SPRITE_BATCH_HEADER_SIZE - pos;
			if (take > end - pos)
				take = end - pos;
			if (!(dst = rb_room(rb, take))) {
				r = -ENOMEM;
				break;
			}
			memcpy(dst, hb + pos, take);
		} else if (pos >= h.labels_offset && pos < h.labels_offset + 2ull * cnt) {
			uint64_t k = (pos - h.labels_offset) / 2,
				 byte = (pos - h.labels_offset) % 2;
			uint32_t slot;
			r = memo_sample(fs, &m, sp->index, ids[k], &slot);
			if (r < 0)
				break;
			take = 1;
			if (!(dst = rb_room(rb, take))) {
				r = -ENOMEM;
				break;
			}
			*dst = m.raw[m.labels_off + 2 * (size_t)slot + byte];
		} else if (pos >= h.ids_offset && pos < h.ids_offset + 4ull * cnt) {
			uint64_t k = (pos - h.ids_offset) / 4, byte = (pos - h.ids_offset) % 4;
			uint32_t id = ids[k];
			uint8_t le[4] = {(uint8_t)id, (uint8_t)(id >> 8), (uint8_t)(id >> 16),
					 (uint8_t)(id >> 24)};
			take = 4 - byte;
			if (take > end - pos)
				take = end - pos;
			if (!(dst = rb_room(rb, take))) {
				r = -ENOMEM;
				break;
			}
			memcpy(dst, le + byte, take);
		} else {
			/* padding between sections */
			uint64_t next = h.total_size;
			if (pos < h.labels_offset)
				next = h.labels_offset;
			else if (pos < h.ids_offset)
				next = h.ids_offset;
			else if (pos < h.tiles_offset)
				next = h.tiles_offset;
			take = next - pos;
			if (take > end - pos)
				take = end - pos;
			if (!(dst = rb_room(rb, take))) {
				r = -ENOMEM;
				break;
			}
			memset(dst, 0, take);
		}
		rb_commit(fs, rb, dst, take);
		pos += take;
	}
	if (m.raw)
		sfs_sheet_put(fs, m.sheet);
	/*
	 * Count what was served: the view is done once all its bytes have been,
	 * whichever request comes last. One large read (O_DIRECT, async) is
	 * split by the kernel into requests served in parallel, and the one
	 * carrying the last byte may well be served first.
	 */
	if (r == 0 && sfs_epoch_plan(handle))
		sfs_cache_stream(fs, handle, n, fend - start, h.total_size);
	sfs_epoch_put(fs, handle);
	return r;
}

int sfs_read_file(struct sfs *fs, uint64_t ino, uint64_t off, size_t size, struct sfs_rbuf *rb)
{
	struct sfs_attr a;
	int r = sfs_tree_attr(fs, ino, &a);
	if (r < 0)
		return r;
	if (a.dir)
		return -EISDIR;
	if (off >= a.size || !size)
		return 0;
	uint64_t end = a.size - off < size ? a.size : off + size;
	unsigned kind = sfs_ino_kind(ino);
	struct sfs_split *sp = &fs->splits[sfs_ino_split(ino)];
	uint32_t x = sfs_ino_a(ino), n = sfs_ino_n(ino);
	uint64_t pos = off;
	switch (kind) {
	case SFS_K_DATASET_JSON:
		add_span(fs, rb, fs->dataset_json, 0, fs->dataset_json_len, &pos, end);
		return 0;
	case SFS_K_IMAGES_NPY:
		return read_images_npy(fs, sp, off, end, rb);
	case SFS_K_LABELS_NPY:
		return read_labels_npy(fs, sp, off, end, rb);
	case SFS_K_PATHS_TXT:
		return read_paths_txt(fs, sp, off, end, rb);
	case SFS_K_SKIPPED_TXT:
		return read_skipped_txt(fs, off, end, rb);
	case SFS_K_BATCH:
		return read_batch(fs, sp, n, off, end, rb);
	case SFS_K_EPOCH_BATCH:
		return read_epoch_batch(fs, sp, x, n, off, end, rb);
	case SFS_K_CLASS_IMG:
		return read_class_img(fs, sp, n, off, end, rb);
	case SFS_K_SHEET_IMG:
		return read_sheet_img(fs, sp, n, off, end, rb);
	}
	return -EINVAL;
}
