/*
 * dist_mpi.c - dist.h over MPI (Open MPI), built when meson finds it.
 *
 * MPI is joined only when mpirun started this process (its environment
 * says so); otherwise this is the world of one rank, as dist_local.c, and
 * hntrain starts as fast as without MPI.
 *
 * The gradient sum is a reduce-scatter then an allgather, written with
 * point-to-point messages rather than MPI_Allreduce, for two reasons: the
 * order of the additions is ours (rank order, as one process folds its
 * threads' gradients), so the result does not depend on the MPI library's
 * algorithm; and each message has one peer, so a wait that times out can
 * name the rank that did not send. Errors return (MPI_ERRORS_RETURN)
 * instead of aborting, and every wait polls against a deadline.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "trainer/backend.h"
#include "trainer/dist.h"

#define TAG_SCATTER 0x4801
#define TAG_GATHER  0x4802
#define TAG_COUNTS  0x4803
#define TAG_SHARE   0x4804
#define HOST_MAX    48

static struct hn_dist_info info = {.size = 1, .local_size = 1, .impl = "local"};
static int active;
static int compared; /* hn_dist_agree has run */
static double timeout_s = 600;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int env_int(const char *name, int def)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : def;
}

static int mpi_fail(char *err, int code, const char *what)
{
	char s[MPI_MAX_ERROR_STRING];
	int len = 0;
	if (MPI_Error_string(code, s, &len) != MPI_SUCCESS)
		snprintf(s, sizeof s, "MPI error %d", code);
	snprintf(err, HN_ERR_MAX, "%s: %.120s (a rank may have died)", what, s);
	return -EIO;
}

int hn_dist_init(int *argc, char ***argv, char *err)
{
	if (gethostname(info.host, sizeof info.host - 1) < 0)
		strcpy(info.host, "localhost");
	if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK"))
		return 0;
	const char *t = getenv("HNTRAIN_DIST_TIMEOUT");
	if (t && *t) {
		char *end;
		timeout_s = strtod(t, &end);
		if (*end || !(timeout_s > 0)) {
			snprintf(err, HN_ERR_MAX,
				 "HNTRAIN_DIST_TIMEOUT=%s: not a number of seconds > 0", t);
			return -EINVAL;
		}
	}
	int provided, rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
	if (rc != MPI_SUCCESS)
		return mpi_fail(err, rc, "MPI_Init");
	active = 1;
	info.impl = "mpi";
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &info.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &info.size);
	info.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
	info.local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
	if (info.local_size < 1 || info.local_rank < 0 || info.local_rank >= info.local_size) {
		info.local_rank = 0;
		info.local_size = 1;
	}
	return 0;
}

const struct hn_dist_info *hn_dist(void)
{
	return &info;
}

static int wait_all(int n, MPI_Request *req, const int *peer, const char *what, char *err);

const char *hn_dist_library(void)
{
	static char lib[MPI_MAX_LIBRARY_VERSION_STRING + 32];
	char v[MPI_MAX_LIBRARY_VERSION_STRING] = "";
	int len = 0;
	MPI_Get_library_version(v, &len); /* callable before MPI_Init */
	v[strcspn(v, ",\n")] = 0;
	snprintf(lib, sizeof lib, "MPI, %s (mpirun -np N)", v);
	return lib;
}

void hn_dist_finalize(void)
{
	char err[HN_ERR_MAX];
	MPI_Request req;
	if (!active)
		return;
	if (MPI_Ibarrier(MPI_COMM_WORLD, &req) == MPI_SUCCESS &&
	    wait_all(1, &req, NULL, "leaving", err) < 0)
		fprintf(stderr, "hntrain: rank %d on %s: %s\n", info.rank, info.host, err);
	MPI_Finalize();
	active = 0;
}

/*
 * Wait for the n requests; peer[i] is the rank request i talks to. Polls
 * (yielding, then napping, so a waiting rank leaves its core to the loader
 * threads) until all are done or the deadline passes, then names the first
 * peer not heard from.
 */
static int wait_all(int n, MPI_Request *req, const int *peer, const char *what, char *err)
{
	double t0 = now();
	long polls = 0;
	for (;;) {
		int left = 0;
		for (int i = 0; i < n; i++) {
			if (req[i] == MPI_REQUEST_NULL)
				continue;
			int flag = 0, rc = MPI_Test(&req[i], &flag, MPI_STATUS_IGNORE);
			if (rc != MPI_SUCCESS)
				return mpi_fail(err, rc, what);
			left += !flag;
		}
		if (!left)
			return 0;
		if (now() - t0 > timeout_s) {
			int who = -1;
			for (int i = 0; i < n && who < 0; i++)
				if (req[i] != MPI_REQUEST_NULL)
					who = peer ? peer[i] : -1;
			if (who >= 0)
				snprintf(err, HN_ERR_MAX,
					 "%s: no answer from rank %d in %g s "
					 "(HNTRAIN_DIST_TIMEOUT); it died or hangs",
					 what, who, timeout_s);
			else
				snprintf(err, HN_ERR_MAX,
					 "%s: not every rank answered in %g s "
					 "(HNTRAIN_DIST_TIMEOUT); one died or hangs",
					 what, timeout_s);
			return -ETIMEDOUT;
		}
		if (++polls < 2000) {
			sched_yield();
		} else {
			struct timespec nap = {0, 50000};
			nanosleep(&nap, NULL);
		}
	}
}

