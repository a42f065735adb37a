/*
 * backend_cuda.c - the "gpu" backend of hntrain: cuDNN convolutions, cuBLAS
 * dense layers and the small kernels of kernels.cu, behind the ops table of
 * trainer/backend.h.
 *
 * Shape of the thing:
 *  - Parameters, gradients and optimizer state are each ONE device
 *    allocation laid out exactly as hn_model says, so get/set_params are one
 *    copy and the CPU and GPU backends exchange weights and checkpoints.
 *  - Activations live in one allocation: slot 0 holds the float input, slot
 *    i+1 the output of layer i, each sized for max_batch; their gradients
 *    mirror that layout in a second allocation. Backward keeps every
 *    forward output, so nothing is recomputed except dropout masks (a hash
 *    of seed, step, layer, element) and pool argmaxes.
 *  - Gradients are accumulated in place (cuDNN/cuBLAS beta = 1, bias kernels
 *    add), already scaled by 1/group_size through the softmax gradient, so
 *    --accum costs nothing extra.
 *  - Tiles go host -> pinned staging buffer -> device on a copy stream, two
 *    buffers used in turn, and compute waits on an event of that copy. Each
 *    call is synchronous (it returns results), but the trainer announces
 *    the next batch with stage() before the call: once the call's kernels
 *    are queued it copies that batch into the other buffer and starts its
 *    DMA, so the next call finds its input on the device (or in flight).
 *    compute_s is measured with CUDA events on the compute stream, so it
 *    excludes the copy.
 *  - Without --amp every operation is true fp32 (cuDNN FMA math, cuBLAS
 *    default math without TF32), so results match the CPU backend to
 *    rounding. With --amp convolutions and dense products run in fp16 on
 *    tensor cores (inputs cast per layer from the fp32 activations, weights
 *    from an fp16 copy of the fp32 master weights), everything else stays
 *    fp32, and a dynamic loss scale guards the fp16 gradients: an overflow
 *    anywhere in the accumulated gradients skips the update and halves the
 *    scale; HN_AMP_GROWTH good updates in a row double it. The scale lives
 *    on the device (kernels.h, struct hn_k_amp) and the kernels read it
 *    there, so a step never waits for the overflow check: the host learns
 *    of a skipped update after the step's one wait. --amp=bf16 is the same
 *    with bf16 (sm_80 and later): fp32's range, so no loss scale at all.
 *  - Convolution algorithms are chosen once at create for max_batch and
 *    named in describe() (the log): by default the first deterministic one
 *    in cuDNN's heuristic ranking (cuda/algo.h), so two runs compute the same
 *    sums in the same order; with --fast the fastest by cudnnFind* timings,
 *    atomics and all. A smaller batch (the last one of an epoch, the test
 *    split) keeps those algorithms where cuDNN takes them at its size, else
 *    gets the heuristic choice, kept per size (layers.c, cu_conv_set_n);
 *    the one workspace grows when an algorithm needs more. No kernel of
 *    kernels.cu or kernels_step.cu adds floats with atomics.
 *
 * Every CUDA, cuDNN and cuBLAS status is checked; failures return -EIO
 * (-ENOMEM for allocation failures) and leave a message in st->err.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "cuda/algo.h"
#include "cuda/cuda_int.h"
#include "cuda/kernels.h"
#include "cuda/plugin.h"
#include "cuda/ranks.h"
#include "trainer/backend.h"

/* ---- error helpers ---- */

