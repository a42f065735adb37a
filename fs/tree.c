/*
 * tree.c - the virtual tree of a spritefs mount: names, inodes and sizes.
 *
 *   /dataset.json
 *   /.spritefs/stats.json
 *   /<split>/images.npy, labels.npy
 *   /<split>/paths.txt                          a store with a path table only
 *   /<split>/batches/<n>.sprite                 sheet n of the split, as decoded
 *   /<split>/epochs/<seed>/<epoch>/<n>.sprite   batch n of that epoch's order
 *   /<split>/by-class/<class>/<i>.pgm|ppm|pam   sample i of the split
 *   /<split>/sheets/<n>.pgm|ppm|pam             sheet n as a grid of tiles
 *
 * Nothing is stored per file: an inode number encodes the kind of file and
 * its coordinates (sfs.h), and sizes follow from the store's validated
 * index. This file answers lookups, attributes and listings, and writes
 * dataset.json once at mount; the bytes of the other files are read.c's.
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
#include "common/json.h"
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
	if (!dir_name_ok(s) || !sprite_utf8_ok(s)) /* class_dirs must name it exactly */
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

/*
 * by-class/ of a split lists only the classes with samples in it: a stock
 * torchvision ImageFolder refuses a class directory without an image. Its
 * class indices are the listed names in sorted order; dataset.json's
 * by_class_labels gives the store label of each (docs/FORMAT.md), from the
 * label table, or null for a store without one (its listing reads sheets).
 */
static void by_class_json(struct sfs *fs, struct sprite_str *s, uint32_t split)
{
	const struct sprite_store_info *in = fs->info;
	const uint16_t *table = sprite_store_labels(fs->store, split);
	uint32_t n = in->nclasses;
	if (!table) {
		sprite_str_printf(s, "null");
		return;
	}
	struct class_ref *v = malloc((n ? n : 1) * sizeof(*v));
	uint8_t *has = calloc(n ? n : 1, 1);
	if (!v || !has) {
		s->oom = 1;
		goto out;
	}
	for (uint64_t i = 0; i < fs->splits[split].count; i++)
		if (table[i] < n)
			has[table[i]] = 1;
	uint32_t m = 0;
	for (uint32_t k = 0; k < n; k++)
		if (has[k])
			v[m++] = (struct class_ref){fs->class_dir[k], k};
	sprite_sort(v, m, sizeof(*v), cmp_class_ref);
	sprite_str_printf(s, "[");
	for (uint32_t i = 0; i < m; i++)
		sprite_str_printf(s, "%s%u", i ? ", " : "", v[i].k);
	sprite_str_printf(s, "]");
out:
	free(v);
	free(has);
}

/*
 * The classes by-class/ lists for a split (those with samples), built once
 * after the label table; 0 or -errno.
 */
