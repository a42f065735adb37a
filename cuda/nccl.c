/*
 * nccl.c - the gpu backend's gradient sum across ranks, on the devices,
 * with NCCL (backend.h: dist_id, dist_join, dist_sum_grads).
 *
 * NCCL is loaded with dlopen when a run has more than one rank, not linked:
 * the plugin then loads on a machine without NCCL, where one process on one
 * GPU needs nothing more. hntrain's library search (trainer/cuda_libs.c)
 * has already loaded libnccl.so.2 by its full path where it found one.
 *
 * The set-up follows NCCL's own recipe over MPI: rank 0 makes the unique
 * id, the trainer sends its bytes to every rank (hn_dist_share_bytes), and
 * each rank joins with ncclCommInitRankConfig on its own device.
 *
 * No rank waits forever, as on the cpu path (dist_mpi.c): the communicator
 * is non-blocking (blocking = 0), so its set-up and every group of sends
 * and receives return at once; their completion, and then the stream's, is
 * polled (ncclCommGetAsyncError, cudaStreamQuery) for at most
 * HNTRAIN_DIST_TIMEOUT seconds (cuda/ranks.c), after which the
 * communicator is aborted (ncclCommAbort) and the call fails with
 * -ETIMEDOUT; the trainer then names the rank that does not answer.
 *
 * The sum is the cpu path's (trainer/dist_mpi.c), on the device: the
 * gradient block is cut in N slices; with grouped ncclSend/ncclRecv each
 * rank gets every rank's copy of its slice, adds them in rank order
 * ((r0 + r1) + r2) + ... (hn_k_sum_parts, one thread per element), and sends
 * the summed slice back to every rank. That moves the bytes a ring
 * allreduce moves, 2 (N - 1) / N of the block per rank, but in a fixed
 * order, so the result does not depend on NCCL's choice of algorithm,
 * protocol or channel count: the same seed gives the same weights run to
 * run for a given N, as on the cpu.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <nccl.h>

#include "cuda/cuda_int.h"
#include "cuda/kernels.h"
#include "cuda/ranks.h"

static struct {
	__typeof__(ncclGetUniqueId) *GetUniqueId;
	__typeof__(ncclCommInitRankConfig) *CommInitRankConfig;
	__typeof__(ncclCommGetAsyncError) *CommGetAsyncError;
	__typeof__(ncclCommAbort) *CommAbort;
	__typeof__(ncclCommDestroy) *CommDestroy;
	__typeof__(ncclGetErrorString) *GetErrorString;
	__typeof__(ncclGetVersion) *GetVersion;
	__typeof__(ncclGroupStart) *GroupStart;
	__typeof__(ncclGroupEnd) *GroupEnd;
	__typeof__(ncclSend) *Send;
	__typeof__(ncclRecv) *Recv;
	int loaded;
} api;

static int nccl_load(char *err)
{
	if (api.loaded)
		return 0;
	void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		snprintf(err, HN_ERR_MAX,
			 "gpu: several ranks need NCCL, and libnccl.so.2 does not load (%s); "
			 "install it (NVIDIA's libnccl2 package, or the nvidia-nccl wheel) or set "
			 "LD_LIBRARY_PATH to its folder",
			 dlerror());
		return -ENOENT;
	}
	struct {
		void **fn;
		const char *name;
	} syms[] = {
		{(void **)&api.GetUniqueId, "ncclGetUniqueId"},
		{(void **)&api.CommInitRankConfig, "ncclCommInitRankConfig"},
		{(void **)&api.CommGetAsyncError, "ncclCommGetAsyncError"},
		{(void **)&api.CommAbort, "ncclCommAbort"},
		{(void **)&api.CommDestroy, "ncclCommDestroy"},
		{(void **)&api.GetErrorString, "ncclGetErrorString"},
		{(void **)&api.GetVersion, "ncclGetVersion"},
		{(void **)&api.GroupStart, "ncclGroupStart"},
		{(void **)&api.GroupEnd, "ncclGroupEnd"},
		{(void **)&api.Send, "ncclSend"},
		{(void **)&api.Recv, "ncclRecv"},
	};
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		*syms[i].fn = dlsym(h, syms[i].name);
		if (!*syms[i].fn) {
			snprintf(err, HN_ERR_MAX,
				 "gpu: libnccl.so.2 has no %s (NCCL 2.14 or later is needed)",
				 syms[i].name);
			return -ENOENT;
		}
	}
	api.loaded = 1;
	return 0;
}

static int nccl_fail(ncclResult_t r, const char *what, char *err)
{
	snprintf(err, HN_ERR_MAX, "gpu: %s: %s", what, api.GetErrorString(r));
	return r == ncclSystemError || r == ncclRemoteError ? -EIO : -EINVAL;
}

#define NCCL(call, what, err)                                                                      \
	do {                                                                                       \
		ncclResult_t r_ = (call);                                                          \
		if (r_ != ncclSuccess && r_ != ncclInProgress) /* non-blocking: polled after */    \
			return nccl_fail(r_, what, err);                                           \
	} while (0)