int cu_fail(cudaError_t e, const char *what, char *err)
{
	if (err)
		snprintf(err, HN_ERR_MAX, "gpu: %s: %s", what, cudaGetErrorString(e));
	return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

int dnn_fail(cudnnStatus_t st, const char *what, char *err)
{
	if (err)
		snprintf(err, HN_ERR_MAX, "gpu: %s: %s", what, cudnnGetErrorString(st));
	return -EIO;
}

int blas_fail(cublasStatus_t st, const char *what, char *err)
{
	if (err)
		snprintf(err, HN_ERR_MAX, "gpu: %s: %s", what, cublasGetStatusString(st));
	return st == CUBLAS_STATUS_ALLOC_FAILED ? -ENOMEM : -EIO;
}

int cu_dev_alloc(struct hn_cuda *st, void **p, size_t bytes, const char *what)
{
	*p = NULL;
	if (bytes == 0)
		return 0;
	cudaError_t e = cudaMalloc(p, bytes);
	if (e != cudaSuccess) {
		*p = NULL;
		snprintf(st->err, sizeof(st->err), "gpu: cannot allocate %zu bytes for %s: %s",
			 bytes, what, cudaGetErrorString(e));
		return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
	}
	st->bytes += bytes;
	return 0;
}

int cu_host_alloc(struct hn_cuda *st, void **p, size_t bytes, const char *what)
{
	*p = NULL;
	cudaError_t e = cudaHostAlloc(p, bytes ? bytes : 1, cudaHostAllocDefault);
	if (e != cudaSuccess) {
		*p = NULL;
		snprintf(st->err, sizeof(st->err),
			 "gpu: cannot allocate %zu bytes of pinned memory for %s: %s", bytes, what,
			 cudaGetErrorString(e));
		return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
	}
	return 0;
}

/* ---- host-time profile (HNTRAIN_CUDA_PROFILE) ---- */

static double cu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Add the time since *t to phase ph of call kind k (0 train, 1 evaluate); *t = now. */
static void ph_mark(struct hn_cuda *st, int k, int ph, double *t)
{
	if (!st->profile)
		return;
	double now = cu_now();
	st->ph_s[k][ph] += now - *t;
	*t = now;
}

static void ph_report(const struct hn_cuda *st)
{
	static const char *const names[CU_PH_COUNT] = {"set-device", "check",  "upload", "forward",
						       "backward",   "update", "stage",	 "wait"};
	for (int k = 0; k < 2; k++) {
		uint64_t n = st->ph_calls[k];
		if (!n)
			continue;
		double total = 0;
		char buf[512];
		int len = 0;
		for (int ph = 0; ph < CU_PH_COUNT; ph++) {
			total += st->ph_s[k][ph];
			if (st->ph_s[k][ph] > 0)
				len += snprintf(buf + len, sizeof buf - (size_t)len, " %s %.1f",
						names[ph], 1e6 * st->ph_s[k][ph] / (double)n);
		}
		fprintf(stderr,
			"gpu profile: %llu %s calls (%llu new batch sizes), host us per call:%s; "
			"total %.1f, device (events) %.1f\n",
			(unsigned long long)n, k ? "evaluate" : "train_step",
			(unsigned long long)st->ph_resets[k], buf, 1e6 * total / (double)n,
			1e6 * st->ph_dev_s[k] / (double)n);
	}
}

/* ---- ops ---- */

static void hn_cuda_destroy(void *state);

int cu_refresh_params16(struct hn_cuda *st)
{
	if (st->amp)
		CU(hn_k_f32_to_half(st->params, st->params16, st->m.nparams, cu_bf16(st),
				    st->stream),
		   st->err);
	return 0;
}

/* A 256-byte boundary, counted in halves. */
static size_t a128(size_t halves)
{
	return (halves + 127) & ~(size_t)127;
}

/*
 * amp's 16-bit buffers: the weights, each conv's input kept from the
 * forward for the backward, the conv outputs that stay in 16 bits
 * (half_out), and the scratch of the dense layers and the backward (x16,
 * dx16, y16 for max_in / max_out values per sample, w16 for the largest
 * weight gradient). Every buffer starts on 256 bytes, as cuDNN's tensor
 * core kernels and the paired conversions want.
 */
static int setup_amp(struct hn_cuda *st, size_t max_in, size_t max_out, size_t max_w)
{
	const struct hn_model *m = &st->m;
	const size_t mb = (size_t)st->cfg.max_batch;
	TRY(cu_dev_alloc(st, &st->params16, m->nparams * 2, "fp16 parameters"));
	size_t h = 0;
	for (int i = 0; i < m->nlayers; i++) {
		st->cx16_off[i] = h;
		if (m->layers[i].kind == HN_LAYER_CONV2D)
			h = a128(h + cu_layer_in(&m->layers[i]) * mb);
		st->co16_off[i] = h;
		if (st->half_out[i])
			h = a128(h + cu_layer_out(&m->layers[i]) * mb);
	}
	st->x16_off = h;
	st->dx16_off = a128(st->x16_off + max_in * mb);
	st->y16_off = a128(st->dx16_off + max_in * mb);
	st->w16_off = a128(st->y16_off + max_out * mb);
	TRY(cu_dev_alloc(st, &st->scratch16, (st->w16_off + max_w) * 2, "fp16 scratch"));
	return cu_refresh_params16(st);
}

static int setup(struct hn_cuda *st, const float *init)
{
	const struct hn_model *m = &st->m;
	int mb = st->cfg.max_batch;

	CU(cudaSetDevice(st->dev), st->err);
	CU(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking), st->err);
	CU(cudaStreamCreateWithFlags(&st->copy_stream, cudaStreamNonBlocking), st->err);
	CU(cudaEventCreate(&st->ev_start), st->err);
	st->events_made = 1;
	CU(cudaEventCreate(&st->ev_stop), st->err);
	st->events_made = 2;
	CU(cudaEventCreateWithFlags(&st->ev_copied[0], cudaEventDisableTiming), st->err);
	st->events_made = 3;
	CU(cudaEventCreateWithFlags(&st->ev_copied[1], cudaEventDisableTiming), st->err);
	st->events_made = 4;
	DNN(cudnnCreate(&st->dnn), st->err);
	DNN(cudnnSetStream(st->dnn, st->stream), st->err);
	BLAS(cublasCreate(&st->blas), st->err);
	BLAS(cublasSetStream(st->blas, st->stream), st->err);
	BLAS(cublasSetPointerMode(st->blas, CUBLAS_POINTER_MODE_HOST), st->err);
	/* fp32 stays fp32 (no TF32) unless --tf32; fp16 GemmEx uses tensor cores regardless */
	BLAS(cublasSetMathMode(st->blas,
			       st->cfg.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
	     st->err);

	/* parameters, gradients, optimizer state */
	size_t np = m->nparams;
	size_t nopt = np * (size_t)hn_optim_state_per_param(st->o.kind);
	TRY(cu_dev_alloc(st, (void **)&st->params, np * sizeof(float), "parameters"));
	TRY(cu_dev_alloc(st, (void **)&st->grads, np * sizeof(float), "gradients"));
	TRY(cu_dev_alloc(st, (void **)&st->opt, nopt * sizeof(float), "optimizer state"));
	if (np) {
		CU(cudaMemcpyAsync(st->params, init, np * sizeof(float), cudaMemcpyHostToDevice,
				   st->stream),
		   st->err);
		CU(cudaMemsetAsync(st->grads, 0, np * sizeof(float), st->stream), st->err);
	}
	if (nopt)
		CU(cudaMemsetAsync(st->opt, 0, nopt * sizeof(float), st->stream), st->err);

	/* activations and their gradients */
	size_t off = 0;
	st->act_per[0] = (size_t)m->in_c * m->in_h * m->in_w;
	for (int i = 0; i < m->nlayers; i++)
		st->act_per[i + 1] = cu_layer_out(&m->layers[i]);
	size_t max_in = 0, max_out = 0, max_w = 0;
	for (int i = 0; i <= m->nlayers; i++) {
		if (st->act_per[i] > (SIZE_MAX / 4 - off) / (size_t)mb) {
			snprintf(st->err, sizeof(st->err), "gpu: activations too large");
			return -ENOMEM;
		}
		st->act_off[i] = off;
		off += st->act_per[i] * (size_t)mb;
	}
	/* a save's output is its input: no copy (the gradients keep their own slots) */
	for (int i = 0; i <= m->nlayers; i++)
		st->act_at[i] = i > 0 && m->layers[i - 1].kind == HN_LAYER_SAVE ? st->act_at[i - 1]
										: st->act_off[i];
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		if (l->kind != HN_LAYER_CONV2D && l->kind != HN_LAYER_DENSE)
			continue;
		max_in = cu_layer_in(l) > max_in ? cu_layer_in(l) : max_in;
		max_out = cu_layer_out(l) > max_out ? cu_layer_out(l) : max_out;
		max_w = l->w_len > max_w ? l->w_len : max_w;
	}
	/* batch normalisation's per-channel numbers, and the input normalisation */
	size_t bn = 0;
	for (int i = 0; i < m->nlayers; i++) {
		st->bn_off[i] = bn;
		if (m->layers[i].kind == HN_LAYER_BATCHNORM)
			bn += 4 * (size_t)m->layers[i].in_c;
	}
	if (bn)
		TRY(cu_dev_alloc(st, (void **)&st->bnbuf, bn * sizeof(float), "batchnorm"));
	size_t pool = 0;
	for (int i = 0; i < m->nlayers; i++) {
		st->pool_off[i] = pool;
		if (m->layers[i].kind == HN_LAYER_MAXPOOL)
			pool += (size_t)st->cfg.max_batch * cu_layer_out(&m->layers[i]);
	}
	if (pool)
		TRY(cu_dev_alloc(st, (void **)&st->pool_idx, pool * sizeof(int),
				 "max-pool argmax"));
	int max_c = 1; /* the channels any per-channel sum covers */
	for (int i = 0; i < m->nlayers; i++) {
		const struct hn_layer *l = &m->layers[i];
		int ch = l->kind == HN_LAYER_BATCHNORM ? l->in_c : l->b_len ? l->out_c : 0;
		max_c = ch > max_c ? ch : max_c;
	}
	TRY(cu_dev_alloc(st, (void **)&st->chan_scratch, hn_k_chan_scratch(max_c) * sizeof(double),
			 "per-channel sums"));
	_Static_assert(HN_NORM_CH == sizeof st->norm.mean / sizeof st->norm.mean[0],
		       "kernels.h's hn_k_norm covers the channels of hn_backend_config");
	for (int c = 0; c < HN_NORM_CH; c++) {
		float mu = st->cfg.mean[c], sd = st->cfg.std[c] > 0.0f ? st->cfg.std[c] : 1.0f;
		st->norm.mean[c] = mu;
		st->norm.inv[c] = 1.0f / sd;
		if (mu != 0.0f || sd != 1.0f)
			st->norm.on = 1;
	}
	TRY(cu_dev_alloc(st, (void **)&st->acts, off * sizeof(float), "activations"));
	TRY(cu_dev_alloc(st, (void **)&st->dacts, off * sizeof(float), "activation gradients"));
	cu_plan_fusion(st);
	if (st->amp)
		TRY(setup_amp(st, max_in, max_out, max_w));

	/* input staging: pinned host + device, two of each */
	st->tile_bytes = (size_t)m->in_c * m->in_h * m->in_w;
	for (int b = 0; b < 2; b++) {
		TRY(cu_host_alloc(st, (void **)&st->h_tiles[b], st->tile_bytes * mb, "tiles"));
		TRY(cu_host_alloc(st, (void **)&st->h_labels[b], sizeof(uint16_t) * mb, "labels"));
		TRY(cu_dev_alloc(st, (void **)&st->d_tiles[b], st->tile_bytes * mb, "tiles"));
		TRY(cu_dev_alloc(st, (void **)&st->d_labels[b], sizeof(uint16_t) * mb, "labels"));
	}
	TRY(cu_dev_alloc(st, (void **)&st->loss_tmp, sizeof(float) * mb, "losses"));
	TRY(cu_dev_alloc(st, (void **)&st->correct_tmp, sizeof(int) * mb, "accuracy"));
	TRY(cu_dev_alloc(st, (void **)&st->d_small, sizeof(struct hn_small), "results"));
	TRY(cu_host_alloc(st, (void **)&st->h_small, sizeof(struct hn_small), "results"));
	st->h_small->amp =
		(struct hn_k_amp){.scale = HN_AMP_INIT_SCALE, .inv = 1.0f / HN_AMP_INIT_SCALE};
	CU(cudaMemcpyAsync(&st->d_small->amp, &st->h_small->amp, sizeof(struct hn_k_amp),
			   cudaMemcpyHostToDevice, st->stream),
	   st->err);

	/* convolutions: descriptors, then benchmark algorithms at max_batch */
	for (int i = 0; i < m->nlayers; i++)
		if (m->layers[i].kind == HN_LAYER_CONV2D)
			TRY(cu_conv_create(st, i));
	TRY(cu_conv_set_n(st, mb, 1));
	CU(cudaStreamSynchronize(st->stream), st->err);
	return 0;
}

