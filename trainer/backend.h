/*
 * backend.h - the small interface between hntrain and a compute backend.
 *
 * hntrain owns the data (loader threads, queue, timing), the model
 * description, the learning-rate schedule, checkpoints and logs. A backend
 * owns the maths: given a model description it keeps the parameters (all in
 * one allocation, laid out as hn_model says), the gradients and the optimizer
 * state where it computes (host for cpu, device for gpu), and runs
 * forward/backward/update on batches of uint8 HWC tiles.
 *
 * Two backends: "cpu" (backend_cpu.c: im2col + OpenBLAS sgemm) and "gpu"
 * (cuda/: cuDNN + cuBLAS + kernels, built as the plugin hntrain-cuda.so and
 * loaded with dlopen, so one hntrain binary runs where CUDA is absent).
 *
 * Input normalisation is part of the contract: x_float = (tile_byte / 255 -
 * mean[c]) / std[c], with the per-channel mean and std of
 * hn_backend_config (0 and 1 unless set).
 * Labels are uint16 class indices < nclasses.
 * All functions return >= 0 or a negative errno; err (HN_ERR_MAX bytes, may
 * be NULL) gets a message for the user.
 */
#ifndef HN_BACKEND_H
#define HN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#define HN_ERR_MAX    256
#define HN_MAX_LAYERS 256 /* resnet50 is 190 layers in this flat list */

enum hn_layer_kind {
	HN_LAYER_CONV2D,  /* k x k, stride, pad; weights [out_c][in_c][k][k], bias [out_c] or none
			     (b_len 0, as residual networks' convolutions before batchnorm) */
	HN_LAYER_MAXPOOL, /* k x k window, stride, pad (2 * pad <= k; padding never wins) */
	HN_LAYER_RELU,
	HN_LAYER_DENSE,	  /* weights [out][in] (row-major), bias [out]; flattens CHW input */
	HN_LAYER_DROPOUT, /* inverted dropout with rate p; identity at eval */
	/*
	 * batch normalisation per channel: y = gamma * (x - mean) / sqrt(var + eps) + beta.
	 * Training normalises with the statistics of the batch handed to train_step,
	 * evaluation with the running ones. Parameters: gamma [C] (w), beta [C] (b), then
	 * the running mean [C] and running (unbiased) variance [C] (s): the statistics
	 * live in the parameter block, so checkpoints and exports carry them, but no
	 * optimizer touches them and no weight decay applies to gamma and beta.
	 */
	HN_LAYER_BATCHNORM,
	HN_LAYER_AVGPOOL, /* global average pooling: C x H x W -> C x 1 x 1 */
	/*
	 * Residual networks in the flat list (docs/HNTRAIN.md, "Residual blocks").
	 * Activation slot j is the model input (j 0) or layer j-1's output.
	 * SAVE passes its input on unchanged and marks it as a block's input X.
	 * Exactly one later layer takes X again besides the next one: an ADD
	 * (identity shortcut), or a CONV2D whose `from` names the SAVE's slot (a
	 * 1x1 projection, followed by its batchnorm and then the ADD). ADD gives
	 * in + slot[shortcut], where the shortcut slot is a SAVE's output or the
	 * output of the layer just before such a projection conv (the end of the
	 * block's main path). No parameters in either; backward adds the two
	 * gradients of X where the SAVE is.
	 */
	HN_LAYER_SAVE,
	HN_LAYER_ADD,
};

#define HN_BN_EPS      1e-5f /* PyTorch's BatchNorm2d defaults */
#define HN_BN_MOMENTUM 0.1f  /* running = (1 - m) * running + m * batch statistic */

/*
 * Activations are NCHW float32. The input tile (HWC uint8) is converted to
 * CHW float by the backend. A dense layer sees its input flattened in CHW
 * order, so weights are portable between backends.
 */
struct hn_layer {
	enum hn_layer_kind kind;
	int in_c, in_h, in_w;	 /* input shape (per sample) */
	int out_c, out_h, out_w; /* output shape (per sample) */
	int k, stride, pad;	 /* conv, maxpool */
	float p;		 /* dropout rate */
	int from;		 /* conv: input slot (a SAVE's output), 0: the previous layer's */
	int shortcut;		 /* add: the slot added to the input */
	size_t w_off, w_len;	 /* weights: offset/length in floats within params (0 if none) */
	size_t b_off, b_len;	 /* bias */
	size_t s_off, s_len;	 /* batchnorm running statistics (mean, var), 2 * C, or 0 */
};

struct hn_model {
	char name[32];
	int in_c, in_h, in_w; /* input = tile shape (C from the tile) */
	int nclasses;	      /* last layer's output size */
	int nlayers;
	struct hn_layer layers[HN_MAX_LAYERS];
	size_t nparams; /* total floats in the one parameter allocation */
};

