/*
 * perm.h - the one seeded sample order used by every medium.
 *
 * Order belongs to a seed, not to the medium: hntrain (reading tmpfs, SSD,
 * a store or a mount) and spritefs (building epoch views) both call these, so
 * the same (seed, epoch) gives the same sample order everywhere.
 *
 * Generator: splitmix64 with state s = seed ^ (epoch * 0xD1B54A32D192ED03);
 *   next(): s += 0x9E3779B97F4A7C15; z = s;
 *           z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
 *           z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
 *           return z ^ (z >> 31);
 * Bounded draw in [0, k): (next() * k) >> 64 (128-bit product).
 * Full shuffle: perm[i] = i; for i = n-1 down to 1: j = draw(i+1); swap(perm[i], perm[j]).
 * Windowed order (data larger than memory): S sheets of sheet_tiles samples,
 * nwin = ceil(S / window) windows. Shuffle the window numbers [0, nwin);
 * then cut the sheets into strata of nwin consecutive sheets and shuffle
 * each stratum's list of sheets (in stratum order, the generator continuing);
 * window w takes the w-th sheet of every stratum that has one. For each
 * window in the shuffled order, list its samples (sheet by sheet in stratum
 * order, slots in order) and Fisher-Yates that list, the generator
 * continuing. A window >= S is the full order.
 * docs/FORMAT.md has a Python reference.
 */
#ifndef SPRITE_PERM_H
#define SPRITE_PERM_H

#include <stdint.h>

struct sprite_rng {
	uint64_t s;
};

void sprite_rng_init(struct sprite_rng *r, uint64_t seed, uint64_t epoch);
uint64_t sprite_rng_next(struct sprite_rng *r);
uint64_t sprite_rng_below(struct sprite_rng *r, uint64_t k); /* k >= 1 */
float sprite_rng_uniform(struct sprite_rng *r);		     /* [0, 1), 24-bit */

/* perm[0..n) = sample order for (seed, epoch). */
void sprite_perm(uint64_t seed, uint64_t epoch, uint32_t n, uint32_t *perm);

/*
 * Windowed order: samples live in sheets of sheet_tiles (the last may be
 * short); each of ceil(S / window) windows holds at most `window` sheets, one
 * from each stratum of the split, and is served whole before the next, so a
 * reader needs two windows in memory at a time. window >= the number of
 * sheets gives the full order. perm must hold n entries. Returns 0, or
 * -ENOMEM (perm untouched) when the strata cannot be allocated.
 */
int sprite_perm_windowed(uint64_t seed, uint64_t epoch, uint32_t n, uint32_t sheet_tiles,
			 uint32_t window, uint32_t *perm);

/*
 * A data set's order: the order is part of the data set (recorded in a
 * store's header as order_window, or given by this default for a source that
 * has no store), never of a cache budget or a medium.
 *
 * sprite_order_window(): the default window, in sheets, for sheets of
 * sheet_tiles tiles of tile_bytes bytes: SPRITE_ORDER_WINDOW_BYTES of decoded
 * tiles, clamped to [SPRITE_ORDER_WINDOW_MIN, SPRITE_ORDER_WINDOW_MAX]. A
 * split of at most that many sheets gets the full order; a larger one the
 * windowed order.
 *
 * sprite_order(): window 0 is the full order, else sprite_perm_windowed().
 * Returns 0 or -ENOMEM.
 */
#define SPRITE_ORDER_WINDOW_BYTES (128ull << 20)
#define SPRITE_ORDER_WINDOW_MIN	  2u
#define SPRITE_ORDER_WINDOW_MAX	  65536u
uint32_t sprite_order_window(uint32_t sheet_tiles, uint64_t tile_bytes);
int sprite_order(uint64_t seed, uint64_t epoch, uint32_t n, uint32_t sheet_tiles, uint32_t window,
		 uint32_t *perm);

#endif
