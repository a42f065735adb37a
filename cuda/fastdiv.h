/*
 * fastdiv.h - unsigned 32-bit division by a divisor fixed at launch, as a
 * multiply-high, an add and a shift (Granlund and Montgomery's "round-up"
 * method, Hacker's Delight 10-9): exact for dividends and divisors up to
 * INT32_MAX. The per-channel kernels (kernels.cu) find an element's channel
 * as (i / hw) % c; as 64-bit divisions those cost more than the element's
 * memory traffic, so batch normalisation ran at under half the GPU's memory
 * rate. Plain C for the host (tests/test_fastdiv.c checks it against '/'),
 * __umulhi on the device.
 */
#ifndef HN_CUDA_FASTDIV_H
#define HN_CUDA_FASTDIV_H

#include <stdint.h>

#ifdef __CUDACC__
#define HN_FD_FN __host__ __device__ static inline
#else
#define HN_FD_FN static inline
#endif

struct hn_divu {
	uint32_t d;	/* the divisor, 1 .. INT32_MAX */
	uint32_t m;	/* magic multiplier */
	uint32_t shift; /* ceil(log2(d)) */
};

/* The divider for d (1 <= d <= INT32_MAX; 0 is taken as 1). */
HN_FD_FN struct hn_divu hn_divu_make(uint32_t d)
{
	struct hn_divu r;
	uint32_t s = 0;
	if (d < 1)
		d = 1;
	while (s < 31 && ((uint32_t)1 << s) < d)
		s++;
	r.d = d;
	r.shift = s;
	r.m = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << s) - d)) / d + 1);
	return r;
}

/* n / v->d for n <= INT32_MAX. */
HN_FD_FN uint32_t hn_divu_div(const struct hn_divu *v, uint32_t n)
{
#ifdef __CUDA_ARCH__
	uint32_t t = __umulhi(n, v->m);
#else
	uint32_t t = (uint32_t)(((uint64_t)n * v->m) >> 32);
#endif
	return (t + n) >> v->shift;
}

#endif
