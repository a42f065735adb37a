/*
 * cuda_int.h - what the files of the GPU plugin share (private to cuda/):
 * the backend's state, the status-checking macros and helpers, the layout
 * accessors of the activation slots, and the layers of layers.c.
 * backend_cuda.c's banner says how the state is laid out.
 */
#ifndef HN_CUDA_INT_H
#define HN_CUDA_INT_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "cuda/kernels.h"
#include "trainer/backend.h"

#define HN_WS_LIMIT	  ((size_t)1 << 30) /* largest workspace an algorithm may ask for */
#define HN_AMP_INIT_SCALE 65536.0f
#define HN_AMP_MAX_SCALE  16777216.0f
#define HN_AMP_MIN_SCALE  (1.0f / 16777216.0f)
#define HN_AMP_GROWTH	  2000

/* The algorithms (and their math types) a conv uses at one batch size. */
struct hn_conv_choice {
	int n; /* the batch size; 0: unused */
	cudnnConvolutionFwdAlgo_t fa;
	cudnnConvolutionBwdDataAlgo_t da;
	cudnnConvolutionBwdFilterAlgo_t wa;
	cudnnMathType_t fm, dm, wm;
};
#define HN_CONV_CHOICES 8

struct hn_conv {
	cudnnTensorDescriptor_t x, y;
	cudnnFilterDescriptor_t w;
	cudnnConvolutionDescriptor_t cf, cd, cw; /* forward, backward data, backward filter */
	/* [0]: chosen for max_batch at create; then each other batch size met, kept */
	struct hn_conv_choice choice[HN_CONV_CHOICES];
	/* in use for the current batch size */
	cudnnConvolutionFwdAlgo_t fa;
	cudnnConvolutionBwdDataAlgo_t da;
	cudnnConvolutionBwdFilterAlgo_t wa;
};

/* Small per-step results, one device block mirrored in pinned host memory. */
struct hn_small {
	struct hn_k_result res;
	struct hn_k_amp amp; /* fp16 amp's loss scale (kernels.h) */
};

/* Host time per phase of the calls, with HNTRAIN_CUDA_PROFILE set (backend_cuda.c). */
enum {
	CU_PH_SETDEV,
	CU_PH_CHECK,
	CU_PH_UPLOAD,
	CU_PH_FORWARD,
	CU_PH_BACKWARD,
	CU_PH_UPDATE,
	CU_PH_STAGE,
	CU_PH_WAIT,
	CU_PH_COUNT
};

#define CU_LAYER_KINDS (HN_LAYER_ADD + 1)

struct hn_cuda {
	struct hn_model m;
	struct hn_optim o;
	struct hn_backend_config cfg;
	int dev;
	int amp;     /* 0, HN_AMP_FP16 or HN_AMP_BF16 */
	int profile; /* HNTRAIN_CUDA_PROFILE: sum host time per phase, print at destroy */
	double ph_s[2][CU_PH_COUNT]; /* [train, evaluate][phase] */
	double ph_dev_s[2];	     /* the calls' event time (res->compute_s) */
	uint64_t ph_calls[2];
	uint64_t ph_resets[2]; /* calls that changed the batch size (cu_conv_set_n's work) */
	/* HNTRAIN_CUDA_PROFILE=layers (lprof.c): events around each layer, ms per kind */
	cudaEvent_t *lev;
	int lev_made;
	uint64_t lprof_seen, lprof_steps;
	double lprof_ms[2][CU_LAYER_KINDS]; /* [forward, backward][enum hn_layer_kind] */
	cudnnDataType_t dt;		    /* conv tensors: CUDNN_DATA_FLOAT, _HALF or _BFLOAT16 */
	cudaDataType_t ht; /* amp: the 16-bit type for cuBLAS, CUDA_R_16F or CUDA_R_16BF */

	cudaStream_t stream, copy_stream;
	cudaEvent_t ev_start, ev_stop, ev_copied[2];
	int events_made;
	cudnnHandle_t dnn;
	cublasHandle_t blas;

