/*
 * perm.c - the seeded sample order shared by hntrain and spritefs (algorithm
 * in perm.h, Python reference in docs/FORMAT.md and mount/spritefs/__init__.py).
 *
 * splitmix64 is used because it is tiny, fully specified by a few lines that
 * any language reproduces bit for bit, and good enough for shuffling. The
 * bounded draw is Lemire's multiply-shift without the rejection step: its
 * bias (k / 2^64) is far below anything a training run could notice and it
 * keeps the reference implementation a one-liner.
 *
 * The full order does not allocate; the windowed one allocates one word per
 * sheet (the strata shuffles) and returns -ENOMEM when it cannot.
 */
#include <errno.h>
#include <stdlib.h>

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
 * Stratified windows: stratum j holds sheets [j*nwin, (j+1)*nwin), so a
 * store written in class order (every packed folder) still gives windows that
 * each draw one sheet from every part of the split, hence every class. The
 * strata shuffles and the window order take S + nwin words, allocated here.
 */
int sprite_perm_windowed(uint64_t seed, uint64_t epoch, uint32_t n, uint32_t sheet_tiles,
			 uint32_t window, uint32_t *perm)
{
	struct sprite_rng r;
	if (n == 0)
		return 0;
	if (sheet_tiles == 0 || sheet_tiles > n)
		sheet_tiles = n;
	if (window == 0)
		window = 1;
	uint32_t nsheets = (uint32_t)(((uint64_t)n + sheet_tiles - 1) / sheet_tiles);
	if (window >= nsheets) {
		sprite_perm(seed, epoch, n, perm);
		return 0;
	}
	uint32_t nwin = (uint32_t)(((uint64_t)nsheets + window - 1) / window);
	uint32_t *worder = malloc(((size_t)nwin + nsheets) * sizeof(*worder));
	if (!worder)
		return -ENOMEM;
	uint32_t *member = worder + nwin; /* member[j*nwin + w]: stratum j's sheet for window w */

	sprite_rng_init(&r, seed, epoch);
	for (uint32_t w = 0; w < nwin; w++)
		worder[w] = w;
	shuffle(&r, worder, nwin);
	for (uint32_t first = 0; first < nsheets; first += nwin) {
		uint32_t len = nsheets - first < nwin ? nsheets - first : nwin;
		for (uint32_t k = 0; k < len; k++)
			member[first + k] = first + k;
		shuffle(&r, member + first, len);
	}

	uint32_t out = 0;
	for (uint32_t k = 0; k < nwin; k++) {
		uint32_t w = worder[k], start = out;
		for (uint32_t first = 0; first < nsheets; first += nwin) {
			if (first + w >= nsheets)
				break; /* the last stratum is short */
			uint64_t lo = (uint64_t)member[first + w] * sheet_tiles;
			uint64_t hi = lo + sheet_tiles < n ? lo + sheet_tiles : n;
			for (uint64_t x = lo; x < hi; x++)
				perm[out++] = (uint32_t)x;
		}
		shuffle(&r, perm + start, out - start);
	}
	free(worder);
	return 0;
}

uint32_t sprite_order_window(uint32_t sheet_tiles, uint64_t tile_bytes)
{
	uint64_t sheet = (uint64_t)(sheet_tiles ? sheet_tiles : 1) * (tile_bytes ? tile_bytes : 1);
	uint64_t w = SPRITE_ORDER_WINDOW_BYTES / sheet;
	if (w < SPRITE_ORDER_WINDOW_MIN)
		w = SPRITE_ORDER_WINDOW_MIN;
	if (w > SPRITE_ORDER_WINDOW_MAX)
		w = SPRITE_ORDER_WINDOW_MAX;
	return (uint32_t)w;
}

int sprite_order(uint64_t seed, uint64_t epoch, uint32_t n, uint32_t sheet_tiles, uint32_t window,
		 uint32_t *perm)
{
	if (window == 0) {
		sprite_perm(seed, epoch, n, perm);
		return 0;
	}
	return sprite_perm_windowed(seed, epoch, n, sheet_tiles, window, perm);
}
