/*
 * blas_core.c - check the kernels OpenBLAS chose against what the CPU can do.
 *
 * Debian's OpenBLAS is built with DYNAMIC_ARCH: as it loads, it matches the
 * CPU's model against its table and picks a kernel set. A CPU newer than the
 * table (a recent Xeon) gets the generic "Prescott" kernels, SSE3 only:
 * hntrain's cnn ran at 15.1k samples/s on 16 cores with them, 20.8k with
 * OPENBLAS_CORETYPE=SkylakeX. OpenBLAS reads that variable only while it
 * loads, so the fix is to set it and execute hntrain again, once.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer/backend.h"

/* Kernel sets without AVX2 FMA that OpenBLAS falls back to. */
static const char *const weak[] = {"Prescott",	 "Core2",     "Penryn",	     "Dunnington",
				   "Nehalem",	 "Atom",      "Sandybridge", "Katmai",
				   "Coppermine", "Northwood", "Banias",	     "Unknown"};

const char *hn_blas_core_want(const char *chosen, int avx2, int avx512)
{
	if (!chosen || !avx2)
		return NULL;
	for (size_t i = 0; i < sizeof weak / sizeof weak[0]; i++)
		if (!strcasecmp(chosen, weak[i]))
			return avx512 ? "SkylakeX" : "Haswell";
	return NULL;
}

#define REEXEC_ENV "HNTRAIN_BLAS_REEXEC"

/*
 * The kernel set OpenBLAS had chosen before hntrain executed itself again
 * with OPENBLAS_CORETYPE ("" where it did not): the backend line and
 * --version say so, rather than a note on stderr at every start on such a
 * CPU, where it read as a fault to scripts that watch stderr.
 */
static char fell_back[32];

const char *hn_blas_core_fell_back(void)
{
	return fell_back[0] ? fell_back : NULL;
}

void hn_blas_core_check(char **argv)
{
	__builtin_cpu_init();
	int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
	const char *chosen = openblas_get_corename();
	const char *want = hn_blas_core_want(chosen, avx2, avx512);
	const char *again = getenv(REEXEC_ENV);
	if (!want) {
		if (again) {
			snprintf(fell_back, sizeof fell_back, "%s", again);
			unsetenv(REEXEC_ENV);
		}
		return;
	}
	const char *user = getenv("OPENBLAS_CORETYPE");
	if (user && *user && !again) {
		fprintf(stderr,
			"hntrain: warning: OPENBLAS_CORETYPE=%s makes OpenBLAS use its %s "
			"kernels; this CPU has %s: OPENBLAS_CORETYPE=%s is faster\n",
			user, chosen, avx512 ? "AVX-512" : "AVX2", want);
		return;
	}
	if (!again) {
		setenv("OPENBLAS_CORETYPE", want, 1);
		setenv(REEXEC_ENV, chosen, 1);
		execv("/proc/self/exe", argv);
		/* exec failed: carry on with the slow kernels */
		unsetenv("OPENBLAS_CORETYPE");
	}
	unsetenv(REEXEC_ENV);
	fprintf(stderr,
		"hntrain: warning: OpenBLAS uses its generic %s kernels on a CPU with "
		"%s; set OPENBLAS_CORETYPE=%s for its fast ones\n",
		chosen, avx512 ? "AVX-512" : "AVX2", want);
}