enum hn_optim_kind { HN_OPT_SGD, HN_OPT_MOMENTUM, HN_OPT_ADAM };

struct hn_optim {
	enum hn_optim_kind kind;
	float momentum;	    /* momentum (0.9) */
	float beta1, beta2; /* adam (0.9, 0.999) */
	float eps;	    /* adam (1e-8) */
	float weight_decay; /* decoupled (AdamW-style) for adam, L2 added to grad for sgd/momentum
			     */
};

/* Floats of optimizer state per parameter: 0 sgd, 1 momentum, 2 adam. */
static inline int hn_optim_state_per_param(enum hn_optim_kind k)
{
	return k == HN_OPT_ADAM ? 2 : k == HN_OPT_MOMENTUM ? 1 : 0;
}

#define HN_NORM_CH 4 /* channels input normalisation covers (hn_backend_config) */

/*
 * --amp: convolutions and dense products in 16-bit floats on tensor cores,
 * fp32 master weights. fp16 keeps 11 significant bits and needs a dynamic
 * loss scale (its range ends at 65504); bf16 keeps 8 bits and fp32's range,
 * so it needs none.
 */
#define HN_AMP_FP16 1
#define HN_AMP_BF16 2

struct hn_backend_config {
	int threads;	  /* maths threads (cpu); 0 = default */
	int max_batch;	  /* largest batch passed to train/eval */
	int amp;	  /* gpu: mixed precision: 0 off, HN_AMP_FP16 or HN_AMP_BF16 */
	int fast;	  /* gpu: fastest conv algorithms, timed, not bit-reproducible */
	int tf32;	  /* gpu: fp32 convolutions and products on tensor cores (TF32) */
	int device_index; /* gpu: the rank's local rank on its machine (or the ordinal alone) */
	int device_ranks; /* gpu: ranks on its machine (0 or 1: alone); cuda/ranks.h picks the GPU
			   */
	uint64_t seed;	  /* dropout randomness: seeded per (seed, step) */
	int rank;	  /* data-parallel rank (0 alone): its own dropout masks */
	/*
	 * Input normalisation per channel (channels past HN_NORM_CH keep 0 and 1):
	 * x = (byte / 255 - mean[c]) / std[c]. A zeroed config means mean 0, std 1.
	 */
	float mean[HN_NORM_CH], std[HN_NORM_CH];
};

struct hn_step_result {
	double loss_sum;  /* sum over the batch of per-sample cross-entropy */
	int correct;	  /* argmax == label count */
	double compute_s; /* device-side time of this call where the backend can tell
			     (CUDA events; the trainer logs host time, this is for
			     the backend's own tests and profile); 0 where it cannot */
	int skipped;	  /* amp: update skipped because of overflow */
};

typedef struct hn_backend hn_backend;

