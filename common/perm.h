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
 * Windowed shuffle (data larger than memory): shuffle the sheet order with
 * the same generator, then walk it in windows of `window` sheets; for each
 * window list its samples (sheet by sheet in the shuffled order, slots in
 * order) and Fisher-Yates that list with the same generator continuing.
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
 * short); window = sheets shuffled together (window >= nsheets gives a
 * quasi-full shuffle of sheet order then samples).
 */
void sprite_perm_windowed(uint64_t seed, uint64_t epoch, uint32_t n, uint32_t sheet_tiles,
			  uint32_t window, uint32_t *perm);

#endif