struct hello {
	uint64_t hash;
	int32_t ok, pad;
	char host[HOST_MAX];
};

int hn_dist_agree(int ok, uint64_t hash, char *err)
{
	compared = 1;
	if (!active)
		return ok ? 0 : -EINVAL;
	struct hello me = {.hash = hash, .ok = ok}, *all = calloc((size_t)info.size, sizeof me);
	if (!all) {
		snprintf(err, HN_ERR_MAX, "out of memory");
		return -ENOMEM;
	}
	snprintf(me.host, sizeof me.host, "%.47s", info.host);
	MPI_Request req;
	int rc = MPI_Iallgather(&me, sizeof me, MPI_BYTE, all, sizeof me, MPI_BYTE, MPI_COMM_WORLD,
				&req);
	if (rc != MPI_SUCCESS) {
		free(all);
		return mpi_fail(err, rc, "comparing the ranks' settings");
	}
	rc = wait_all(1, &req, NULL, "comparing the ranks' settings", err);
	for (int r = 0; rc == 0 && r < info.size; r++) {
		all[r].host[HOST_MAX - 1] = 0;
		if (all[r].ok)
			continue;
		snprintf(err, HN_ERR_MAX,
			 "rank %d on %s could not start (its message above); every rank stops", r,
			 all[r].host);
		rc = -EINVAL;
	}
	for (int r = 1; rc == 0 && r < info.size; r++) {
		if (all[r].hash == all[0].hash)
			continue;
		snprintf(err, HN_ERR_MAX,
			 "rank %d on %.32s has other settings or data than rank 0 on %.32s (hash "
			 "%016llx, not %016llx): every rank needs the same data, model, seed and "
			 "batch",
			 r, all[r].host, all[0].host, (unsigned long long)all[r].hash,
			 (unsigned long long)all[0].hash);
		rc = -EINVAL;
	}
	free(all);
	return rc;
}

void hn_dist_stop_early(void)
{
	char err[HN_ERR_MAX];
	if (!active || compared)
		return;
	if (hn_dist_agree(0, 0, err) == -EINVAL)
		hn_dist_finalize();
}

/* Rank s owns parameters [lo(s), lo(s + 1)). */
static size_t slice_lo(size_t n, int s)
{
	return (size_t)((unsigned __int128)n * (unsigned)s / (unsigned)info.size);
}

int hn_dist_sum_floats(float *buf, size_t n, char *err)
{
	if (!active || info.size == 1)
		return 0;
	const int N = info.size, me = info.rank;
	size_t lo = slice_lo(n, me), len = slice_lo(n, me + 1) - lo;
	float *parts = malloc(((size_t)N * len + 1) * sizeof *parts);
	MPI_Request *req = malloc(2 * (size_t)N * sizeof *req);
	int *peer = calloc(2 * (size_t)N, sizeof *peer);
	int rc = parts && req && peer ? 0 : -ENOMEM, k = 0;
	if (rc < 0)
		snprintf(err, HN_ERR_MAX, "out of memory for the gradient sum");
	/* Reduce-scatter: rank q's part of my slice into parts[q], mine sent to its owner. */
	for (int q = 0; rc == 0 && q < N; q++) {
		size_t qlo = slice_lo(n, q), qlen = slice_lo(n, q + 1) - qlo;
		if (q == me) {
			memcpy(parts + (size_t)q * len, buf + lo, len * sizeof *buf);
			continue;
		}
		peer[k] = q;
		int c = MPI_Irecv(parts + (size_t)q * len, (int)len, MPI_FLOAT, q, TAG_SCATTER,
				  MPI_COMM_WORLD, &req[k++]);
		if (c == MPI_SUCCESS) {
			peer[k] = q;
			c = MPI_Isend(buf + qlo, (int)qlen, MPI_FLOAT, q, TAG_SCATTER,
				      MPI_COMM_WORLD, &req[k++]);
		}
		if (c != MPI_SUCCESS)
			rc = mpi_fail(err, c, "summing the gradients");
	}
	if (rc == 0)
		rc = wait_all(k, req, peer, "summing the gradients", err);
	if (rc == 0) {
		/* In rank order, the additions the cpu backend makes folding its threads'. */
		float *restrict acc = buf + lo;
		memcpy(acc, parts, len * sizeof *acc);
		for (int q = 1; q < N; q++) {
			const float *restrict p = parts + (size_t)q * len;
			for (size_t i = 0; i < len; i++)
				acc[i] += p[i];
		}
	}
	/* Allgather: every owner's summed slice to every rank. */
	k = 0;
	for (int q = 0; rc == 0 && q < N; q++) {
		if (q == me)
			continue;
		size_t qlo = slice_lo(n, q), qlen = slice_lo(n, q + 1) - qlo;
		peer[k] = q;
		int c = MPI_Irecv(buf + qlo, (int)qlen, MPI_FLOAT, q, TAG_GATHER, MPI_COMM_WORLD,
				  &req[k++]);
		if (c == MPI_SUCCESS) {
			peer[k] = q;
			c = MPI_Isend(buf + lo, (int)len, MPI_FLOAT, q, TAG_GATHER, MPI_COMM_WORLD,
				      &req[k++]);
		}
		if (c != MPI_SUCCESS)
			rc = mpi_fail(err, c, "sharing the summed gradients");
	}
	if (rc == 0)
		rc = wait_all(k, req, peer, "sharing the summed gradients", err);
	free(parts);
	free(req);
	free(peer);
	return rc;
}