static void describe_device(struct hn_cuda *st)
{
	struct cudaDeviceProp prop;
	int bv = 0;
	size_t dv = cudnnGetVersion();
	memset(&prop, 0, sizeof(prop));
	if (cudaGetDeviceProperties(&prop, st->dev) != cudaSuccess)
		snprintf(prop.name, sizeof(prop.name), "CUDA device %d", st->dev);
	if (cublasGetVersion(st->blas, &bv) != CUBLAS_STATUS_SUCCESS)
		bv = 0;
	/* a device name too long for desc is merely cut short */
	int w = snprintf(st->desc, sizeof(st->desc),
			 "%s (sm_%d%d, %.1f GiB), cuDNN %zu.%zu.%zu, cuBLAS %d.%d.%d, %s",
			 prop.name, prop.major, prop.minor, (double)prop.totalGlobalMem / (1 << 30),
			 dv / 10000, (dv % 10000) / 100, dv % 100, bv / 10000, (bv / 100) % 100,
			 bv % 100,
			 !st->amp ? (st->cfg.tf32 ? "fp32 with TF32 tensor cores (--tf32)" : "fp32")
			 : cu_bf16(st) ? "amp bf16 + fp32 master weights"
				       : "amp fp16 + fp32 master weights, loss scaling");
	if (w < 0) {
		snprintf(st->desc, sizeof(st->desc), "CUDA device %d", st->dev);
		w = (int)strlen(st->desc);
	}
	/* the convolution algorithms chosen at max_batch, recorded in the log */
	size_t o = (size_t)w < sizeof(st->desc) ? (size_t)w : sizeof(st->desc) - 1;
	o += (size_t)snprintf(st->desc + o, sizeof(st->desc) - o, ", %s conv algorithms",
			      st->cfg.fast ? "fastest (--fast)" : "deterministic");
	for (int i = 0; i < st->m.nlayers && o < sizeof(st->desc); i++)
		if (st->m.layers[i].kind == HN_LAYER_CONV2D)
			o += (size_t)snprintf(st->desc + o, sizeof(st->desc) - o, " %d:%d/%d/%d", i,
					      (int)st->conv[i].choice[0].fa,
					      (int)st->conv[i].choice[0].wa,
					      i ? (int)st->conv[i].choice[0].da : -1);
}

