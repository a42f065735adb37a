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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/augment.h"

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
		} else if (!strncmp(t, "rrc:", 4)) {
			char *end;
			errno = 0;
			double v = strtod(t + 4, &end);
			double s4 = floor(v * 10000 + 0.5);
			if (end == t + 4 || *end || errno || !(v > 0 && v <= 1) ||
			    fabs(v * 10000 - s4) > 1e-6) {
				snprintf(err, HN_ERR_MAX,
					 "rrc:S needs a smallest area S in (0, 1] with at most 4 "
					 "decimals, got \"%s\"",
					 t);
				return -EINVAL;
			}
			a->rrc = (uint32_t)s4;
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
				 "unknown augmentation \"%s\" (expected rrc:S, crop:P or flip)", t);
			return -EINVAL;
		}
	}
	if (!a->rrc && !a->crop && !a->flip) {
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
	if (a->rrc)
		k = snprintf(out, n, "rrc:%g", a->rrc / 10000.0);
	if (a->crop && k >= 0 && (size_t)k < n)
		k += snprintf(out + k, n - (size_t)k, "%scrop:%u", k ? "," : "", a->crop);
	if (a->flip && k >= 0 && (size_t)k < n)
		snprintf(out + k, n - (size_t)k, "%sflip", k ? "," : "");
}

/* floor(sqrt(v)), exactly */
static uint64_t isqrt(uint64_t v)
{
	uint64_t r = (uint64_t)sqrt((double)v);
	while (r * r > v)
		r--;
	while ((r + 1) * (r + 1) <= v)
		r++;
	return r;
}

/*
 * rrc: a window of area fraction A/2^16 (A uniform from the smallest area
 * S up to 1) and aspect Q/2^16 (uniform in [3/4, 4/3]) relative to the
 * tile's, at a uniform offset, scaled back to the tile by nearest
 * neighbour. Integers only, so that another trainer gets the same bytes.
 */
static void rrc_tile(uint32_t s4, uint64_t key, uint32_t h, uint32_t w, uint32_t c, uint8_t *tile,
		     uint8_t *tmp)
{
	uint64_t s16 = (uint64_t)s4 * 65536 / 10000;
	uint64_t A = s16 + (((65536 - s16) * (splitmix64(key + 3) >> 48)) >> 16);
	uint64_t Q = 49152 + (((87381 - 49152) * (splitmix64(key + 4) >> 48)) >> 16);
	uint64_t ch = isqrt((((uint64_t)h * h * A) >> 16) * Q >> 16);
	uint64_t cw = isqrt(((((uint64_t)w * w * A) >> 16) << 16) / Q);
	ch = ch < 1 ? 1 : ch > h ? h : ch;
	cw = cw < 1 ? 1 : cw > w ? w : cw;
	uint64_t y0 = splitmix64(key + 5) % (h - ch + 1);
	uint64_t x0 = splitmix64(key + 6) % (w - cw + 1);
	for (uint64_t y = 0; y < h; y++) {
		const uint8_t *src = tile + ((y0 + y * ch / h) * w) * c;
		uint8_t *dst = tmp + y * w * c;
		for (uint64_t x = 0; x < w; x++)
			memcpy(dst + x * c, src + (x0 + x * cw / w) * c, c);
	}
	memcpy(tile, tmp, (size_t)h * w * c);
}

void hn_augment_tile(const struct hn_augment *a, uint64_t seed, uint64_t epoch, uint64_t pos,
		     uint32_t h, uint32_t w, uint32_t c, uint8_t *tile, uint8_t *tmp)
{
	uint64_t key = splitmix64(splitmix64(splitmix64(seed ^ AUG_SALT) ^ epoch) ^ pos);
	size_t row = (size_t)w * c;
	if (a->rrc)
		rrc_tile(a->rrc, key, h, w, c, tile, tmp);
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
