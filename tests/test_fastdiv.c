/*
 * test_fastdiv - the GPU kernels' division by a launch-time divisor
 * (cuda/fastdiv.h) against C's '/', on the host: every divisor up to
 * 70,000 and random ones up to INT32_MAX, each with the dividends where a
 * rounding error would show (multiples of the divisor and their neighbours,
 * the ends of the range) and random ones. The device computes the same
 * multiply-high with __umulhi.
 */
#include <stdint.h>
#include <stdio.h>

#include "cuda/fastdiv.h"
#include "tests/check.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next31(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 33); /* 0 .. 2^31 - 1 */
}

static long checked;

static void one(const struct hn_divu *v, uint32_t n)
{
	if (n > INT32_MAX)
		return;
	uint32_t got = hn_divu_div(v, n), want = n / v->d;
	checked++;
	if (got != want && failures < 20)
		FAIL("%u / %u: got %u, want %u", n, v->d, got, want);
	else if (got != want)
		failures++;
}

static void divisor(uint32_t d)
{
	struct hn_divu v = hn_divu_make(d);
	CHECK(v.d == d, "divider for %u holds %u", d, v.d);
	const uint32_t ends[] = {
		0, 1, 2, INT32_MAX, INT32_MAX - 1, INT32_MAX - d, (uint32_t)1 << 30};
	for (unsigned k = 0; k < sizeof ends / sizeof ends[0]; k++)
		one(&v, ends[k]);
	/* multiples of d and their neighbours, near 0 and near the top */
	for (uint32_t q = 0; q < 8; q++) {
		uint64_t m = (uint64_t)q * d;
		uint64_t t = (uint64_t)(INT32_MAX / d - q) * d;
		for (int e = -1; e <= 1; e++) {
			if ((int64_t)m + e >= 0)
				one(&v, (uint32_t)((int64_t)m + e));
			if ((int64_t)t + e >= 0)
				one(&v, (uint32_t)((int64_t)t + e));
		}
	}
	for (int k = 0; k < 32; k++) {
		uint32_t n = next31();
		one(&v, n);
		one(&v, n - n % d); /* a multiple */
		if (n % d)
			one(&v, n - n % d - 1);
	}
}

int main(void)
{
	for (uint32_t d = 1; d <= 70000; d++)
		divisor(d);
	for (int s = 17; s <= 31; s++) { /* powers of two and their neighbours */
		uint64_t p = (uint64_t)1 << s;
		if (p - 1 <= INT32_MAX)
			divisor((uint32_t)(p - 1));
		if (p <= INT32_MAX)
			divisor((uint32_t)p);
		if (p + 1 <= INT32_MAX)
			divisor((uint32_t)(p + 1));
	}
	for (int k = 0; k < 20000; k++)
		divisor(next31() | 1u);
	/* the kernels' use: the channel of element i of an n x c x hw tensor */
	const uint32_t shapes[][3] = {{256, 64, 112 * 112}, {256, 512, 49}, {7, 3, 1}, {1, 1, 1}};
	for (unsigned s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		uint32_t c = shapes[s][1], hw = shapes[s][2], total = shapes[s][0] * c * hw;
		struct hn_divu dhw = hn_divu_make(hw), dc = hn_divu_make(c);
		for (uint32_t i = 0; i < total; i += 1 + i % 977) {
			uint32_t q = hn_divu_div(&dhw, i), ch = q - hn_divu_div(&dc, q) * c;
			if (ch != (i / hw) % c && failures++ < 20)
				fprintf(stderr,
					"FAIL: element %u of %ux%ux%u: channel %u, want %u\n", i,
					shapes[s][0], c, hw, ch, (i / hw) % c);
			checked++;
		}
	}
	printf("%ld divisions checked, %d wrong\n", checked, failures);
	return failures ? 1 : 0;
}
