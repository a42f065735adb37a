/*
 * tree.c - the virtual tree of a spritefs mount and the bytes of its files.
 *
 *   /dataset.json
 *   /.spritefs/stats.json
 *   /<split>/images.npy, labels.npy
 *   /<split>/batches/<n>.sprite                 sheet n of the split, as decoded
 *   /<split>/epochs/<seed>/<epoch>/<n>.sprite   batch n of that epoch's order
 *   /<split>/by-class/<class>/<i>.pgm|ppm|pam   sample i of the split
 *   /<split>/sheets/<n>.pgm|ppm|pam             sheet n as a grid of tiles
 *
 * Nothing is stored per file: an inode number encodes the kind of file and
 * its coordinates (sfs.h), sizes follow from the store's validated index,
 * and a read is assembled from pinned, decoded sheets. Where the bytes of a
 * reply are contiguous in a sheet (batch files, images.npy, by-class
 * images) the reply points into the sheet (iovecs, no copy); where they are
 * gathered tile by tile (epoch views, sheet images) they are copied into one
 * per-thread buffer. A sheet that cannot be decoded turns every read that
 * needs it into EIO and no other.
 *
 * File numbers are zero-padded to the width of the largest number in their
 * directory (so a name sort is a numeric sort, which ImageFolder relies on);
 * lookups also accept the unpadded number, naming the same inode.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/batch.h"
#include "common/image.h"
#include "common/util.h"
#include "fs/sfs.h"

static const char *const split_children[] = {"images.npy", "labels.npy", "batches",
					     "epochs",	   "by-class",	 "sheets"};
static const unsigned split_child_kind[] = {SFS_K_IMAGES_NPY, SFS_K_LABELS_NPY,	 SFS_K_BATCH_DIR,
					    SFS_K_EPOCHS_DIR, SFS_K_BYCLASS_DIR, SFS_K_SHEETS_DIR};
#define NSPLIT_CHILDREN 6

static int digits(uint64_t n)
{
	int d = 1;
	while (n >= 10) {
		n /= 10;
		d++;
	}
	return d;
}

static const char *img_ext(const struct sfs *fs)
{
	return sprite_pnm_ext(fs->info->tile_c);
}

static void sheet_grid(const struct sfs *fs, uint32_t count, uint32_t *rows, uint32_t *cols)
{
	uint32_t k = 1;
	while ((uint64_t)k * k < count)
		k++;
	*cols = k;
	*rows = count ? (count + k - 1) / k : 1;
	(void)fs;
}

/* numpy .npy v1.0 header: magic, version, uint16 length, dict padded to 64 bytes. */
static uint32_t npy_header(char *out, const char *descr, const char *shape)
{
	char dict[160];
	int n = snprintf(dict, sizeof(dict),
			 "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
	uint32_t total = (uint32_t)(10 + n + 1 + 63) & ~63u;
	uint32_t hlen = total - 10;
	memcpy(out, "\x93NUMPY\x01\x00", 8);
	out[8] = (char)(hlen & 0xff);
	out[9] = (char)(hlen >> 8);
	memcpy(out + 10, dict, (size_t)n);
	memset(out + 10 + n, ' ', total - 10 - (uint32_t)n - 1);
	out[total - 1] = '\n';
	return total;
}

/* A name that can be one directory entry. */
static int dir_name_ok(const char *s)
{
	size_t n = strlen(s);
	return n > 0 && n < 200 && strcmp(s, ".") && strcmp(s, "..") && !strchr(s, '/');
}

/*
 * A class name usable as class k's directory, and written in dataset.json's
 * class_dirs as it is (so UTF-8); names that are numbers are kept for numbers.
 */
static int class_name_ok(const char *s, uint32_t k)
{
	if (!dir_name_ok(s) || !sfs_utf8_ok(s)) /* class_dirs must name it exactly */
		return 0;
	if (strspn(s, "0123456789") != strlen(s))
		return 1;
	char own[16];
	snprintf(own, sizeof own, "%u", k);
	return !strcmp(s, own);
}

struct class_ref {
	const char *name;
	uint32_t k;
};

static int cmp_class_ref(const void *a, const void *b)
{
	const struct class_ref *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : (x->k > y->k) - (x->k < y->k);
}

/*
 * by-class/ directory names (docs/FORMAT.md): class k keeps its name when the
 * name is usable and no class before it has the same one; otherwise its
 * directory is its number. Numbers are kept for numbers, so the names are
 * unique whatever a store holds.
 */
static int class_dirs(struct sfs *fs)
{
	const struct sprite_store_info *in = fs->info;
	uint32_t n = in->nclasses;
	struct class_ref *v = malloc((n ? n : 1) * sizeof(*v));
	fs->class_dir = calloc(n ? n : 1, sizeof(char *));
	if (!v || !fs->class_dir) {
		free(v);
		return -ENOMEM;
	}
	for (uint32_t k = 0; k < n; k++)
		v[k] = (struct class_ref){in->class_names[k], k};
	sprite_sort(v, n, sizeof(*v), cmp_class_ref);
	int r = 0;
	for (uint32_t i = 0; i < n && r == 0; i++) {
		uint32_t k = v[i].k;
		int first = i == 0 || strcmp(v[i - 1].name, v[i].name);
		if (first && class_name_ok(v[i].name, k)) {
			fs->class_dir[k] = strdup(v[i].name);
		} else {
			char num[16];
			snprintf(num, sizeof(num), "%u", k);
			fs->class_dir[k] = strdup(num);
		}
		if (!fs->class_dir[k])
			r = -ENOMEM;
	}
	free(v);
	return r;
}

static void build_dataset_json(struct sfs *fs)
{
	const struct sprite_store_info *in = fs->info;
	struct sfs_str s = {0};
	sfs_str_printf(&s, "{\n  \"name\": ");
	sfs_str_json(&s, in->name);
	sfs_str_printf(&s, ",\n  \"format_version\": %u,\n", in->version);
	sfs_str_printf(&s, "  \"store\": ");
	sfs_str_json(&s, fs->store_path);
	sfs_str_printf(&s, ",\n  \"tile\": {\"h\": %u, \"w\": %u, \"c\": %u},\n", in->tile_h,
		       in->tile_w, in->tile_c);
	sfs_str_printf(&s, "  \"sheet_tiles\": %u,\n  \"nsheets\": %u,\n", in->sheet_tiles,
		       in->nsheets);
	sfs_str_printf(&s, "  \"nclasses\": %u,\n  \"classes\": [", in->nclasses);
	for (uint32_t k = 0; k < in->nclasses; k++) {
		if (k)
			sfs_str_printf(&s, ", ");
		sfs_str_json(&s, in->class_names[k]);
	}
	sfs_str_printf(&s, "],\n  \"class_dirs\": [");
	for (uint32_t k = 0; k < in->nclasses; k++) {
		if (k)
			sfs_str_printf(&s, ", ");
		sfs_str_json(&s, fs->class_dir[k]);
	}
	sfs_str_printf(&s, "],\n  \"labels_dtype\": \"%s\",\n  \"image_ext\": \"%s\",\n",
		       fs->label_bytes == 1 ? "uint8" : "uint16", img_ext(fs) + 1);
	sfs_str_printf(&s, "  \"epochs\": {\"seed\": %" PRIu64 ", \"count\": %u, \"batch\": %u},\n",
		       fs->o.seed, fs->o.epochs, fs->o.batch);
	sfs_str_printf(&s, "  \"order_window\": %u,\n", in->order_window);
	sfs_str_printf(&s, "  \"splits\": {");
	for (uint32_t k = 0; k < in->nsplits; k++) {
		struct sfs_split *sp = &fs->splits[k];
		sfs_str_printf(&s, "%s\n    ", k ? "," : "");
		sfs_str_json(&s, sp->name);
		sfs_str_printf(&s,
			       ": {\"count\": %" PRIu64 ", \"first_sheet\": %u, \"sheets\": %u, "
			       "\"epoch_batches\": %u, \"order\": \"%s\", \"window\": %u, "
			       "\"dataset_window\": %u}",
			       sp->count, sp->first_sheet, sp->nsheets, sp->epoch_batches,
			       sp->window ? "windowed" : "full", sp->window, sp->dataset_window);
	}
	sfs_str_printf(&s, "\n  }\n}\n");
	fs->dataset_json = s.p;
	fs->dataset_json_len = s.oom ? 0 : s.len;
}

int sfs_tree_init(struct sfs *fs, char *err)
{
	const struct sprite_store_info *in = fs->info;
	fs->tile_bytes = (uint64_t)in->tile_h * in->tile_w * in->tile_c;
	fs->label_bytes = in->nclasses <= 256 ? 1 : 2;
	fs->max_raw = fs->max_stored = 0;
	for (uint32_t i = 0; i < in->nsheets; i++) {
		if (in->sheets[i].raw_size > fs->max_raw)
			fs->max_raw = in->sheets[i].raw_size;
		if (in->sheets[i].stored_size > fs->max_stored)
			fs->max_stored = in->sheets[i].stored_size;
	}
	for (uint32_t k = 0; k < in->nsplits; k++) {
		const struct sprite_split_entry *e = &in->splits[k];
		struct sfs_split *sp = &fs->splits[k];
		char shape[96];
		sp->index = k;
		memcpy(sp->name, e->name, SPRITE_SPLIT_NAME_MAX);
		sp->name[SPRITE_SPLIT_NAME_MAX] = 0;
		if (!dir_name_ok(sp->name) || !strcmp(sp->name, ".spritefs") ||
		    !strcmp(sp->name, "dataset.json")) {
			snprintf(err, SPRITE_ERR_MAX,
				 "split %u has a name that cannot be a directory", k);
			return -EINVAL;
		}
		if (e->count > SFS_MAX_SPLIT_COUNT) {
			snprintf(err, SPRITE_ERR_MAX,
				 "split %.16s: %" PRIu64 " samples, more than %llu", sp->name,
				 (uint64_t)e->count, SFS_MAX_SPLIT_COUNT);
			return -EFBIG;
		}
		sp->count = e->count;
		sp->first_sheet = e->first_sheet;
		sp->nsheets = e->nsheets;
		sp->raw_bytes = 0;
		uint64_t split_max_raw = 0;
		for (uint32_t i = 0; i < e->nsheets; i++) {
			uint64_t r = in->sheets[e->first_sheet + i].raw_size;
			sp->raw_bytes += (r + 4095) & ~4095ull;
			if (r > split_max_raw)
				split_max_raw = r;
		}
		if (in->tile_c == 1)
			snprintf(shape, sizeof(shape), "(%" PRIu64 ", %u, %u)", sp->count,
				 in->tile_h, in->tile_w);
		else
			snprintf(shape, sizeof(shape), "(%" PRIu64 ", %u, %u, %u)", sp->count,
				 in->tile_h, in->tile_w, in->tile_c);
		sp->npy_images_len = npy_header(sp->npy_images, "|u1", shape);
		snprintf(shape, sizeof(shape), "(%" PRIu64 ",)", sp->count);
		sp->npy_labels_len =
			npy_header(sp->npy_labels, fs->label_bytes == 1 ? "|u1" : "<u2", shape);
		sp->epoch_batches = (uint32_t)((sp->count + fs->o.batch - 1) / fs->o.batch);
		/* the order is the data set's; -o window= may ask for another one explicitly */
		uint32_t dw = in->order_window;
		sp->dataset_window = dw && sp->nsheets > dw ? dw : 0;
		if (fs->o.window == SFS_WINDOW_DATASET)
			sp->window = sp->dataset_window;
		else if (fs->o.window == SFS_WINDOW_FULL || fs->o.window >= sp->nsheets)
			sp->window = 0;
		else
			sp->window = fs->o.window;
		sp->digits_batches = digits(sp->nsheets ? sp->nsheets - 1 : 0);
		sp->digits_sheets = sp->digits_batches;
		sp->digits_samples = digits(sp->count ? sp->count - 1 : 0);
		sp->digits_epoch_batches = digits(sp->epoch_batches ? sp->epoch_batches - 1 : 0);
		pthread_mutex_init(&sp->lab_lock, NULL);
	}
	int r = class_dirs(fs);
	if (r < 0)
		return r;
	build_dataset_json(fs);
	if (!fs->dataset_json_len) {
		snprintf(err, SPRITE_ERR_MAX, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

void sfs_tree_free(struct sfs *fs)
{
	if (!fs->info)
		return;
	for (uint32_t k = 0; k < fs->info->nsplits; k++) {
		struct sfs_split *sp = &fs->splits[k];
		free(sp->labels);
		free(sp->sheet_bad);
		free(sp->class_start);
		free(sp->class_samples);
		pthread_mutex_destroy(&sp->lab_lock);
	}
	for (uint32_t k = 0; fs->class_dir && k < fs->info->nclasses; k++)
		free(fs->class_dir[k]);
	free(fs->class_dir);
	free(fs->dataset_json);
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
	uint16_t *labels = malloc((sp->count ? sp->count : 1) * sizeof(uint16_t));
	uint8_t *bad = calloc(sp->nsheets ? sp->nsheets : 1, 1);
	uint64_t *start = calloc((size_t)in->nclasses + 1, sizeof(uint64_t));
	uint32_t *samples = malloc((sp->count ? sp->count : 1) * sizeof(uint32_t));
	if (!labels || !bad || !start || !samples) {
		r = -ENOMEM;
		goto fail;
	}
	for (uint32_t k = 0; k < sp->nsheets; k++) {
		uint32_t i = sp->first_sheet + k;
		const struct sprite_sheet_entry *e = &in->sheets[i];
		const uint8_t *raw;
		struct sprite_batch_header h;
		if (k % 4 == 0)
			sfs_sheet_prefetch_run(fs, i + 1, fs->o.prefetch, sp->first_sheet,
					       sp->first_sheet + sp->nsheets, 0);
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
	for (uint64_t s = 0; s < sp->count; s++)
		if (labels[s] != UINT16_MAX)
			start[labels[s] + 1]++;
	for (uint32_t c = 0; c < in->nclasses; c++)
		start[c + 1] += start[c];
	{
		uint64_t *fill = calloc(in->nclasses ? in->nclasses : 1, sizeof(uint64_t));
		if (!fill) {
			r = -ENOMEM;
			goto fail;
		}
		for (uint64_t s = 0; s < sp->count; s++)
			if (labels[s] != UINT16_MAX)
				samples[start[labels[s]] + fill[labels[s]]++] = (uint32_t)s;
		free(fill);
	}
	sp->labels = labels;
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

/* ---- attributes ---------------------------------------------------------- */

static uint64_t epoch_batch_count(const struct sfs *fs, const struct sfs_split *sp, uint32_t n)
{
	uint64_t first = (uint64_t)n * fs->o.batch;
	uint64_t left = sp->count - first;
	return left < fs->o.batch ? left : fs->o.batch;
}

static uint64_t sheet_img_size(const struct sfs *fs, uint32_t sheet)
{
	const struct sprite_store_info *in = fs->info;
	uint32_t rows, cols;
	char hdr[SPRITE_PNM_HEADER_MAX];
	sheet_grid(fs, in->sheets[sheet].count, &rows, &cols);
	int hl = sprite_pnm_header(hdr, sizeof(hdr), rows * in->tile_h, cols * in->tile_w,
				   in->tile_c);
	return (uint64_t)hl + (uint64_t)rows * cols * fs->tile_bytes;
}

static uint64_t class_img_size(const struct sfs *fs)
{
	char hdr[SPRITE_PNM_HEADER_MAX];
	const struct sprite_store_info *in = fs->info;
	return (uint64_t)sprite_pnm_header(hdr, sizeof(hdr), in->tile_h, in->tile_w, in->tile_c) +
	       fs->tile_bytes;
}

int sfs_tree_attr(struct sfs *fs, uint64_t ino, struct sfs_attr *a)
{
	const struct sprite_store_info *in = fs->info;
	unsigned kind = sfs_ino_kind(ino);
	unsigned split = sfs_ino_split(ino);
	uint32_t x = sfs_ino_a(ino), n = sfs_ino_n(ino);
	struct sfs_split *sp = split < in->nsplits ? &fs->splits[split] : NULL;

	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->nlink = 1;
	if (kind >= SFS_K_SPLIT_DIR && !sp)
		return -ENOENT;
	switch (kind) {
	case SFS_K_ROOT:
	case SFS_K_META_DIR:
	case SFS_K_SPLIT_DIR:
	case SFS_K_BATCH_DIR:
	case SFS_K_EPOCHS_DIR:
	case SFS_K_BYCLASS_DIR:
	case SFS_K_SHEETS_DIR:
		a->dir = 1;
		return 0;
	case SFS_K_DATASET_JSON:
		a->size = fs->dataset_json_len;
		return 0;
	case SFS_K_STATS_JSON:
		a->size = SFS_STATS_SIZE;
		return 0;
	case SFS_K_IMAGES_NPY:
		a->size = sp->npy_images_len + sp->count * fs->tile_bytes;
		return 0;
	case SFS_K_LABELS_NPY:
		a->size = sp->npy_labels_len + sp->count * fs->label_bytes;
		return 0;
	case SFS_K_BATCH:
		if (n >= sp->nsheets)
			return -ENOENT;
		a->size = in->sheets[sp->first_sheet + n].raw_size;
		return 0;
	case SFS_K_SEED_DIR:
		if (x >= __atomic_load_n(&fs->nseeds, __ATOMIC_ACQUIRE))
			return -ENOENT;
		a->dir = 1;
		return 0;
	case SFS_K_EPOCH_DIR:
	case SFS_K_EPOCH_BATCH:
		if (sfs_ep_slot(x) >= __atomic_load_n(&fs->nseeds, __ATOMIC_ACQUIRE))
			return -ENOENT;
		if (kind == SFS_K_EPOCH_DIR) {
			a->dir = 1;
			return 0;
		}
		if (n >= sp->epoch_batches)
			return -ENOENT;
		{
			struct sprite_batch_header h;
			sprite_batch_layout((uint32_t)epoch_batch_count(fs, sp, n), in->tile_h,
					    in->tile_w, in->tile_c, &h);
			a->size = h.total_size;
		}
		return 0;
	case SFS_K_CLASS_DIR:
		if (x >= in->nclasses)
			return -ENOENT;
		a->dir = 1;
		return 0;
	case SFS_K_CLASS_IMG:
		if (x >= in->nclasses || n >= sp->count)
			return -ENOENT;
		a->size = class_img_size(fs);
		return 0;
	case SFS_K_SHEET_IMG:
		if (n >= sp->nsheets)
			return -ENOENT;
		a->size = sheet_img_size(fs, sp->first_sheet + n);
		return 0;
	}
	return -ENOENT;
}

/*
 * Parse "<digits><suffix>" into *n: the number written either without
 * leading zeros or zero-padded to exactly width digits.
 */
static int parse_num(const char *name, const char *suffix, int width, uint64_t *n)
{
	size_t len = strlen(name), sl = strlen(suffix);
	if (len <= sl || strcmp(name + len - sl, suffix))
		return -ENOENT;
	size_t nd = len - sl;
	if (nd > 20) /* UINT64_MAX has 20 digits */
		return -ENOENT;
	uint64_t v = 0;
	for (size_t k = 0; k < nd; k++) {
		unsigned d = (unsigned)(name[k] - '0');
		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return -ENOENT;
		v = v * 10 + d;
	}
	if (!(nd == (size_t)width || nd == (size_t)digits(v)))
		return -ENOENT;
	*n = v;
	return 0;
}

int sfs_tree_lookup(struct sfs *fs, uint64_t parent, const char *name, struct sfs_attr *a)
{
	const struct sprite_store_info *in = fs->info;
	unsigned kind = sfs_ino_kind(parent);
	unsigned split = sfs_ino_split(parent);
	uint32_t x = sfs_ino_a(parent);
	uint64_t n;
	int r = sfs_tree_attr(fs, parent, a);
	if (r < 0)
		return r;
	if (!a->dir)
		return -ENOTDIR;
	struct sfs_split *sp = &fs->splits[split < in->nsplits ? split : 0];

	switch (kind) {
	case SFS_K_ROOT:
		if (!strcmp(name, "dataset.json"))
			return sfs_tree_attr(fs, sfs_ino(SFS_K_DATASET_JSON, 0, 0, 0), a);
		if (!strcmp(name, ".spritefs"))
			return sfs_tree_attr(fs, sfs_ino(SFS_K_META_DIR, 0, 0, 0), a);
		for (uint32_t k = 0; k < in->nsplits; k++)
			if (!strcmp(name, fs->splits[k].name))
				return sfs_tree_attr(fs, sfs_ino(SFS_K_SPLIT_DIR, k, 0, 0), a);
		return -ENOENT;
	case SFS_K_META_DIR:
		if (!strcmp(name, "stats.json"))
			return sfs_tree_attr(fs, sfs_ino(SFS_K_STATS_JSON, 0, 0, 0), a);
		return -ENOENT;
	case SFS_K_SPLIT_DIR:
		for (int k = 0; k < NSPLIT_CHILDREN; k++)
			if (!strcmp(name, split_children[k]))
				return sfs_tree_attr(fs, sfs_ino(split_child_kind[k], split, 0, 0),
						     a);
		return -ENOENT;
	case SFS_K_BATCH_DIR:
		if (parse_num(name, ".sprite", sp->digits_batches, &n) || n >= sp->nsheets)
			return -ENOENT;
		return sfs_tree_attr(fs, sfs_ino(SFS_K_BATCH, split, 0, (uint32_t)n), a);
	case SFS_K_SHEETS_DIR:
		if (parse_num(name, img_ext(fs), sp->digits_sheets, &n) || n >= sp->nsheets)
			return -ENOENT;
		return sfs_tree_attr(fs, sfs_ino(SFS_K_SHEET_IMG, split, 0, (uint32_t)n), a);
	case SFS_K_EPOCHS_DIR: {
		if (parse_num(name, "", 0, &n))
			return -ENOENT;
		int slot = sfs_seed_slot(fs, n);
		if (slot < 0)
			return slot;
		return sfs_tree_attr(fs, sfs_ino(SFS_K_SEED_DIR, split, (uint32_t)slot, 0), a);
	}
	case SFS_K_SEED_DIR:
		if (parse_num(name, "", 0, &n) || n >= SFS_MAX_EPOCHS)
			return -ENOENT;
		return sfs_tree_attr(
			fs, sfs_ino(SFS_K_EPOCH_DIR, split, sfs_ep_a(x, (uint32_t)n), 0), a);
	case SFS_K_EPOCH_DIR:
		if (parse_num(name, ".sprite", sp->digits_epoch_batches, &n) ||
		    n >= sp->epoch_batches)
			return -ENOENT;
		return sfs_tree_attr(fs, sfs_ino(SFS_K_EPOCH_BATCH, split, x, (uint32_t)n), a);
	case SFS_K_BYCLASS_DIR:
		for (uint32_t k = 0; k < in->nclasses; k++)
			if (!strcmp(name, fs->class_dir[k]))
				return sfs_tree_attr(fs, sfs_ino(SFS_K_CLASS_DIR, split, k, 0), a);
		return -ENOENT;
	case SFS_K_CLASS_DIR:
		if (parse_num(name, img_ext(fs), sp->digits_samples, &n) || n >= sp->count)
			return -ENOENT;
		r = sfs_labels_ensure(fs, sp);
		if (r < 0)
			return r;
		if (sp->labels[n] != x)
			return -ENOENT;
		return sfs_tree_attr(fs, sfs_ino(SFS_K_CLASS_IMG, split, x, (uint32_t)n), a);
	}
	return -ENOTDIR;
}

int sfs_tree_dirent(struct sfs *fs, uint64_t dir, uint64_t i, char *name, struct sfs_attr *a)
{
	const struct sprite_store_info *in = fs->info;
	unsigned kind = sfs_ino_kind(dir);
	unsigned split = sfs_ino_split(dir);
	uint32_t x = sfs_ino_a(dir);
	int r = sfs_tree_attr(fs, dir, a);
	if (r < 0)
		return r;
	if (!a->dir)
		return -ENOTDIR;
	if (i == 0 || i == 1) {
		strcpy(name, i == 0 ? "." : "..");
		a->ino = i == 0 ? dir : 1; /* ".." is resolved by the kernel; the ino is unused */
		a->dir = 1;
		return 1;
	}
	i -= 2;
	struct sfs_split *sp = &fs->splits[split < in->nsplits ? split : 0];
	uint64_t child;
	switch (kind) {
	case SFS_K_ROOT:
		if (i == 0) {
			strcpy(name, "dataset.json");
			child = sfs_ino(SFS_K_DATASET_JSON, 0, 0, 0);
		} else if (i == 1) {
			strcpy(name, ".spritefs");
			child = sfs_ino(SFS_K_META_DIR, 0, 0, 0);
		} else if (i - 2 < in->nsplits) {
			strcpy(name, fs->splits[i - 2].name);
			child = sfs_ino(SFS_K_SPLIT_DIR, (unsigned)(i - 2), 0, 0);
		} else {
			return 0;
		}
		break;
	case SFS_K_META_DIR:
		if (i)
			return 0;
		strcpy(name, "stats.json");
		child = sfs_ino(SFS_K_STATS_JSON, 0, 0, 0);
		break;
	case SFS_K_SPLIT_DIR:
		if (i >= NSPLIT_CHILDREN)
			return 0;
		strcpy(name, split_children[i]);
		child = sfs_ino(split_child_kind[i], split, 0, 0);
		break;
	case SFS_K_BATCH_DIR:
		if (i >= sp->nsheets)
			return 0;
		snprintf(name, 256, "%0*" PRIu64 ".sprite", sp->digits_batches, i);
		child = sfs_ino(SFS_K_BATCH, split, 0, (uint32_t)i);
		break;
	case SFS_K_SHEETS_DIR:
		if (i >= sp->nsheets)
			return 0;
		snprintf(name, 256, "%0*" PRIu64 "%s", sp->digits_sheets, i, img_ext(fs));
		child = sfs_ino(SFS_K_SHEET_IMG, split, 0, (uint32_t)i);
		break;
	case SFS_K_EPOCHS_DIR:
		if (i >= __atomic_load_n(&fs->nseeds, __ATOMIC_ACQUIRE))
			return 0;
		snprintf(name, 256, "%" PRIu64, sfs_seed_of(fs, (uint32_t)i));
		child = sfs_ino(SFS_K_SEED_DIR, split, (uint32_t)i, 0);
		break;
	case SFS_K_SEED_DIR:
		if (i >= fs->o.epochs)
			return 0;
		snprintf(name, 256, "%" PRIu64, i);
		child = sfs_ino(SFS_K_EPOCH_DIR, split, sfs_ep_a(x, (uint32_t)i), 0);
		break;
	case SFS_K_EPOCH_DIR:
		if (i >= sp->epoch_batches)
			return 0;
		snprintf(name, 256, "%0*" PRIu64 ".sprite", sp->digits_epoch_batches, i);
		child = sfs_ino(SFS_K_EPOCH_BATCH, split, x, (uint32_t)i);
		break;
	case SFS_K_BYCLASS_DIR:
		if (i >= in->nclasses)
			return 0;
		snprintf(name, 256, "%s", fs->class_dir[i]);
		child = sfs_ino(SFS_K_CLASS_DIR, split, (uint32_t)i, 0);
		break;
	case SFS_K_CLASS_DIR: {
		r = sfs_labels_ensure(fs, sp);
		if (r < 0)
			return r;
		uint64_t lo = sp->class_start[x], hi = sp->class_start[x + 1];
		if (i >= hi - lo)
			return 0;
		uint32_t s = sp->class_samples[lo + i];
		snprintf(name, 256, "%0*u%s", sp->digits_samples, s, img_ext(fs));
		child = sfs_ino(SFS_K_CLASS_IMG, split, x, s);
		break;
	}
	default:
		return -ENOTDIR;
	}
	r = sfs_tree_attr(fs, child, a);
	return r < 0 ? r : 1;
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
	/* ask for every sheet of the range at once, then the next ones */
	int r = locate(fs, sp->index, (pos - hl) / tb, &sheet, &slot);
	if (r < 0)
		return r;
	uint32_t nspan = (uint32_t)((end - pos) / (tb * fs->info->sheet_tiles)) + 2;
	sfs_sheet_prefetch_run(fs, sheet, nspan + fs->o.prefetch, sp->first_sheet,
			       fs->info->nsheets, 0); /* on into the next split, as read_batch */
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

static int read_batch(struct sfs *fs, struct sfs_split *sp, uint32_t n, uint64_t pos, uint64_t end,
		      struct sfs_rbuf *rb)
{
	uint32_t sheet = sp->first_sheet + n;
	/*
	 * Ahead in store order, on past the split's last sheet into the next
	 * split's (a pass over train/batches then test/batches, or a training
	 * epoch then its evaluation, reads the store front to back): the first
	 * reads of the next split then come from memory instead of the disk.
	 */
	sfs_sheet_prefetch_run(fs, sheet, fs->o.prefetch + 1, sp->first_sheet, fs->info->nsheets,
			       !rb->direct);
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
	sfs_sheet_prefetch_run(fs, sheet, fs->o.prefetch + 1, sp->first_sheet,
			       sp->first_sheet + sp->nsheets, 0);
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
	sheet_grid(fs, e->count, &rows, &cols);
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

/* Prefetch the sheets that batch n and the following ones of an epoch view need. */
static void epoch_prefetch(struct sfs *fs, struct sfs_split *sp, const uint32_t *perm,
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

static int read_epoch_batch(struct sfs *fs, struct sfs_split *sp, uint32_t a, uint32_t n,
			    uint64_t pos, uint64_t end, struct sfs_rbuf *rb)
{
	const struct sprite_store_info *in = fs->info;
	const uint32_t *perm;
	void *handle;
	int r = sfs_epoch_get(fs, sfs_ep_slot(a), sfs_ep_epoch(a), sp->index, &perm, &handle);
	if (r < 0)
		return r;
	uint32_t cnt = (uint32_t)epoch_batch_count(fs, sp, n);
	const uint32_t *ids = perm + (uint64_t)n * fs->o.batch;
	uint8_t hb[SPRITE_BATCH_HEADER_SIZE];
	struct sprite_batch_header h;
	sprite_batch_init(hb, cnt, in->tile_h, in->tile_w, in->tile_c, sp->index);
	memcpy(&h, hb, sizeof(h));
	int plan = sfs_epoch_plan(handle) != NULL;
	uint64_t fend = end;
	if (plan)
		sfs_cache_stream(fs, handle, n, 0);
	else if (pos == 0)
		epoch_prefetch(fs, sp, perm, (uint64_t)n * fs->o.batch);

	struct memo m = {.raw = NULL};
	const uint64_t tb = fs->tile_bytes;
	rb->flat = 1;
	while (pos < end && r == 0) {
		uint8_t *dst = rb->out + rb->total;
		uint64_t take;
		if (pos < SPRITE_BATCH_HEADER_SIZE) {
			take = SPRITE_BATCH_HEADER_SIZE - pos;
			if (take > end - pos)
				take = end - pos;
			memcpy(dst, hb + pos, take);
		} else if (pos >= h.labels_offset && pos < h.labels_offset + 2ull * cnt) {
			uint64_t k = (pos - h.labels_offset) / 2,
				 byte = (pos - h.labels_offset) % 2;
			uint32_t slot;
			r = memo_sample(fs, &m, sp->index, ids[k], &slot);
			if (r < 0)
				break;
			*dst = m.raw[m.labels_off + 2 * (size_t)slot + byte];
			take = 1;
		} else if (pos >= h.ids_offset && pos < h.ids_offset + 4ull * cnt) {
			uint64_t k = (pos - h.ids_offset) / 4, byte = (pos - h.ids_offset) % 4;
			uint32_t id = ids[k];
			uint8_t le[4] = {(uint8_t)id, (uint8_t)(id >> 8), (uint8_t)(id >> 16),
					 (uint8_t)(id >> 24)};
			take = 4 - byte;
			if (take > end - pos)
				take = end - pos;
			memcpy(dst, le + byte, take);
		} else if (pos >= h.tiles_offset && pos < h.tiles_offset + tb * cnt) {
			uint64_t k = (pos - h.tiles_offset) / tb,
				 within = (pos - h.tiles_offset) % tb;
			uint32_t slot;
			r = memo_sample(fs, &m, sp->index, ids[k], &slot);
			if (r < 0)
				break;
			take = tb - within;
			if (take > end - pos)
				take = end - pos;
			memcpy(dst, m.raw + m.tiles_off + (uint64_t)slot * tb + within, take);
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
			memset(dst, 0, take);
		}
		rb->total += take;
		pos += take;
	}
	if (m.raw)
		sfs_sheet_put(fs, m.sheet);
	if (plan && r == 0 && fend >= h.total_size)
		sfs_cache_stream(fs, handle, n, 1);
	sfs_epoch_put(fs, handle);
	return r;
}

int sfs_tree_read(struct sfs *fs, uint64_t ino, uint64_t off, size_t size, struct sfs_rbuf *rb)
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
