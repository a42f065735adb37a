/*
 * perm.c - the seeded sample order shared by hntrain and spritefs (algorithm
 * in perm.h, Python reference in docs/FORMAT.md and tests/perm_ref.py).
 *
 * splitmix64 is used because it is tiny, fully specified by a few lines that
 * any language reproduces bit for bit, and good enough for shuffling. The
 * bounded draw is Lemire's multiply-shift without the rejection step: its
 * bias (k / 2^64) is far below anything a training run could notice and it
 * keeps the reference implementation a one-liner.
 *
 * Neither permutation allocates: the windowed one keeps the shuffled sheet
 * order in the tail of perm while it fills perm from the front (see below).
 */
#include "common/perm.h"

void sprite_rng_init(struct sprite_rng *r, uint64_t seed, uint64_t epoch)
{
	r->s = seed ^ (epoch * 0xD1B54A32D192ED03ull);
}

uint64_t sprite_rng_next(struct sprite_rng *r)
{
	uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

uint64_t sprite_rng_below(struct sprite_rng *r, uint64_t k)
{
	return (uint64_t)(((unsigned __int128)sprite_rng_next(r) * k) >> 64);
}

float sprite_rng_uniform(struct sprite_rng *r)
{
	return (float)(sprite_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

/* Fisher-Yates from the top, as perm.h specifies. */
static void shuffle(struct sprite_rng *r, uint32_t *a, uint32_t n)
{
	for (uint32_t i = n; i-- > 1;) {
		uint32_t j = (uint32_t)sprite_rng_below(r, (uint64_t)i + 1);
		uint32_t t = a[i];
		a[i] = a[j];
		a[j] = t;
	}
}

void sprite_perm(uint64_t seed, uint64_t epoch, uint32_t n, uint32_t *perm)
{
	struct sprite_rng r;
	sprite_rng_init(&r, seed, epoch);
	for (uint32_t i = 0; i < n; i++)
		perm[i] = i;
	shuffle(&r, perm, n);
}

/*
 * The shuffled sheet order lives in perm[n - nsheets .. n). Samples are then
 * written from the front: by the time sheet entry k is read, at most
 * (k) * sheet_tiles outputs were written, and since only the last sheet may
 * be short, (k) * sheet_tiles <= n - nsheets + k for every k < nsheets, so
 * an entry is always read before its slot is overwritten.
 */
void sprite_perm_windowed(uint64_t seed, uint64_t epoch, uint32_t n, uint32_t sheet_tiles,
			  uint32_t window, uint32_t *perm)
{
	struct sprite_rng r;
	if (n == 0)
		return;
	if (sheet_tiles == 0 || sheet_tiles > n)
		sheet_tiles = n;
	if (window == 0)
		window = 1;
	uint32_t nsheets = (uint32_t)(((uint64_t)n + sheet_tiles - 1) / sheet_tiles);
	uint32_t *order = perm + (n - nsheets);

	sprite_rng_init(&r, seed, epoch);
	for (uint32_t i = 0; i < nsheets; i++)
		order[i] = i;
	shuffle(&r, order, nsheets);

	uint32_t out = 0;
	for (uint32_t k0 = 0; k0 < nsheets; k0 += window) {
		uint32_t k1 = nsheets - k0 < window ? nsheets : k0 + window;
		uint32_t start = out;
		for (uint32_t k = k0; k < k1; k++) {
			uint32_t sh = order[k];
			uint64_t first = (uint64_t)sh * sheet_tiles;
			uint64_t end = first + sheet_tiles < n ? first + sheet_tiles : n;
			for (uint64_t x = first; x < end; x++)
				perm[out++] = (uint32_t)x;
		}
		shuffle(&r, perm + start, out - start);
	}
}
