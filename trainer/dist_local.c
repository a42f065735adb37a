/*
 * dist_local.c - dist.h in a build without MPI: the world of one rank.
 * (A build with MPI compiles dist_mpi.c instead, which is the same world
 * of one rank when hntrain was not started by mpirun.)
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "trainer/dist.h"

static struct hn_dist_info info = {.size = 1, .local_size = 1, .impl = "local"};

int hn_dist_init(int *argc, char ***argv, char *err)
{
	(void)argc;
	(void)argv;
	(void)err;
	if (gethostname(info.host, sizeof info.host - 1) < 0)
		strcpy(info.host, "localhost");
	return 0;
}

const struct hn_dist_info *hn_dist(void)
{
	return &info;
}

const char *hn_dist_library(void)
{
	return "one process (built without MPI: mpirun would start independent runs)";
}

void hn_dist_finalize(void)
{
}

int hn_dist_agree(int ok, uint64_t hash, char *err)
{
	(void)hash;
	(void)err;
	return ok ? 0 : -EINVAL;
}

void hn_dist_stop_early(void)
{
}

int hn_dist_sum_floats(float *buf, size_t n, char *err)
{
	(void)buf;
	(void)n;
	(void)err;
	return 0;
}

int hn_dist_share_bytes(void *buf, size_t n, char *err)
{
	(void)buf;
	(void)n;
	(void)err;
	return 0;
}

int hn_dist_gather_doubles(const double *v, int n, double *out, char *err)
{
	(void)err;
	memcpy(out, v, (size_t)n * sizeof *v);
	return 0;
}
