/*
 * test_perm - the shared sample order (perm.h).
 *
 * The order must be a valid permutation, a pure function of (seed, epoch),
 * different from one epoch to the next, and for the windowed variant keep
 * every window's samples to at most `window` whole sheets. Above all it must
 * be exactly the documented algorithm, since other trainers reproduce it
 * from docs/FORMAT.md: each case is compared with tests/perm_ref.py, an
 * independent Python implementation (run with /usr/bin/python3; the test
 * skips only when that interpreter is missing).
 *
 *   test_perm PATH/TO/perm_ref.py
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/perm.h"
#include "tests/check.h"

struct pcase {
	uint64_t seed, epoch;
	uint32_t n, sheet, window; /* window 0: full permutation */
};

static const struct pcase cases[] = {
	{1, 0, 10, 0, 0},
	{42, 3, 1000, 0, 0},
	{0xdeadbeefcafef00dull, 7, 1, 0, 0},
	{5, 1, 2, 0, 0},
	{123456789, 0, 60000, 0, 0},
	{42, 0, 1000, 64, 4},
	{7, 2, 1001, 100, 3},
	{9, 1, 50, 7, 1},
	{3, 4, 100, 1000, 2},	  /* one sheet larger than the data */
	{11, 5, 5000, 1024, 100}, /* window covers every sheet */
	{0, 9, 70000, 1024, 8},
	{2, 2, 1025, 1024, 1}, /* short last sheet of one sample */
};

static uint32_t *make(const struct pcase *c)
{
	uint32_t *p = malloc(((size_t)c->n + 1) * sizeof(*p));
	if (c->window)
		sprite_perm_windowed(c->seed, c->epoch, c->n, c->sheet, c->window, p);
	else
		sprite_perm(c->seed, c->epoch, c->n, p);
	return p;
}

static int valid(const uint32_t *p, uint32_t n)
{
	uint8_t *seen = calloc(n + 1, 1);
	int ok = 1;
	for (uint32_t i = 0; i < n && ok; i++) {
		if (p[i] >= n || seen[p[i]])
			ok = 0;
		else
			seen[p[i]] = 1;
	}
	free(seen);
	return ok;
}

/*
 * Every window holds whole sheets, at most `window` of them, contiguously,
 * and at most one sheet of each stratum (nwin consecutive sheets). A window
 * is seen to end when the samples of every sheet it has shown are out (a
 * window may so look like two: each still obeys the rules).
 */
static int windows_ok(const uint32_t *p, const struct pcase *c)
{
	uint32_t T = c->sheet > c->n ? c->n : c->sheet;
	uint32_t nsheets = (c->n + T - 1) / T;
	if (c->window >= nsheets)
		return 1; /* the full order */
	uint32_t nwin = (nsheets + c->window - 1) / c->window;
	uint32_t *win = malloc(nsheets * sizeof(*win));
	uint32_t *strat = malloc(nsheets * sizeof(*strat));
	for (uint32_t i = 0; i < nsheets; i++)
		win[i] = strat[i] = UINT32_MAX;
	uint32_t cur = 0, cur_sheets = 0;
	uint64_t left = 0;
	int ok = 1;
	for (uint32_t i = 0; i < c->n && ok; i++) {
		uint32_t sh = p[i] / T;
		if (win[sh] != cur) {
			if (win[sh] != UINT32_MAX || cur_sheets == c->window ||
			    strat[sh / nwin] == cur) {
				ok = 0;
				break;
			}
			win[sh] = cur;
			strat[sh / nwin] = cur;
			cur_sheets++;
			left += (sh + 1 == nsheets) ? c->n - sh * T : T;
		}
		if (--left == 0) {
			cur++;
			cur_sheets = 0;
		}
	}
	free(win);
	free(strat);
	return ok;
}

/*
 * Mean over the batches of an epoch of Pearson's chi-square of the batch's
 * class counts against the split's proportions, for a split stored in class
 * order (what a packed folder gives): k classes of n/k samples each.
 * Also the number of batches that hold a single class.
 */
static double batch_chi2(const uint32_t *p, uint32_t n, uint32_t k, uint32_t batch,
			 uint32_t *single)
{
	double sum = 0;
	uint32_t nb = 0, per = n / k;
	*single = 0;
	for (uint32_t b0 = 0; b0 + batch <= n; b0 += batch, nb++) {
		uint32_t cnt[64] = {0}, classes = 0;
		for (uint32_t i = b0; i < b0 + batch; i++)
			cnt[p[i] / per]++;
		double e = (double)batch / k, x = 0;
		for (uint32_t c = 0; c < k; c++) {
			x += (cnt[c] - e) * (cnt[c] - e) / e;
			classes += cnt[c] > 0;
		}
		sum += x;
		*single += classes == 1;
	}
	return sum / nb;
}

/*
 * The statistical test of mixing, over 5 epochs of splits stored in class
 * order (sheets of 100, batches of 64): with windows of 32 sheets (the
 * default for 4 MiB sheets), the mean per-batch chi-square of the windowed
 * order is at most 1.25 times the full shuffle's (whose expectation is
 * k - 1), for 5 and 10 classes; with windows of 8, no batch holds a single
 * class. A window's class shares are the split's to within 1/window: each
 * of its sheets comes from another stratum.
 */
