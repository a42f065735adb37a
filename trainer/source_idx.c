/*
 * source_idx.c - a folder of IDX files as a data source (data.h: "idx"),
 * the form Fashion-MNIST ships in: train-images-idx3-ubyte[.gz] and
 * train-labels-idx1-ubyte[.gz], t10k-* for the split "test".
 *
 * IDX files are small and often gzipped, so both splits are loaded whole at
 * open (common/image.c checks them) and then read as a memory source.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/image.h"
#include "common/store.h"
#include "trainer/source.h"

static int idx_find(const char *dir, const char *prefix, const char *kind, char *out, size_t cap)
{
	struct stat st;
	snprintf(out, cap, "%s/%s-%s", dir, prefix, kind);
	if (stat(out, &st) == 0)
		return 0;
	snprintf(out, cap, "%s/%s-%s.gz", dir, prefix, kind);
	return stat(out, &st) == 0 ? 0 : -ENOENT;
}

int hn_source_idx_has(const char *dir)
{
	char p[4200];
	return idx_find(dir, "train", "images-idx3-ubyte", p, sizeof p) == 0;
}

static int idx_open(hn_source *s, const char *path, const struct hn_source_options *o, char *err)
{
	struct hn_mem *mem = calloc(1, sizeof *mem);
	if (!mem)
		return sprite_fail(err, -ENOMEM, "out of memory");
	s->priv = mem;
	snprintf(s->info.kind, sizeof s->info.kind, "idx");
	const char *base = strrchr(path, '/');
	snprintf(s->info.name, sizeof s->info.name, "%s", base && base[1] ? base + 1 : path);
	int maxlab = -1;
	for (int k = 0; k < 2; k++) {
		const char *split = k == 0 ? o->train_split : o->test_split;
		if (k == 1 && hn_source_no_test(split))
			break;
		/* IDX folders name their test split t10k. */
		const char *prefix = !strcmp(split, "test") ? "t10k" : split;
		char ip[4200], lp[4200], why[SPRITE_ERR_MAX] = "";
		if (idx_find(path, prefix, "images-idx3-ubyte", ip, sizeof ip) < 0 ||
		    idx_find(path, prefix, "labels-idx1-ubyte", lp, sizeof lp) < 0)
			return sprite_fail(err, -ENOENT,
					   "%s: no %s-images-idx3-ubyte[.gz] and "
					   "%s-labels-idx1-ubyte[.gz] for split \"%s\"",
					   path, prefix, prefix, split);
		uint32_t h, w;
		uint8_t *l8 = NULL;
		int64_t n = sprite_idx_load_images(ip, &h, &w, &mem->px[k], why);
		if (n < 0)
			return sprite_fail(err, (int)n, "%s: %s", ip,
					   why[0] ? why : strerror((int)-n));
		int64_t nl = sprite_idx_load_labels(lp, &l8, why);
		if (nl < 0)
			return sprite_fail(err, (int)nl, "%s: %s", lp,
					   why[0] ? why : strerror((int)-nl));
		if (nl != n) {
			free(l8);
			return sprite_fail(err, -EINVAL,
					   "%s: %" PRId64 " labels for %" PRId64 " images", lp, nl,
					   n);
		}
		if (k == 0) {
			s->info.h = h;
			s->info.w = w;
			s->info.c = 1;
		} else if (h != s->info.h || w != s->info.w) {
			free(l8);
			return sprite_fail(err, -EINVAL,
					   "%s: %ux%u images, the training split has %ux%u", ip, h,
					   w, s->info.h, s->info.w);
		}
		mem->lab[k] = malloc((size_t)(n ? n : 1) * sizeof(uint16_t));
		if (!mem->lab[k]) {
			free(l8);
			return -ENOMEM;
		}
		for (int64_t i = 0; i < n; i++) {
			mem->lab[k][i] = l8[i];
			if (l8[i] > maxlab)
				maxlab = l8[i];
		}
		free(l8);
		s->info.full_count[k] = (uint64_t)n;
	}
	if (maxlab < 0)
		return sprite_fail(err, -EINVAL, "%s: no samples", path);
	int rc = hn_source_set_classes(s, (uint32_t)maxlab + 1, NULL);
	if (rc < 0)
		return rc;
	hn_source_default_order(s);
	snprintf(s->describe, sizeof s->describe, "IDX folder %s, loaded in memory", path);
	return 0;
}

const struct hn_source_ops hn_source_idx_ops = {
	.name = "idx",
	.open = idx_open,
	.read = hn_source_mem_read,
	.close = hn_source_mem_close,
};