static int by_class_ensure(struct sfs *fs, struct sfs_split *sp)
{
	if (__atomic_load_n(&sp->class_listed, __ATOMIC_ACQUIRE))
		return 0;
	int r = sfs_labels_ensure(fs, sp);
	if (r < 0)
		return r;
	pthread_mutex_lock(&sp->lab_lock);
	if (!__atomic_load_n(&sp->class_listed, __ATOMIC_ACQUIRE)) {
		uint32_t n = fs->info->nclasses, m = 0;
		uint32_t *v = malloc((n ? n : 1) * sizeof(*v));
		if (v) {
			for (uint32_t k = 0; k < n; k++)
				if (sp->class_start[k + 1] > sp->class_start[k])
					v[m++] = k;
			sp->nclass_listed = m;
			__atomic_store_n(&sp->class_listed, v, __ATOMIC_RELEASE);
		} else {
			r = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&sp->lab_lock);
	return r;
}

/* ", \"class_counts\": [...]": the samples of each class in split; null without a label table. */
static void class_counts_json(struct sfs *fs, struct sprite_str *s, uint32_t split)
{
	uint32_t n = fs->info->nclasses;
	uint64_t *c = malloc((n ? n : 1) * sizeof(*c));
	if (!c) {
		s->oom = 1;
		return;
	}
	sprite_str_printf(s, ", \"class_counts\": ");
	if (sprite_store_class_counts(fs->store, split, c) < 0) {
		sprite_str_printf(s, "null");
	} else {
		sprite_str_printf(s, "[");
		for (uint32_t k = 0; k < n; k++)
			sprite_str_printf(s, "%s%" PRIu64, k ? ", " : "", c[k]);
		sprite_str_printf(s, "]");
	}
	free(c);
}

const char *sfs_store_shown(const struct sfs *fs)
{
	const char *slash = strrchr(fs->store_path, '/');
	return fs->path_private && slash ? slash + 1 : fs->store_path;
}

static void build_dataset_json(struct sfs *fs)
{
	const struct sprite_store_info *in = fs->info;
	struct sprite_str s = {0};
	sprite_str_printf(&s, "{\n  \"name\": ");
	sprite_str_json(&s, in->name);
	sprite_str_printf(&s, ",\n  \"format_version\": %u,\n", in->version);
	sprite_str_printf(&s, "  \"store\": ");
	sprite_str_json(&s, sfs_store_shown(fs));
	sprite_str_printf(&s, ",\n  \"tile\": {\"h\": %u, \"w\": %u, \"c\": %u},\n", in->tile_h,
			  in->tile_w, in->tile_c);
	sprite_str_printf(&s, "  \"sheet_tiles\": %u,\n  \"nsheets\": %u,\n", in->sheet_tiles,
			  in->nsheets);
	sprite_str_printf(&s, "  \"nclasses\": %u,\n  \"classes\": [", in->nclasses);
	for (uint32_t k = 0; k < in->nclasses; k++) {
		if (k)
			sprite_str_printf(&s, ", ");
		sprite_str_json(&s, in->class_names[k]);
	}
	sprite_str_printf(&s, "],\n  \"class_dirs\": [");
	for (uint32_t k = 0; k < in->nclasses; k++) {
		if (k)
			sprite_str_printf(&s, ", ");
		sprite_str_json(&s, fs->class_dir[k]);
	}
	sprite_str_printf(&s, "],\n  \"labels_dtype\": \"%s\",\n  \"image_ext\": \"%s\",\n",
			  fs->label_bytes == 1 ? "uint8" : "uint16", img_ext(fs) + 1);
	sprite_str_printf(&s,
			  "  \"epochs\": {\"seed\": %" PRIu64 ", \"count\": %u, \"batch\": %u},\n",
			  fs->o.seed, fs->o.epochs, fs->o.batch);
	sprite_str_printf(&s, "  \"order_window\": %u,\n", in->order_window);
	sprite_str_printf(&s, "  \"label_table\": %s,\n",
			  sprite_store_labels(fs->store, 0) ? "true" : "false");
	sprite_str_printf(&s, "  \"fit\": \"%s\",\n", sprite_fit_name(in->fit));
	sprite_str_printf(&s, "  \"skipped\": %" PRIu64 ", \"skipped_list\": %s,\n",
			  sprite_store_skipped_count(fs->store),
			  sprite_store_skipped_count(fs->store) ? "\".spritefs/skipped.txt\""
								: "null");
	sprite_str_printf(&s, "  \"splits\": {");
	for (uint32_t k = 0; k < in->nsplits; k++) {
		struct sfs_split *sp = &fs->splits[k];
		sprite_str_printf(&s, "%s\n    ", k ? "," : "");
		sprite_str_json(&s, sp->name);
		sprite_str_printf(&s,
				  ": {\"count\": %" PRIu64 ", \"first_sheet\": %u, \"sheets\": %u, "
				  "\"epoch_batches\": %u, \"order\": \"%s\", \"window\": %u, "
				  "\"dataset_window\": %u, \"paths\": %s, \"by_class_labels\": ",
				  sp->count, sp->first_sheet, sp->nsheets, sp->epoch_batches,
				  sp->window ? "windowed" : "full", sp->window, sp->dataset_window,
				  sprite_store_has_paths(fs->store) ? "\"paths.txt\"" : "null");
		by_class_json(fs, &s, k);
		class_counts_json(fs, &s, k);
		sprite_str_printf(&s, "}");
	}
	sprite_str_printf(&s, "\n  }\n}\n");
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
		free(sp->labels_owned);
		free(sp->sheet_bad);
		free(sp->class_start);
		free(sp->class_samples);
		free(sp->class_listed);
		pthread_mutex_destroy(&sp->lab_lock);
	}
	for (uint32_t k = 0; fs->class_dir && k < fs->info->nclasses; k++)
		free(fs->class_dir[k]);
	free(fs->class_dir);
	free(fs->dataset_json);
	free(fs->skipped_txt);
}

/* ---- attributes ---------------------------------------------------------- */