	float *params, *grads, *opt; /* one allocation each */
	void *params16;		     /* amp: 16-bit copy of params */
	float *acts, *dacts;
	size_t act_off[HN_MAX_LAYERS + 1]; /* float offset of slot i (max_batch samples) */
	size_t act_at[HN_MAX_LAYERS + 1];  /* where slot i's activations are: a save's output is
					      its input, unlike their gradients */
	size_t act_per[HN_MAX_LAYERS + 1]; /* floats per sample of slot i */
	void *scratch16;		   /* amp: each conv's input | x16 | dx16 | y16 | w16 */
	size_t x16_off, dx16_off, y16_off, w16_off; /* in halves */
	/* amp: conv i's 16-bit input, cast in the forward and read again by the backward */
	size_t cx16_off[HN_MAX_LAYERS];
	/* layer i (a batchnorm or an add) takes the ReLU after it: cu_plan_fusion */
	unsigned char relu_fused[HN_MAX_LAYERS];
	/* amp: conv i's output stays 16-bit, at co16_off[i], for the batchnorm after it */
	unsigned char half_out[HN_MAX_LAYERS];
	size_t co16_off[HN_MAX_LAYERS];

	uint8_t *d_tiles[2], *h_tiles[2];
	uint16_t *d_labels[2], *h_labels[2];
	size_t tile_bytes; /* per sample */
	int buf;	   /* the buffer the next unstaged copy takes */
	/* stage(): the batch announced for the next call, then staged in buffer `staged` */
	const uint8_t *next_tiles, *staged_tiles;
	const uint16_t *next_labels, *staged_labels;
	int next_n, staged_n;
	int staged; /* -1: none */

	float *loss_tmp;
	int *correct_tmp;
	struct hn_small *d_small, *h_small;

	void *ws;
	size_t ws_bytes;
	struct hn_conv conv[HN_MAX_LAYERS];
	int cur_n;

	float step_scale; /* gradient scale per sample of the current train_step */
	int skipped;	  /* the last update was skipped (fp16 overflow), read after the sync */

	/* batch normalisation: per layer mean, invstd, mdy, mdyx (C floats each) at bn_off[i] */
	float *bnbuf;
	double *chan_scratch; /* kernels.h's per-channel sums, for the widest layer */
	size_t bn_off[HN_MAX_LAYERS];
	/* max pooling: each output's argmax from the train forward, at pool_off[i] (ints) */
	int *pool_idx;
	size_t pool_off[HN_MAX_LAYERS];
	struct hn_k_norm norm; /* input normalisation (cfg's mean and std) */

	/* data-parallel (nccl.c): the communicator (an ncclComm_t), this rank, the ranks */
	void *dist_comm;
	float *dist_parts; /* dist_size slices of the gradient block */
	int dist_rank, dist_size;

	uint64_t bytes;
	char desc[512];
	char err[HN_ERR_MAX];
};

/* ---- error helpers (backend_cuda.c): a message in err, -EIO or -ENOMEM ---- */

int cu_fail(cudaError_t e, const char *what, char *err);
int dnn_fail(cudnnStatus_t st, const char *what, char *err);
int blas_fail(cublasStatus_t st, const char *what, char *err);
/* Device / pinned host memory, counted in st->bytes (device); the message in st->err. */
int cu_dev_alloc(struct hn_cuda *st, void **p, size_t bytes, const char *what);
int cu_host_alloc(struct hn_cuda *st, void **p, size_t bytes, const char *what);

/* Each macro evaluates the call once and returns from the enclosing function on failure. */
#define CU(call, err)                                                                              \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess)                                                             \
			return cu_fail(e_, #call, err);                                            \
	} while (0)