static int hn_cuda_create(const struct hn_model *m, const struct hn_optim *o,
			  const struct hn_backend_config *cfg, const float *init, void **state,
			  char *err)
{
	char local[HN_ERR_MAX];
	if (!err)
		err = local;
	*state = NULL;
	if (o->kind != HN_OPT_SGD && o->kind != HN_OPT_MOMENTUM && o->kind != HN_OPT_ADAM) {
		snprintf(err, HN_ERR_MAX, "gpu: unknown optimizer %d", (int)o->kind);
		return -EINVAL;
	}
	if (cfg->max_batch <= 0 || cfg->max_batch > (1 << 24)) {
		snprintf(err, HN_ERR_MAX, "gpu: max_batch %d out of range", cfg->max_batch);
		return -EINVAL;
	}
	int r = cu_check_model(m, err);
	if (r < 0)
		return r;
	int count = 0;
	cudaError_t e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count == 0) {
		snprintf(err, HN_ERR_MAX, "no CUDA device found (cudaGetDeviceCount: %s)",
			 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
		return -ENODEV;
	}
	int dev = cu_pick_device(cfg->device_index, cfg->device_ranks, count,
				 getenv("CUDA_VISIBLE_DEVICES"), getenv("HNTRAIN_GPU_SHARE"), err);
	if (dev < 0)
		return dev;
	if (cfg->amp != 0 && cfg->amp != HN_AMP_FP16 && cfg->amp != HN_AMP_BF16) {
		snprintf(err, HN_ERR_MAX, "gpu: unknown amp kind %d", cfg->amp);
		return -EINVAL;
	}
	int major = 0, minor = 0;
	if (cfg->amp == HN_AMP_BF16 &&
	    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
	    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
	    major < 8) {
		snprintf(err, HN_ERR_MAX,
			 "gpu: --amp=bf16 needs a GPU of compute capability 8.0 or later (this one "
			 "is %d.%d); --amp (fp16) runs here",
			 major, minor);
		return -EINVAL;
	}
	struct hn_cuda *st = calloc(1, sizeof(*st));
	if (!st) {
		snprintf(err, HN_ERR_MAX, "gpu: out of memory");
		return -ENOMEM;
	}
	st->m = *m;
	st->o = *o;
	st->cfg = *cfg;
	st->staged = -1;
	st->dev = dev;
	st->amp = cfg->amp;
	const char *prof = getenv("HNTRAIN_CUDA_PROFILE");
	st->profile = prof && *prof;
	st->dt = !st->amp ? CUDNN_DATA_FLOAT : cu_bf16(st) ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
	st->ht = cu_bf16(st) ? CUDA_R_16BF : CUDA_R_16F;
	r = setup(st, init);
	if (r >= 0 && st->profile && !strcmp(prof, "layers"))
		r = cu_lprof_init(st);
	if (r < 0) {
		snprintf(err, HN_ERR_MAX, "%s", st->err[0] ? st->err : "gpu: setup failed");
		hn_cuda_destroy(st);
		return r;
	}
	describe_device(st);
	*state = st;
	return 0;
}

