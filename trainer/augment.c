/*
 * augment.c - --augment: seeded augmentation of the uint8 training tiles,
 * applied by the loader threads after a batch is read.
 *
 * Every random draw is a pure function of (seed, epoch, position of the
 * sample in the epoch's order) through splitmix64, never of the thread or
 * the medium, so the trained weights stay bit-identical across sources and
 * --loaders. docs/HNTRAIN.md gives the arithmetic for other trainers.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/app.h"

#define AUG_SALT 0x6175676d656e7400ull /* "augment\0": apart from other seeded streams */

static uint64_t splitmix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

int hn_augment_parse(const char *s, struct hn_augment *a, char *err)
{
	memset(a, 0, sizeof *a);
	char buf[256];
	if (strlen(s) >= sizeof buf) {
		snprintf(err, HN_ERR_MAX, "too long");
		return -EINVAL;
	}
	snprintf(buf, sizeof buf, "%s", s);
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (!strcmp(t, "flip")) {
			a->flip = 1;
		} else if (!strncmp(t, "crop:", 5)) {
			char *end;
			errno = 0;
			unsigned long p = strtoul(t + 5, &end, 10);
			if (t[5] < '0' || t[5] > '9' || *end || errno || p < 1 || p > 4096) {
				snprintf(err, HN_ERR_MAX,
					 "crop:P needs a padding P from 1 to 4096, got \"%s\"", t);
				return -EINVAL;
			}
			a->crop = (uint32_t)p;
		} else {
			snprintf(err, HN_ERR_MAX,
				 "unknown augmentation \"%s\" (expected crop:P or flip)", t);
			return -EINVAL;
		}
	}
	if (!a->crop && !a->flip) {
		snprintf(err, HN_ERR_MAX, "expected a list such as crop:4,flip");
		return -EINVAL;
	}
	hn_augment_format(a, a->spec, sizeof a->spec);
	return 0;
}

void hn_augment_format(const struct hn_augment *a, char *out, size_t n)
{
	int k = 0;
	out[0] = 0;
	if (a->crop)
		k = snprintf(out, n, "crop:%u", a->crop);
	if (a->flip && k >= 0 && (size_t)k < n)
		snprintf(out + k, n - (size_t)k, "%sflip", k ? "," : "");
}

void hn_augment_tile(const struct hn_augment *a, uint64_t seed, uint64_t epoch, uint64_t pos,
		     uint32_t h, uint32_t w, uint32_t c, uint8_t *tile, uint8_t *tmp)
{
	uint64_t key = splitmix64(splitmix64(splitmix64(seed ^ AUG_SALT) ^ epoch) ^ pos);
	size_t row = (size_t)w * c;
	if (a->crop) {
		uint64_t span = 2 * (uint64_t)a->crop + 1;
		long dy = (long)(splitmix64(key + 0) % span) - (long)a->crop;
		long dx = (long)(splitmix64(key + 1) % span) - (long)a->crop;
		memset(tmp, 0, (size_t)h * row);
		/* out[y][x] = in[y + dy][x + dx], zero outside the tile */
		long x0 = dx < 0 ? -dx : 0, x1 = dx > 0 ? (long)w - dx : (long)w;
		for (long y = 0; y < (long)h && x1 > x0; y++) {
			long sy = y + dy;
			if (sy < 0 || sy >= (long)h)
				continue;
			memcpy(tmp + (size_t)y * row + (size_t)x0 * c,
			       tile + (size_t)sy * row + (size_t)(x0 + dx) * c,
			       (size_t)(x1 - x0) * c);
		}
		memcpy(tile, tmp, (size_t)h * row);
	}
	if (a->flip && (splitmix64(key + 2) >> 63))
		for (uint32_t y = 0; y < h; y++) {
			uint8_t *r = tile + (size_t)y * row;
			for (uint32_t x = 0; x < w / 2; x++)
				for (uint32_t k = 0; k < c; k++) {
					uint8_t v = r[(size_t)x * c + k];
					r[(size_t)x * c + k] = r[(size_t)(w - 1 - x) * c + k];
					r[(size_t)(w - 1 - x) * c + k] = v;
				}
		}
}