/* The communicator's own state: 1 while a call is in progress, 0 done, -errno failed. */
static int poll_comm(void *ctx, char *err)
{
	ncclComm_t comm = ctx;
	ncclResult_t state = ncclSuccess;
	ncclResult_t r = api.CommGetAsyncError(comm, &state);
	if (r != ncclSuccess)
		return nccl_fail(r, "ncclCommGetAsyncError", err);
	if (state == ncclInProgress)
		return 1;
	return state == ncclSuccess ? 0 : nccl_fail(state, "a rank's NCCL call failed", err);
}

static void abort_comm(void *ctx)
{
	api.CommAbort((ncclComm_t)ctx);
}

/* Wait, bounded, for the communicator's call in progress (init, a group). */
static int wait_comm(struct hn_cuda *st, ncclComm_t comm, const char *what, char *err)
{
	struct cu_wait w = {.poll = poll_comm,
			    .abort = abort_comm,
			    .ctx = comm,
			    .timeout_s = cu_dist_timeout(),
			    .what = what};
	int rc = cu_wait_bounded(&w, err);
	if (rc < 0 && st->dist_comm == comm)
		st->dist_comm = NULL; /* aborted: nothing left to destroy */
	return rc;
}

/* The stream's work (the group's sends and receives, the sum): done, failed, or pending. */
static int poll_stream(void *ctx, char *err)
{
	struct hn_cuda *st = ctx;
	cudaError_t e = cudaStreamQuery(st->stream);
	if (e == cudaSuccess)
		return 0;
	if (e != cudaErrorNotReady) {
		snprintf(err, HN_ERR_MAX, "gpu: summing the gradients: %s", cudaGetErrorString(e));
		return -EIO;
	}
	return poll_comm(st->dist_comm, err) < 0 ? -EIO : 1; /* a peer's failure shows here */
}

static void abort_stream(void *ctx)
{
	struct hn_cuda *st = ctx;
	if (st->dist_comm)
		api.CommAbort(st->dist_comm);
	st->dist_comm = NULL;
}

/* First element of slice s of n split in size parts (dist_mpi.c's rule). */
static size_t slice_lo(size_t n, int s, int size)
{
	return (size_t)((unsigned __int128)n * (unsigned)s / (unsigned)size);
}

int cu_dist_id(void *state, void *id, size_t cap, char *err)
{
	(void)state;
	if (cap < sizeof(ncclUniqueId)) {
		snprintf(err, HN_ERR_MAX, "gpu: %zu bytes for an NCCL id of %zu", cap,
			 sizeof(ncclUniqueId));
		return -EINVAL;
	}
	TRY(nccl_load(err));
	ncclUniqueId u;
	NCCL(api.GetUniqueId(&u), "ncclGetUniqueId", err);
	memcpy(id, &u, sizeof u);
	return (int)sizeof u;
}

