/*
 * test_blas_core - the OpenBLAS core check: which of OpenBLAS's choices are
 * fixed, and to what. (hntrain_bad_input runs the check for real: a core
 * forced with OPENBLAS_CORETYPE is kept and warned about.)
 */
#include <stdio.h>
#include <string.h>

#include "trainer/backend.h"

static int same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

int main(void)
{
	static const struct {
		const char *chosen;
		int avx2, avx512;
		const char *want;
	} cases[] = {
		{"Prescott", 1, 1, "SkylakeX"}, /* a Xeon newer than the table */
		{"Prescott", 1, 0, "Haswell"},	{"Sandybridge", 1, 0, "Haswell"},
		{"Nehalem", 1, 1, "SkylakeX"},	{"prescott", 1, 0, "Haswell"},
		{"Prescott", 0, 0, NULL}, /* an old CPU: the generic kernels are its best */
		{"Haswell", 1, 1, NULL},  /* a choice with AVX2 FMA is left alone */
		{"SkylakeX", 1, 1, NULL},	{"Zen", 1, 0, NULL},
		{"CooperLake", 1, 1, NULL},	{NULL, 1, 1, NULL},
	};
	int bad = 0;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *got =
			hn_blas_core_want(cases[i].chosen, cases[i].avx2, cases[i].avx512);
		if (!same(got, cases[i].want)) {
			fprintf(stderr, "FAIL: %s avx2 %d avx512 %d: got %s, want %s\n",
				cases[i].chosen ? cases[i].chosen : "(null)", cases[i].avx2,
				cases[i].avx512, got ? got : "(null)",
				cases[i].want ? cases[i].want : "(null)");
			bad++;
		}
	}
	if (bad)
		return 1;
	printf("PASS\n");
	return 0;
}