static void hn_cuda_destroy(void *state)
{
	struct hn_cuda *st = state;
	if (!st)
		return;
	cudaSetDevice(st->dev);
	if (st->profile) {
		ph_report(st);
		cu_lprof_report(st);
	}
	if (st->stream)
		cudaStreamSynchronize(st->stream);
	if (st->copy_stream)
		cudaStreamSynchronize(st->copy_stream);
#ifdef HN_HAVE_NCCL
	cu_dist_destroy(st);
#endif
	for (int i = 0; i < HN_MAX_LAYERS; i++)
		cu_conv_destroy(&st->conv[i]);
	if (st->blas)
		cublasDestroy(st->blas);
	if (st->dnn)
		cudnnDestroy(st->dnn);
	void *dev_ptrs[] = {st->params,	      st->grads,       st->opt,		st->params16,
			    st->acts,	      st->dacts,       st->scratch16,	st->d_tiles[0],
			    st->d_tiles[1],   st->d_labels[0], st->d_labels[1], st->loss_tmp,
			    st->correct_tmp,  st->d_small,     st->ws,		st->bnbuf,
			    st->chan_scratch, st->dist_parts,  st->pool_idx};
	for (size_t i = 0; i < sizeof(dev_ptrs) / sizeof(dev_ptrs[0]); i++)
		if (dev_ptrs[i])
			cudaFree(dev_ptrs[i]);
	void *host_ptrs[] = {st->h_tiles[0], st->h_tiles[1], st->h_labels[0], st->h_labels[1],
			     st->h_small};
	for (size_t i = 0; i < sizeof(host_ptrs) / sizeof(host_ptrs[0]); i++)
		if (host_ptrs[i])
			cudaFreeHost(host_ptrs[i]);
	if (st->events_made > 0)
		cudaEventDestroy(st->ev_start);
	if (st->events_made > 1)
		cudaEventDestroy(st->ev_stop);
	if (st->events_made > 2)
		cudaEventDestroy(st->ev_copied[0]);
	if (st->events_made > 3)
		cudaEventDestroy(st->ev_copied[1]);
	cu_lprof_free(st);
	if (st->copy_stream)
		cudaStreamDestroy(st->copy_stream);
	if (st->stream)
		cudaStreamDestroy(st->stream);
	free(st);
}

/*
 * Copy tiles and labels through pinned buffer b and queue their copy to the
 * device on the copy stream. The buffer's previous copy is waited for
 * (ev_copied) before the memcpy overwrites it; its previous device
 * contents were read by a call that has returned, so nothing still uses
 * them. 0, or -EINVAL for a label out of range.
 */