static void check_mixing(void)
{
	const struct {
		uint32_t n, k, W;
	} cs[] = {{20000, 5, 32}, {60000, 10, 32}, {20000, 5, 8}, {60000, 10, 8}};
	const uint32_t T = 100, B = 64;
	for (size_t c = 0; c < sizeof(cs) / sizeof(cs[0]); c++) {
		uint32_t n = cs[c].n, k = cs[c].k, W = cs[c].W;
		uint32_t *p = malloc(n * sizeof(*p));
		double full = 0, win = 0;
		uint32_t single, singles = 0;
		for (uint32_t e = 0; e < 5; e++) {
			sprite_perm(42, e, n, p);
			full += batch_chi2(p, n, k, B, &single);
			CHECK(sprite_perm_windowed(42, e, n, T, W, p) == 0, "windowed order");
			win += batch_chi2(p, n, k, B, &single);
			singles += single;
		}
		if (W >= 32)
			CHECK(win <= 1.25 * full,
			      "%u classes, window %u: batches mix worse than a full shuffle: mean "
			      "chi2 %.2f against %.2f",
			      k, W, win / 5, full / 5);
		CHECK(singles == 0, "%u classes, window %u: %u batches hold a single class", k, W,
		      singles);
		printf("test_perm: %u classes, window %u: mean per-batch chi2 %.2f, full shuffle "
		       "%.2f\n",
		       k, W, win / 5, full / 5);
		free(p);
	}
}

/* Run the Python reference; returns malloc'd numbers, *count set, or NULL. */
static uint64_t *python(const char *script, const char *args, size_t *count)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s %s", script, args);
	FILE *f = popen(cmd, "r");
	if (!f)
		return NULL;
	size_t cap = 1024, n = 0;
	uint64_t *v = malloc(cap * sizeof(*v));
	unsigned long long x;
	while (fscanf(f, "%llu", &x) == 1) {
		if (n == cap)
			v = realloc(v, (cap *= 2) * sizeof(*v));
		v[n++] = x;
	}
	if (pclose(f) != 0) {
		free(v);
		return NULL;
	}
	*count = n;
	return v;
}

int main(int argc, char **argv)
{
	/* properties */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct pcase *c = &cases[i];
		uint32_t *a = make(c), *b = make(c);
		CHECK(valid(a, c->n), "case %zu: not a permutation", i);
		CHECK(!memcmp(a, b, (size_t)c->n * 4), "case %zu: not deterministic", i);
		if (c->n >= 10) {
			struct pcase d = *c;
			d.epoch++;
			uint32_t *e = make(&d);
			CHECK(memcmp(a, e, (size_t)c->n * 4) != 0, "case %zu: epochs equal", i);
			d = *c;
			d.epoch--;
			d.seed ^= 1;
			free(e);
			e = make(&d);
			CHECK(memcmp(a, e, (size_t)c->n * 4) != 0, "case %zu: seeds equal", i);
			free(e);
			uint32_t fixed = 0;
			for (uint32_t k = 0; k < c->n; k++)
				fixed += a[k] == k;
			CHECK(fixed < c->n / 2 + 1, "case %zu: %u of %u in place", i, fixed, c->n);
		}
		if (c->window)
			CHECK(windows_ok(a, c), "case %zu: a window mixes more than %u sheets", i,
			      c->window);
		free(a);
		free(b);
	}
	struct sprite_rng r;
	sprite_rng_init(&r, 1, 2);
	for (int i = 0; i < 10000; i++) {
		uint64_t k = (uint64_t)i % 97 + 1;
		CHECK(sprite_rng_below(&r, k) < k, "below");
		float u = sprite_rng_uniform(&r);
		CHECK(u >= 0.0f && u < 1.0f, "uniform %f", (double)u);
	}
	sprite_perm_windowed(1, 1, 0, 10, 2, NULL); /* n = 0 touches nothing */
	check_mixing();

	if (argc < 2 || access("/usr/bin/python3", X_OK) != 0) {
		if (failures)
			return 1;
		printf("test_perm: /usr/bin/python3 missing, reference comparison skipped\n");
		return 77;
	}
	/* raw generator */
	char args[256];
	size_t n;
	snprintf(args, sizeof(args), "rng 12345 678 64");
	uint64_t *ref = python(argv[1], args, &n);
	CHECK(ref && n == 64, "python rng failed");
	sprite_rng_init(&r, 12345, 678);
	for (size_t k = 0; ref && k < n; k++) {
		uint64_t v = sprite_rng_next(&r);
		CHECK(v == ref[k], "rng output %zu: %llu vs python %llu", k, (unsigned long long)v,
		      (unsigned long long)ref[k]);
	}
	free(ref);
	/* permutations */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct pcase *c = &cases[i];
		if (c->window)
			snprintf(args, sizeof(args), "windowed %llu %llu %u %u %u",
				 (unsigned long long)c->seed, (unsigned long long)c->epoch, c->n,
				 c->sheet, c->window);
		else
			snprintf(args, sizeof(args), "perm %llu %llu %u",
				 (unsigned long long)c->seed, (unsigned long long)c->epoch, c->n);
		ref = python(argv[1], args, &n);
		CHECK(ref && n == c->n, "case %zu (%s): python gave %zu numbers", i, args,
		      ref ? n : 0);
		if (!ref || n != c->n) {
			free(ref);
			continue;
		}
		uint32_t *a = make(c);
		for (uint32_t k = 0; k < c->n; k++)
			if (a[k] != ref[k]) {
				CHECK(0, "case %zu (%s): position %u is %u, python says %llu", i,
				      args, k, a[k], (unsigned long long)ref[k]);
				break;
			}
		free(a);
		free(ref);
	}
	if (failures) {
		fprintf(stderr, "test_perm: %d failures\n", failures);
		return 1;
	}
	printf("test_perm: ok (%zu cases match the Python reference)\n",
	       sizeof(cases) / sizeof(cases[0]));
	return 0;
}
