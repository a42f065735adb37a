/*
 * checksum_avx2.c - XXH3-64 built for AVX2, chosen at run time.
 *
 * Debian's libxxhash is compiled for the x86-64 baseline (SSE2). The daemon
 * checksums every byte it reads from the store and every byte it decodes, so
 * this file compiles xxHash's own implementation (its header, in inline mode)
 * with -mavx2; util.c calls it only when the CPU has AVX2. XXH3 gives the
 * same hash whichever vector path computes it.
 */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/util.h"

uint64_t sprite_checksum_avx2(const void *p, size_t len)
{
	return XXH3_64bits(p, len);
}