static int copy_in(struct hn_cuda *st, int b, const uint8_t *tiles, const uint16_t *labels, int n)
{
	for (int i = 0; i < n; i++)
		if (labels[i] >= st->m.nclasses) {
			snprintf(st->err, sizeof(st->err),
				 "gpu: label %u of sample %d >= %d classes", labels[i], i,
				 st->m.nclasses);
			return -EINVAL;
		}
	CU(cudaEventSynchronize(st->ev_copied[b]), st->err);
	memcpy(st->h_tiles[b], tiles, st->tile_bytes * n);
	memcpy(st->h_labels[b], labels, sizeof(uint16_t) * n);
	CU(cudaMemcpyAsync(st->d_tiles[b], st->h_tiles[b], st->tile_bytes * n,
			   cudaMemcpyHostToDevice, st->copy_stream),
	   st->err);
	CU(cudaMemcpyAsync(st->d_labels[b], st->h_labels[b], sizeof(uint16_t) * n,
			   cudaMemcpyHostToDevice, st->copy_stream),
	   st->err);
	CU(cudaEventRecord(st->ev_copied[b], st->copy_stream), st->err);
	return 0;
}

/*
 * This call's batch on the device, in buffer b (returned): the one staged
 * during the previous call when the pointers match (its copy was queued
 * then), else copied now into the other buffer. The compute stream waits
 * for the copy, then the tiles become the float input.
 */
static int upload(struct hn_cuda *st, const uint8_t *tiles, const uint16_t *labels, int n)
{
	int b;
	if (st->staged >= 0 && st->staged_tiles == tiles && st->staged_labels == labels &&
	    st->staged_n == n) {
		b = st->staged;
	} else {
		b = st->staged >= 0 ? st->staged ^ 1 : st->buf;
		TRY(copy_in(st, b, tiles, labels, n));
	}
	st->staged = -1;
	st->buf = b ^ 1;
	if (st->next_tiles == tiles && st->next_labels == labels && st->next_n == n)
		st->next_tiles = NULL; /* announced, but copied here: nothing left to stage */
	CU(cudaStreamWaitEvent(st->stream, st->ev_copied[b], 0), st->err);
	CU(cudaEventRecord(st->ev_start, st->stream), st->err);
	CU(hn_k_tiles_to_chw(st->d_tiles[b], cu_act(st, 0), n, st->m.in_h, st->m.in_w, st->m.in_c,
			     st->norm, st->stream),
	   st->err);
	return b;
}

/*
 * The batch announced by stage(), moved while the current call's work (on
 * buffer busy) runs: the host copy into the other pinned buffer and its DMA
 * overlap the queued kernels. A batch that cannot be staged (a bad label)
 * is left for its own call to copy and report.
 */
static int stage_next(struct hn_cuda *st, int busy)
{
	if (!st->next_tiles)
		return 0;
	int b = busy ^ 1;
	int rc = copy_in(st, b, st->next_tiles, st->next_labels, st->next_n);
	if (rc == 0) {
		st->staged = b;
		st->staged_tiles = st->next_tiles;
		st->staged_labels = st->next_labels;
		st->staged_n = st->next_n;
	}
	st->next_tiles = NULL;
	return rc == -EINVAL ? 0 : rc;
}

/* backend.h's stage: remember the batch; the current (or next) call moves it. */
static int hn_cuda_stage(void *state, const uint8_t *tiles, const uint16_t *labels, int n)
{
	struct hn_cuda *st = state;
	if (!tiles || !labels || n <= 0 || n > st->cfg.max_batch) {
		st->next_tiles = NULL;
		return 0;
	}
	st->next_tiles = tiles;
	st->next_labels = labels;
	st->next_n = n;
	return 0;
}

/* Queue the loss/accuracy reduction (and the logits' gradient) and its copy back. */
static int finish(struct hn_cuda *st, int b, int n, float grad_scale, int with_grad)
{
	const struct hn_model *m = &st->m;
	CU(hn_k_softmax_xent(cu_act(st, m->nlayers), st->d_labels[b], n, m->nclasses, grad_scale,
			     cu_amp(st), with_grad ? cu_dact(st, m->nlayers) : NULL, st->loss_tmp,
			     st->correct_tmp, &st->d_small->res, st->stream),
	   st->err);
	CU(cudaMemcpyAsync(&st->h_small->res, &st->d_small->res, sizeof(struct hn_k_result),
			   cudaMemcpyDeviceToHost, st->stream),
	   st->err);
	return 0;
}