int cu_dist_join(void *state, const void *id, size_t len, int rank, int size, char *err)
{
	struct hn_cuda *st = state;
	if (len != sizeof(ncclUniqueId) || size < 2 || rank < 0 || rank >= size) {
		snprintf(err, HN_ERR_MAX, "gpu: bad NCCL set-up (rank %d of %d, id of %zu bytes)",
			 rank, size, len);
		return -EINVAL;
	}
	TRY(nccl_load(err));
	size_t np = st->m.nparams, most = slice_lo(np, 1, size) + 1;
	CU(cudaSetDevice(st->dev), err);
	TRY(cu_dev_alloc(st, (void **)&st->dist_parts, (size_t)size * most * sizeof(float),
			 "gradient slices"));
	ncclUniqueId u;
	memcpy(&u, id, sizeof u);
	ncclComm_t comm = NULL;
	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	config.blocking = 0;
	NCCL(api.CommInitRankConfig(&comm, size, u, rank, &config), "ncclCommInitRankConfig", err);
	TRY(wait_comm(st, comm, "joining the other ranks (ncclCommInitRankConfig)", err));
	st->dist_comm = comm;
	st->dist_rank = rank;
	st->dist_size = size;
	int v = 0;
	api.GetVersion(&v);
	size_t used = strlen(st->desc);
	snprintf(st->desc + used, sizeof st->desc - used, ", NCCL %d.%d.%d across %d ranks",
		 v / 10000, v / 100 % 100, v % 100, size);
	return 0;
}

int cu_dist_sum_grads(void *state, char *err)
{
	struct hn_cuda *st = state;
	const int N = st->dist_size, me = st->dist_rank;
	if (!st->dist_comm) {
		snprintf(err, HN_ERR_MAX, "gpu: dist_sum_grads before dist_join");
		return -EINVAL;
	}
	ncclComm_t comm = st->dist_comm;
	size_t np = st->m.nparams, lo = slice_lo(np, me, N), len = slice_lo(np, me + 1, N) - lo;
	size_t most = slice_lo(np, 1, N) + 1;
	float *g = st->grads, *parts = st->dist_parts;
	CU(cudaSetDevice(st->dev), err);
	/* every rank's copy of my slice into parts[q], mine to each slice's owner */
	CU(cudaMemcpyAsync(parts + (size_t)me * most, g + lo, len * sizeof(float),
			   cudaMemcpyDeviceToDevice, st->stream),
	   err);
	NCCL(api.GroupStart(), "ncclGroupStart", err);
	for (int q = 0; q < N; q++) {
		if (q == me)
			continue;
		size_t qlo = slice_lo(np, q, N), qlen = slice_lo(np, q + 1, N) - qlo;
		NCCL(api.Send(g + qlo, qlen, ncclFloat, q, comm, st->stream), "ncclSend", err);
		NCCL(api.Recv(parts + (size_t)q * most, len, ncclFloat, q, comm, st->stream),
		     "ncclRecv", err);
	}
	NCCL(api.GroupEnd(), "ncclGroupEnd (gradient slices)", err);
	TRY(wait_comm(st, comm, "summing the gradients (sending the slices)", err));
	CU(hn_k_sum_parts(parts, N, most, len, g + lo, st->stream), err);
	/* the summed slices to every rank */
	NCCL(api.GroupStart(), "ncclGroupStart", err);
	for (int q = 0; q < N; q++) {
		if (q == me)
			continue;
		size_t qlo = slice_lo(np, q, N), qlen = slice_lo(np, q + 1, N) - qlo;
		NCCL(api.Send(g + lo, len, ncclFloat, q, comm, st->stream), "ncclSend", err);
		NCCL(api.Recv(g + qlo, qlen, ncclFloat, q, comm, st->stream), "ncclRecv", err);
	}
	NCCL(api.GroupEnd(), "ncclGroupEnd (summed slices)", err);
	TRY(wait_comm(st, comm, "summing the gradients (the summed slices)", err));
	/* waited for here, so that the trainer times the sum as communication; bounded */
	struct cu_wait w = {.poll = poll_stream,
			    .abort = abort_stream,
			    .ctx = st,
			    .timeout_s = cu_dist_timeout(),
			    .what = "summing the gradients (waiting for the other ranks' slices)"};
	return cu_wait_bounded(&w, err);
}

void cu_dist_destroy(struct hn_cuda *st)
{
	if (st->dist_comm && api.loaded)
		api.CommDestroy(st->dist_comm);
	st->dist_comm = NULL;
}