static uint64_t sheet_img_size(const struct sfs *fs, uint32_t sheet)
{
	const struct sprite_store_info *in = fs->info;
	uint32_t rows, cols;
	char hdr[SPRITE_PNM_HEADER_MAX];
	sfs_sheet_grid(in->sheets[sheet].count, &rows, &cols);
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
	case SFS_K_SKIPPED_TXT: /* the list as the header sizes it; checked when read */
		if (!sprite_store_skipped_count(fs->store))
			return -ENOENT;
		a->size = sprite_store_skipped_size(fs->store);
		return 0;
	case SFS_K_IMAGES_NPY:
		a->size = sp->npy_images_len + sp->count * fs->tile_bytes;
		return 0;
	case SFS_K_LABELS_NPY:
		a->size = sp->npy_labels_len + sp->count * fs->label_bytes;
		return 0;
	case SFS_K_PATHS_TXT: {
		/* Sized from two offsets; the table is loaded (and checked) when read. */
		if (!sprite_store_has_paths(fs->store))
			return -ENOENT;
		int64_t len = sprite_store_split_paths_size(fs->store, split);
		if (len < 0)
			return -EIO; /* offsets that no load would accept */
		a->size = (uint64_t)len;
		return 0;
	}
	case SFS_K_BATCH:
		if (n >= sp->nsheets)
			return -ENOENT;
		a->size = in->sheets[sp->first_sheet + n].raw_size;
		return 0;
	case SFS_K_SEED_DIR:
		if (!sfs_seed_live(fs, x))
			return -ENOENT;
		a->dir = 1;
		return 0;
	case SFS_K_EPOCH_DIR:
	case SFS_K_EPOCH_BATCH:
		if (!sfs_seed_live(fs, sfs_ep_slot(x)))
			return -ENOENT;
		if (kind == SFS_K_EPOCH_DIR) {
			a->dir = 1;
			return 0;
		}
		if (n >= sp->epoch_batches)
			return -ENOENT;
		{
			struct sprite_batch_header h;
			sprite_batch_layout((uint32_t)sfs_epoch_batch_count(fs, sp, n), in->tile_h,
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

int sfs_tree_lookup(struct sfs *fs, uint64_t parent, const char *name, uint32_t uid,
		    struct sfs_attr *a)
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
		if (!strcmp(name, "skipped.txt"))
			return sfs_tree_attr(fs, sfs_ino(SFS_K_SKIPPED_TXT, 0, 0, 0), a);
		return -ENOENT;
	case SFS_K_SPLIT_DIR:
		for (int k = 0; k < NSPLIT_CHILDREN; k++)
			if (!strcmp(name, split_children[k]))
				return sfs_tree_attr(fs, sfs_ino(split_child_kind[k], split, 0, 0),
						     a);
		if (!strcmp(name, "paths.txt"))
			return sfs_tree_attr(fs, sfs_ino(SFS_K_PATHS_TXT, split, 0, 0), a);
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
		int slot = sfs_seed_slot(fs, n, uid); /* one lookup counted */
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
		for (uint32_t k = 0; k < in->nclasses; k++) {
			if (strcmp(name, fs->class_dir[k]))
				continue;
			r = by_class_ensure(fs, sp); /* a class without samples is not listed */
			if (r < 0)
				return r;
			if (sp->class_start[k + 1] == sp->class_start[k])
				return -ENOENT;
			return sfs_tree_attr(fs, sfs_ino(SFS_K_CLASS_DIR, split, k, 0), a);
		}
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
		if (i == 1 && sprite_store_skipped_count(fs->store)) {
			strcpy(name, "skipped.txt");
			child = sfs_ino(SFS_K_SKIPPED_TXT, 0, 0, 0);
			break;
		}
		if (i)
			return 0;
		strcpy(name, "stats.json");
		child = sfs_ino(SFS_K_STATS_JSON, 0, 0, 0);
		break;
	case SFS_K_SPLIT_DIR:
		if (i == NSPLIT_CHILDREN && sprite_store_has_paths(fs->store)) {
			strcpy(name, "paths.txt");
			child = sfs_ino(SFS_K_PATHS_TXT, split, 0, 0);
			break;
		}
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
		if (!sfs_seed_live(fs, (uint32_t)i))
			return 2; /* a slot free again: no entry */
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
	case SFS_K_BYCLASS_DIR: {
		r = by_class_ensure(fs, sp);
		if (r < 0)
			return r;
		if (i >= sp->nclass_listed)
			return 0;
		uint32_t k = sp->class_listed[i];
		snprintf(name, 256, "%s", fs->class_dir[k]);
		child = sfs_ino(SFS_K_CLASS_DIR, split, k, 0);
		break;
	}
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
	if (r < 0 && sfs_ino_kind(child) == SFS_K_PATHS_TXT) {
		/* a bad path table fails paths.txt, not the listing of its split */
		memset(a, 0, sizeof(*a));
		a->ino = child;
		a->nlink = 1;
		return 1;
	}
	return r < 0 ? r : 1;
}