/* Mark the end of this call's compute, wait for it, and fill res from the copied block. */
static int read_result(struct hn_cuda *st, struct hn_step_result *res)
{
	float ms = 0.0f;
	CU(cudaEventRecord(st->ev_stop, st->stream), st->err);
	CU(cudaEventSynchronize(st->ev_stop), st->err);
	CU(cudaEventElapsedTime(&ms, st->ev_start, st->ev_stop), st->err);
	if (st->h_small->res.bad_label) {
		snprintf(st->err, sizeof(st->err), "gpu: a label was out of range");
		return -EINVAL;
	}
	res->loss_sum = st->h_small->res.loss_sum;
	res->correct = st->h_small->res.correct;
	res->compute_s = ms > 0.0f ? ms / 1000.0 : 1e-9; /* 0 would mean "use host time" */
	return 0;
}

/* A call of kind k (0 train, 1 evaluate) with n samples: the device, and the descriptors for n. */
static int check_batch(struct hn_cuda *st, int n, int k, double *t)
{
	if (n <= 0 || n > st->cfg.max_batch) {
		snprintf(st->err, sizeof(st->err), "gpu: batch of %d outside 1..%d", n,
			 st->cfg.max_batch);
		return -EINVAL;
	}
	int cur = -1; /* the thread's device is nearly always ours already */
	if (cudaGetDevice(&cur) != cudaSuccess || cur != st->dev)
		CU(cudaSetDevice(st->dev), st->err);
	ph_mark(st, k, CU_PH_SETDEV, t);
	st->ph_resets[k] += n != st->cur_n;
	return cu_conv_set_n(st, n, 0);
}

static int hn_cuda_train_step(void *state, const uint8_t *tiles, const uint16_t *labels, int n,
			      int group_size, int apply, float lr, uint64_t step,
			      struct hn_step_result *res)
{
	struct hn_cuda *st = state;
	memset(res, 0, sizeof(*res));
	if (group_size <= 0) {
		snprintf(st->err, sizeof(st->err), "gpu: group size %d", group_size);
		return -EINVAL;
	}
	if (n == 0 && apply) { /* no samples: apply what the group summed */
		CU(cudaSetDevice(st->dev), st->err);
		TRY(cu_apply_update(st, lr, step));
		CU(cudaStreamSynchronize(st->stream), st->err);
		res->skipped = cu_update_skipped(st);
		return 0;
	}
	double t = st->profile ? cu_now() : 0;
	TRY(check_batch(st, n, 0, &t));
	ph_mark(st, 0, CU_PH_CHECK, &t);
	int b = upload(st, tiles, labels, n);
	if (b < 0)
		return b;
	ph_mark(st, 0, CU_PH_UPLOAD, &t);
	st->step_scale = 1.0f / (float)group_size; /* fp16 amp: times the device's loss scale */
	TRY(cu_forward(st, n, 1, step));
	TRY(finish(st, b, n, st->step_scale, 1));
	ph_mark(st, 0, CU_PH_FORWARD, &t);
	TRY(cu_backward(st, n, step));
	ph_mark(st, 0, CU_PH_BACKWARD, &t);
	if (apply)
		TRY(cu_apply_update(st, lr, step));
	ph_mark(st, 0, CU_PH_UPDATE, &t);
	TRY(stage_next(st, b)); /* the next batch's copy, while the device works */
	ph_mark(st, 0, CU_PH_STAGE, &t);
	TRY(read_result(st, res));
	ph_mark(st, 0, CU_PH_WAIT, &t);
	st->ph_calls[0]++;
	st->ph_dev_s[0] += res->compute_s;
	res->skipped = apply && cu_update_skipped(st);
	return 0;
}

static int hn_cuda_evaluate(void *state, const uint8_t *tiles, const uint16_t *labels, int n,
			    struct hn_step_result *res)
{
	struct hn_cuda *st = state;
	memset(res, 0, sizeof(*res));
	double t = st->profile ? cu_now() : 0;
	TRY(check_batch(st, n, 1, &t));
	ph_mark(st, 1, CU_PH_CHECK, &t);
	int b = upload(st, tiles, labels, n);
	if (b < 0)
		return b;
	ph_mark(st, 1, CU_PH_UPLOAD, &t);
	TRY(cu_forward(st, n, 0, 0));
	TRY(finish(st, b, n, 0.0f, 0));
	ph_mark(st, 1, CU_PH_FORWARD, &t);
	TRY(stage_next(st, b));
	ph_mark(st, 1, CU_PH_STAGE, &t);
	TRY(read_result(st, res));
	ph_mark(st, 1, CU_PH_WAIT, &t);
	st->ph_calls[1]++;
	st->ph_dev_s[1] += res->compute_s;
	return 0;
}

static int copy_sync(struct hn_cuda *st, void *dst, const void *src, size_t bytes,
		     enum cudaMemcpyKind kind)
{
	CU(cudaSetDevice(st->dev), st->err);
	if (bytes)
		CU(cudaMemcpyAsync(dst, src, bytes, kind, st->stream), st->err);
	CU(cudaStreamSynchronize(st->stream), st->err);
	return 0;
}

static int hn_cuda_get_params(void *state, float *params)
{
	struct hn_cuda *st = state;
	return copy_sync(st, params, st->params, st->m.nparams * sizeof(float),
			 cudaMemcpyDeviceToHost);
}