/* Room for n requests and their peers (wait_all's arguments); -ENOMEM with err naming what. */
static int requests(int n, MPI_Request **req, int **peer, const char *what, char *err)
{
	*req = malloc((size_t)n * sizeof **req);
	*peer = malloc((size_t)n * sizeof **peer);
	if (*req && *peer)
		return 0;
	free(*req);
	free(*peer);
	snprintf(err, HN_ERR_MAX, "%s: out of memory", what);
	return -ENOMEM;
}

/* Rank 0's bytes to every rank, point to point so that a silent rank is named. */
int hn_dist_share_bytes(void *buf, size_t n, char *err)
{
	if (!active || info.size == 1)
		return 0;
	if (n > (size_t)INT_MAX) {
		snprintf(err, HN_ERR_MAX, "sharing %zu bytes: too many for one message", n);
		return -EINVAL;
	}
	int N = info.size, k = 0, rc = 0;
	MPI_Request *req;
	int *peer;
	if (requests(N, &req, &peer, "sharing rank 0's set-up", err) < 0)
		return -ENOMEM;
	for (int q = info.rank ? 0 : 1; q < (info.rank ? 1 : N) && rc == 0; q++) {
		peer[k] = q;
		int c = info.rank ? MPI_Irecv(buf, (int)n, MPI_BYTE, 0, TAG_SHARE, MPI_COMM_WORLD,
					      &req[k++])
				  : MPI_Isend(buf, (int)n, MPI_BYTE, q, TAG_SHARE, MPI_COMM_WORLD,
					      &req[k++]);
		if (c != MPI_SUCCESS)
			rc = mpi_fail(err, c, "sharing rank 0's set-up");
	}
	if (rc == 0)
		rc = wait_all(k, req, peer, "sharing rank 0's set-up", err);
	free(req);
	free(peer);
	return rc;
}

/*
 * Every rank's n values, in rank order. Point to point rather than an
 * allgather, so that a rank that stops answering is named, as in the
 * gradient sums.
 */
int hn_dist_gather_doubles(const double *v, int n, double *out, char *err)
{
	if (!active || info.size == 1) {
		memcpy(out, v, (size_t)n * sizeof *v);
		return 0;
	}
	int N = info.size, me = info.rank, k = 0, rc = 0;
	memcpy(out + (size_t)me * (size_t)n, v, (size_t)n * sizeof *v);
	MPI_Request *req;
	int *peer;
	if (requests(2 * N, &req, &peer, "gathering the ranks' counts", err) < 0)
		return -ENOMEM;
	for (int q = 0; q < N && rc == 0; q++) {
		if (q == me)
			continue;
		peer[k] = q;
		int c = MPI_Irecv(out + (size_t)q * (size_t)n, n, MPI_DOUBLE, q, TAG_COUNTS,
				  MPI_COMM_WORLD, &req[k++]);
		if (c == MPI_SUCCESS) {
			peer[k] = q;
			c = MPI_Isend(v, n, MPI_DOUBLE, q, TAG_COUNTS, MPI_COMM_WORLD, &req[k++]);
		}
		if (c != MPI_SUCCESS)
			rc = mpi_fail(err, c, "gathering the ranks' counts");
	}
	if (rc == 0)
		rc = wait_all(k, req, peer, "gathering the ranks' counts", err);
	free(req);
	free(peer);
	return rc;
}