struct hn_backend_ops {
	const char *name;
	/* Create state for model m with optimizer o; params initialised from init (host, nparams).
	 */
	int (*create)(const struct hn_model *m, const struct hn_optim *o,
		      const struct hn_backend_config *cfg, const float *init, void **state,
		      char *err);
	void (*destroy)(void *state);
	/*
	 * Forward + backward on n samples (tiles: n*in_h*in_w*in_c uint8 HWC;
	 * labels: n). Gradients are averaged over the samples of the
	 * accumulation group: grad += dL/dw * (1 / group_size). When apply is
	 * set, take an optimizer step with learning rate lr and zero the grads.
	 * step is the optimizer step count after this update (adam bias
	 * correction) and the dropout stream index. n may be 0 with apply set
	 * and earlier batches summed: then only the step is taken.
	 */
	int (*train_step)(void *state, const uint8_t *tiles, const uint16_t *labels, int n,
			  int group_size, int apply, float lr, uint64_t step,
			  struct hn_step_result *res);
	/* Forward only (dropout off): loss_sum and correct. */
	int (*evaluate)(void *state, const uint8_t *tiles, const uint16_t *labels, int n,
			struct hn_step_result *res);
	/* Copy parameters / optimizer state to or from host buffers. */
	int (*get_params)(void *state, float *params);
	int (*set_params)(void *state, const float *params);
	int (*get_opt_state)(void *state, float *opt); /* nparams * per_param floats */
	int (*set_opt_state)(void *state, const float *opt);
	/* Human-readable device description ("OpenBLAS 0.3.21, 2 threads", "NVIDIA H100,
	 * cuDNN 9.x"). */
	const char *(*describe)(void *state);
	/* Bytes of backend memory for weights, grads, opt state and activations at max_batch. */
	uint64_t (*memory_bytes)(void *state);
	/*
	 * Optional (cpu; NULL where the gradients live on a device): the
	 * gradients of the group so far (train_step calls without apply),
	 * folded into one host buffer of nparams floats, the threads' parts
	 * added in thread order. Data-parallel training sums it over the ranks
	 * in place, then applies it with train_step(n 0, apply 1).
	 */
	float *(*grads)(void *state);
	/*
	 * Optional (gpu; NULL where the backend reads the loader's memory in
	 * place, as the cpu backend does): the batch that the next train_step
	 * or evaluate call will be given, announced before the current call so
	 * that the backend moves it while the current call computes (the gpu
	 * copies it to the device on its copy stream). The consuming call
	 * passes the same tiles, labels and n; the caller keeps that memory
	 * unchanged until that call returns. A call given other pointers copies
	 * its own batch as usual and drops the announced one, so stage() never
	 * changes a result, only when the copy happens. 0 or -errno.
	 */
	int (*stage)(void *state, const uint8_t *tiles, const uint16_t *labels, int n);
	/*
	 * Optional (gpu, with NCCL): data-parallel training that sums the
	 * gradients where they live, for a backend without grads(). Rank 0
	 * calls dist_id, which writes a communicator id of at most cap bytes
	 * to id and returns its length; the trainer sends those bytes to every
	 * rank (dist.h), and each calls dist_join with them, its rank and the
	 * number of ranks. dist_sum_grads then replaces the group's gradients
	 * (train_step calls without apply) by their sum over the ranks, added
	 * in rank order, and returns when it is done; train_step(n 0, apply 1)
	 * applies it. Each returns 0 (dist_id: the length) or -errno, with a
	 * message in err (HN_ERR_MAX bytes).
	 */
	int (*dist_id)(void *state, void *id, size_t cap, char *err);
	int (*dist_join)(void *state, const void *id, size_t len, int rank, int size, char *err);
	int (*dist_sum_grads)(void *state, char *err);
};

/* The cpu backend, always built. */
extern const struct hn_backend_ops hn_backend_cpu;
/*
 * The bytes the cpu backend allocates for m with cfg (parameters, gradients,
 * optimizer state, activations, the kept im2col or Winograd matrices, each
 * thread's scratch), computed without allocating them: --plan. 0: no memory.
 */
uint64_t hn_backend_cpu_bytes(const struct hn_model *m, const struct hn_optim *o,
			      const struct hn_backend_config *cfg);
/* The cpu backend's thread count for --threads asked (0: one per online CPU, at most 64). */
int hn_backend_cpu_threads(int asked);
/* What the cpu backend computes with ("OpenBLAS 0.3.21 DYNAMIC_ARCH ... SkylakeX", and where
 * hntrain chose that kernel set, from what), for --version and the backend line. */
const char *hn_backend_cpu_library(void);
/*
 * blas_core.c: OpenBLAS picks its kernels from a table of CPU models; on a
 * CPU newer than its table it falls back to a generic core (Prescott) and
 * runs several times slower. hn_blas_core_want() names the core to ask for
 * (NULL: the choice is fine); hn_blas_core_check() runs first in main and,
 * when OpenBLAS fell back and OPENBLAS_CORETYPE is not set, sets it and
 * re-executes hntrain (OpenBLAS reads it only as it loads), or warns.
 */
const char *hn_blas_core_want(const char *chosen, int avx2, int avx512);
void hn_blas_core_check(char **argv);
/* The kernel set OpenBLAS had taken before that re-execution, or NULL. */
const char *hn_blas_core_fell_back(void);

/*
 * The gpu backend: the plugin "hntrain-cuda.so" exports
 *   const struct hn_backend_ops *hn_cuda_backend(char *err);
 * which returns NULL (with err set: "no CUDA device found", "CUDA driver
 * too old") when no GPU can be used, and
 *   int hn_cuda_probe(char *info, size_t cap, uint64_t *free_bytes, uint64_t *total_bytes);
 * for --plan. hn_backend_load() finds the plugin next to the hntrain binary,
 * in the install libdir, or in $HNTRAIN_CUDA_PLUGIN.
 */
#define HN_CUDA_PLUGIN_NAME "hntrain-cuda.so"
typedef const struct hn_backend_ops *(*hn_cuda_backend_fn)(char *err);
typedef int (*hn_cuda_probe_fn)(char *info, size_t cap, uint64_t *free_bytes,
				uint64_t *total_bytes);

/* "cpu" or "gpu" -> ops, or NULL with err set (unknown name, plugin absent, no GPU). */
const struct hn_backend_ops *hn_backend_load(const char *device, char *err);

#endif