static int hn_cuda_set_params(void *state, const float *params)
{
	struct hn_cuda *st = state;
	TRY(copy_sync(st, st->params, params, st->m.nparams * sizeof(float),
		      cudaMemcpyHostToDevice));
	TRY(cu_refresh_params16(st));
	CU(cudaStreamSynchronize(st->stream), st->err);
	return 0;
}

static size_t opt_bytes(struct hn_cuda *st)
{
	return st->m.nparams * (size_t)hn_optim_state_per_param(st->o.kind) * sizeof(float);
}

static int hn_cuda_get_opt_state(void *state, float *opt)
{
	struct hn_cuda *st = state;
	return copy_sync(st, opt, st->opt, opt_bytes(st), cudaMemcpyDeviceToHost);
}

static int hn_cuda_set_opt_state(void *state, const float *opt)
{
	struct hn_cuda *st = state;
	return copy_sync(st, st->opt, opt, opt_bytes(st), cudaMemcpyHostToDevice);
}

static const char *hn_cuda_describe(void *state)
{
	struct hn_cuda *st = state;
	return st->desc;
}

static uint64_t hn_cuda_memory_bytes(void *state)
{
	struct hn_cuda *st = state;
	return st->bytes;
}

static const struct hn_backend_ops hn_cuda_ops = {
	.name = "gpu",
	.create = hn_cuda_create,
	.destroy = hn_cuda_destroy,
	.train_step = hn_cuda_train_step,
	.evaluate = hn_cuda_evaluate,
	.stage = hn_cuda_stage,
#ifdef HN_HAVE_NCCL
	.dist_id = cu_dist_id,
	.dist_join = cu_dist_join,
	.dist_sum_grads = cu_dist_sum_grads,
#endif
	.get_params = hn_cuda_get_params,
	.set_params = hn_cuda_set_params,
	.get_opt_state = hn_cuda_get_opt_state,
	.set_opt_state = hn_cuda_set_opt_state,
	.describe = hn_cuda_describe,
	.memory_bytes = hn_cuda_memory_bytes,
};

/* ---- exported ---- */

static int device_count(char *msg, size_t cap)
{
	int count = 0;
	cudaError_t e = cudaGetDeviceCount(&count);
	int drv = 0, rt = 0;
	if (e == cudaErrorInsufficientDriver && cudaDriverGetVersion(&drv) == cudaSuccess &&
	    drv > 0) {
		/* a driver is there but older than this runtime; drv == 0 means no driver */
		cudaRuntimeGetVersion(&rt);
		snprintf(msg, cap,
			 "CUDA driver too old (driver supports CUDA %d.%d, runtime is %d.%d; "
			 "cudaGetDeviceCount: %s)",
			 drv / 1000, (drv % 1000) / 10, rt / 1000, (rt % 1000) / 10,
			 cudaGetErrorString(e));
		return -ENODEV;
	}
	if (e != cudaSuccess || count <= 0) {
		snprintf(msg, cap, "no CUDA device found (cudaGetDeviceCount: %s)",
			 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
		return -ENODEV;
	}
	return count;
}

const struct hn_backend_ops *hn_cuda_backend(char *err)
{
	char local[HN_ERR_MAX];
	if (device_count(err ? err : local, HN_ERR_MAX) < 0)
		return NULL;
	return &hn_cuda_ops;
}

int hn_cuda_probe(char *info, size_t cap, uint64_t *free_bytes, uint64_t *total_bytes)
{
	char local[HN_ERR_MAX];
	if (!info || cap == 0) {
		info = local;
		cap = sizeof(local);
	}
	if (free_bytes)
		*free_bytes = 0;
	if (total_bytes)
		*total_bytes = 0;
	int r = device_count(info, cap);
	if (r < 0)
		return r;
	struct cudaDeviceProp prop;
	size_t fr = 0, tot = 0;
	int drv = 0;
	cudaError_t e = cudaGetDeviceProperties(&prop, 0);
	if (e == cudaSuccess)
		e = cudaSetDevice(0);
	if (e == cudaSuccess)
		e = cudaMemGetInfo(&fr, &tot);
	if (e != cudaSuccess) {
		snprintf(info, cap, "CUDA device 0 unusable: %s", cudaGetErrorString(e));
		return -ENODEV;
	}
	cudaDriverGetVersion(&drv);
	size_t dv = cudnnGetVersion();
	snprintf(info, cap, "%s, sm_%d%d, %d SMs, driver %d.%d, cuDNN %zu.%zu.%zu%s", prop.name,
		 prop.major, prop.minor, prop.multiProcessorCount, drv / 1000, (drv % 1000) / 10,
		 dv / 10000, (dv % 10000) / 100, dv % 100, r > 1 ? " (more devices present)" : "");
	if (free_bytes)
		*free_bytes = fr;
	if (total_bytes)
		*total_bytes = tot;
	return 0;
}