#define DNN(call, err)                                                                             \
	do {                                                                                       \
		cudnnStatus_t s_ = (call);                                                         \
		if (s_ != CUDNN_STATUS_SUCCESS)                                                    \
			return dnn_fail(s_, #call, err);                                           \
	} while (0)
#define BLAS(call, err)                                                                            \
	do {                                                                                       \
		cublasStatus_t b_ = (call);                                                        \
		if (b_ != CUBLAS_STATUS_SUCCESS)                                                   \
			return blas_fail(b_, #call, err);                                          \
	} while (0)
#define TRY(call)                                                                                  \
	do {                                                                                       \
		int r_ = (call);                                                                   \
		if (r_ < 0)                                                                        \
			return r_;                                                                 \
	} while (0)

/* ---- nccl.c: backend.h's dist_* ops; cu_dist_destroy frees the communicator ---- */

int cu_dist_id(void *state, void *id, size_t cap, char *err);
int cu_dist_join(void *state, const void *id, size_t len, int rank, int size, char *err);
int cu_dist_sum_grads(void *state, char *err);
void cu_dist_destroy(struct hn_cuda *st);

/* amp's 16-bit buffers hold bf16 (else fp16) */
static inline int cu_bf16(const struct hn_cuda *st)
{
	return st->amp == HN_AMP_BF16;
}

/* The device's loss scale for the kernels, or NULL where there is none (fp32, bf16). */
static inline const struct hn_k_amp *cu_amp(const struct hn_cuda *st)
{
	return st->amp == HN_AMP_FP16 ? &st->d_small->amp : NULL;
}

/* ---- activation slots ---- */

static inline size_t cu_layer_in(const struct hn_layer *l)
{
	return (size_t)l->in_c * l->in_h * l->in_w;
}

static inline size_t cu_layer_out(const struct hn_layer *l)
{
	return (size_t)l->out_c * l->out_h * l->out_w;
}

static inline float *cu_act(struct hn_cuda *st, int slot)
{
	return st->acts + st->act_at[slot];
}

static inline float *cu_dact(struct hn_cuda *st, int slot)
{
	return st->dacts + st->act_off[slot];
}

/* Batch normalisation layer i's mean, invstd, mdy and mdyx (k = 0..3), C floats each. */
static inline float *cu_bn(struct hn_cuda *st, int i, int k)
{
	return st->bnbuf + st->bn_off[i] + (size_t)k * st->m.layers[i].in_c;
}

/* Max-pooling layer i's argmax record (one int per output of max_batch samples). */
static inline int *cu_pool_idx(struct hn_cuda *st, int i)
{
	return st->pool_idx + st->pool_off[i];
}

static inline void *cu_half_at(struct hn_cuda *st, size_t off)
{
	return (uint16_t *)st->scratch16 + off;
}

static inline void *cu_w16(struct hn_cuda *st, size_t off)
{
	return (uint16_t *)st->params16 + off;
}

/* ---- update.c: the optimizer step ---- */

/*
 * The optimizer step. With fp16 amp the step's gradients are checked for
 * inf and NaN on the device, the update kernels skip themselves after an
 * overflow and hn_k_amp_update moves the loss scale, all queued without a
 * wait: the host learns whether the step was skipped from the block copied
 * back with the step's result (read_result, backend_cuda.c).
 */
int cu_apply_update(struct hn_cuda *st, float lr, uint64_t step);
/* After the wait: was the update the call queued skipped for an fp16 overflow? */
int cu_update_skipped(const struct hn_cuda *st);
/* The fp16/bf16 copy of the weights made anew from the fp32 ones (amp; backend_cuda.c). */
int cu_refresh_params16(struct hn_cuda *st);

/* ---- layers.c: the layers and the passes through them ---- */

/* The backend trusts nothing in m: shapes chain, parameter ranges fit, pooling is as computed. */
int cu_check_model(const struct hn_model *m, char *err);

/* Grow the one workspace to need bytes (synchronising: the old one may be in use). */
int cu_ws_reserve(struct hn_cuda *st, size_t need);
/* Descriptors of conv layer i, and its algorithms chosen for max_batch. */
int cu_conv_create(struct hn_cuda *st, int i);
void cu_conv_destroy(struct hn_conv *c);
/* Every conv's descriptors and algorithms for batch size n (find: time them, --fast). */
int cu_conv_set_n(struct hn_cuda *st, int n, int find);
int cu_conv_forward(struct hn_cuda *st, int i, int n);
int cu_conv_backward(struct hn_cuda *st, int i, int n);
/*
 * Which batchnorms and adds take the ReLU that follows them into their
 * kernels (relu_fused): those whose own output slot no other layer reads,
 * so it need not be written; the ReLU's backward, which reads only its
 * output and its output's gradient, runs inside theirs, bit for bit as the
 * ReLU would. Under amp, which convs leave their output in 16 bits
 * (half_out) for the batchnorm after them, its only reader: the fp32 copy
 * was an exact conversion of it.
 */
void cu_plan_fusion(struct hn_cuda *st);
/* Forward through every layer to the loss (train: dropout on, for step); backward from it. */
int cu_forward(struct hn_cuda *st, int n, int train, uint64_t step);
int cu_lprof_init(struct hn_cuda *st);
int cu_lprof_mark(struct hn_cuda *st, int pass, int i);
int cu_lprof_collect(struct hn_cuda *st);
void cu_lprof_report(const struct hn_cuda *st);
void cu_lprof_free(struct hn_cuda *st);
int cu_backward(struct hn_cuda *st, int n, uint64_t step);

#endif
