/*
 * kernels.h - the small CUDA kernels of the GPU backend, behind plain C
 * launchers.
 *
 * kernels.cu (the layers) and kernels_step.cu (the training step) are the
 * only files compiled by nvcc; backend_cuda.c and layers.c (plain C, built
 * with the project's warnings) call these launchers. Each launcher
 * queues its kernel on the given stream and returns cudaGetLastError(), so a
 * bad launch configuration is caught at the call site; errors raised while
 * the kernel runs surface at the next synchronisation.
 *
 * Layouts match the CPU backend exactly: activations NCHW float32, input
 * tiles uint8 HWC, dense input flattened in CHW order. Half-precision
 * buffers (used only by --amp) are passed as void * so that C callers need
 * no fp16 type.
 */
#ifndef HN_CUDA_KERNELS_H
#define HN_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Per-batch result reduced on the device, copied back in one transfer. */
struct hn_k_result {
	double loss_sum;
	int correct;
	int bad_label; /* a label >= nclasses was seen (loss of that sample is 0) */
};

/*
 * --amp fp16's dynamic loss scale, kept on the device so that no step waits
 * for it. The gradients are made `scale` times too large (the softmax
 * gradient and the batchnorm statistics' slots multiply by it), the update
 * kernels multiply them by inv = 1 / scale, an overflow that
 * hn_k_check_finite found in the step's gradients makes every update kernel
 * return at once (the step is skipped), and hn_k_amp_update then halves the
 * scale, or doubles it after `growth` good updates in a row. Kernels given
 * NULL instead (fp32, bf16) use scale 1 and skip nothing.
 */
struct hn_k_amp {
	float scale, inv;
	int overflow; /* this step's gradients hold an inf or NaN */
	int good;     /* updates in a row without one */
};

/*
 * x[n][c][h][w] = tiles[n][h][w][c] / 255, then (x - mean[c]) * inv[c] for
 * c < 4 when norm.on (per-channel input normalisation, inv = 1 / std).
 */
struct hn_k_norm {
	float mean[4], inv[4];
	int on;
};
cudaError_t hn_k_tiles_to_chw(const uint8_t *tiles, float *x, int n, int h, int w, int c,
			      struct hn_k_norm norm, cudaStream_t s);

/* y[i][ch][p] += b[ch] for i < n, p < hw (conv bias: hw = H*W; dense bias: hw = 1). */
cudaError_t hn_k_bias_add(float *y, const float *b, int n, int c, int hw, cudaStream_t s);
/*
 * Per-channel sums (bias_grad, bn_stats, bn_bwd_sums) reduce in parts and
 * then in order, deterministically; each needs a scratch of
 * hn_k_chan_scratch(c) doubles on the device, not in use by another call.
 */
#define HN_K_CHAN_PARTS 64
static inline size_t hn_k_chan_scratch(int c)
{
	return (size_t)c * HN_K_CHAN_PARTS * 2;
}
/* db[ch] += sum over i, p of dy[i][ch][p]. */
cudaError_t hn_k_bias_grad(const float *dy, float *db, int n, int c, int hw, double *scratch,
			   cudaStream_t s);

/* y = max(x, 0); dx = dy where y > 0, else 0. */
cudaError_t hn_k_relu_fwd(const float *x, float *y, size_t count, cudaStream_t s);
cudaError_t hn_k_relu_bwd(const float *y, const float *dy, float *dx, size_t count, cudaStream_t s);
/* relu_bwd's dx written to both dx and dx2 (dx2 may be NULL) */
cudaError_t hn_k_relu_bwd2(const float *y, const float *dy, float *dx, float *dx2, size_t count,
			   cudaStream_t s);

/*
 * Max pooling, k x k window, stride, padding that never wins (2 * pad <= k;
 * out = (in + 2 * pad - k) / stride + 1). Ties go to the first maximum in
 * row-major window order. Forward records each output's argmax (its offset
 * in the channel plane) in idx when idx is not NULL (training); backward
 * gathers per input element from those records (no atomics, no second
 * search of the windows), so it is deterministic.
 */
cudaError_t hn_k_maxpool_fwd(const float *x, float *y, int *idx, int n, int c, int ih, int iw,
			     int oh, int ow, int k, int stride, int pad, cudaStream_t s);
cudaError_t hn_k_maxpool_bwd(const int *idx, const float *dy, float *dx, int n, int c, int ih,
			     int iw, int oh, int ow, int k, int stride, int pad, cudaStream_t s);

/* Residual blocks: y = a + b elementwise (y may be a or b); relu: then max(y, 0), as relu_fwd. */
cudaError_t hn_k_add(const float *a, const float *b, float *y, size_t count, int relu,
		     cudaStream_t s);

/*
 * Inverted dropout with rate p: keep with probability 1 - p, scale kept
 * values by 1 / (1 - p). The keep decision is a counter-based hash of
 * (seed, step, layer, element), so backward recomputes the same mask and no
 * mask is stored.
 */
cudaError_t hn_k_dropout_fwd(const float *x, float *y, size_t count, float p, uint64_t seed,
			     uint64_t step, int layer, cudaStream_t s);
cudaError_t hn_k_dropout_bwd(const float *dy, float *dx, size_t count, float p, uint64_t seed,
			     uint64_t step, int layer, cudaStream_t s);

/*
 * Softmax cross-entropy over logits[n][classes]. Writes the reduced loss
 * sum and correct count into *res (device memory). When dlogits is not
 * NULL it receives (softmax - onehot) * grad_scale (* amp->scale).
 */
cudaError_t hn_k_softmax_xent(const float *logits, const uint16_t *labels, int n, int classes,
			      float grad_scale, const struct hn_k_amp *amp, float *dlogits,
			      float *loss_tmp, int *correct_tmp, struct hn_k_result *res,
			      cudaStream_t s);

/*
 * Batch normalisation over x[n][c][hw], the cpu backend's arithmetic
 * (trainer/norm.c), each reduction one block per channel in a fixed tree
 * (deterministic):
 * stats: mean[c] and invstd[c] = 1 / sqrt(var + 1e-5) of the batch; when run
 *   is not NULL, run[c] += (mean * n) * scale and run[C + c] += (unbiased
 *   var * n) * scale (* amp->scale) (the running statistics' gradient
 *   slots; scale is the step's gradient scale per sample, as for the
 *   gradients);
 * running: mean and invstd from the running statistics run[0..2C);
 * apply: y = x * (gamma * invstd) + (beta - mean * gamma * invstd), and with
 *   relu then max(y, 0) bit for bit as relu_fwd would (a ReLU fused into it);
 * bwd_sums: dbeta[c] += sum dy, dgamma[c] += sum dy * xhat, and their batch
 *   means into mdy, mdyx;
 * bwd: dx = gamma * invstd * (dy - mdy - xhat * mdyx);
 * both with dy taken through a fused ReLU's backward first where ry (the
 * ReLU's output) is not NULL: dy where ry > 0, else 0, as relu_bwd gives.
 * x is fp32, or under amp the preceding conv's 16-bit output (xt), read
 * exactly as its conversion to fp32 would have been; bwd's dx is then of
 * x's type too (for that conv's 16-bit backward), rounded to nearest even.
 */
enum { HN_K_X_F32, HN_K_X_F16, HN_K_X_BF16 }; /* x's element type (xt) */
cudaError_t hn_k_bn_stats(const void *x, int xt, int n, int c, int hw, float *mean, float *invstd,
			  float *run, float scale, const struct hn_k_amp *amp, double *scratch,
			  cudaStream_t s);
cudaError_t hn_k_bn_running(const float *run, int c, float *mean, float *invstd, cudaStream_t s);
cudaError_t hn_k_bn_apply(const void *x, int xt, float *y, int n, int c, int hw, const float *mean,
			  const float *invstd, const float *gamma, const float *beta, int relu,
			  cudaStream_t s);
cudaError_t hn_k_bn_bwd_sums(const float *dy, const void *x, int xt, const float *ry, int n, int c,
			     int hw, const float *mean, const float *invstd, float *dgamma,
			     float *dbeta, float *mdy, float *mdyx, double *scratch,
			     cudaStream_t s);
cudaError_t hn_k_bn_bwd(const float *dy, const void *x, int xt, const float *ry, void *dx, int n,
			int c, int hw, const float *mean, const float *invstd, const float *gamma,
			const float *mdy, const float *mdyx, cudaStream_t s);
/* Global average pooling: y[plane] = mean of x[plane][0..hw); dx[plane][p] = dy[plane] / hw. */
cudaError_t hn_k_avgpool_fwd(const float *x, float *y, size_t planes, int hw, cudaStream_t s);
cudaError_t hn_k_avgpool_bwd(const float *dy, float *dx, size_t planes, int hw, cudaStream_t s);
/*
 * Running statistics: run = (1 - m) * run + m * grad * inv. The update
 * kernels below take inv = amp->inv (1 without amp) and do nothing when
 * amp->overflow is set.
 */
cudaError_t hn_k_running(float *run, const float *grad, size_t count, float m,
			 const struct hn_k_amp *amp, cudaStream_t s);

/* Optimizer updates over count parameters; g = grad * inv. */
cudaError_t hn_k_sgd(float *w, const float *grad, size_t count, float lr, float wd,
		     const struct hn_k_amp *amp, cudaStream_t s);
cudaError_t hn_k_momentum(float *w, const float *grad, float *v, size_t count, float lr, float mu,
			  float wd, const struct hn_k_amp *amp, cudaStream_t s);
/* AdamW; c1 = 1 / (1 - beta1^t), c2 = 1 / (1 - beta2^t), computed on the host in double. */
cudaError_t hn_k_adam(float *w, const float *grad, float *m, float *v, size_t count, float lr,
		      float beta1, float beta2, float eps, float wd, float c1, float c2,
		      const struct hn_k_amp *amp, cudaStream_t s);
/*
 * After the step's update kernels: halve amp->scale on an overflow (not
 * below min_scale) and clear good, else count a good update and double
 * the scale (not above max_scale) after growth of them; inv follows.
 */
cudaError_t hn_k_amp_update(struct hn_k_amp *amp, int growth, float min_scale, float max_scale,
			    cudaStream_t s);

/* Mixed precision helpers: the 16-bit buffers hold fp16, or bf16 when bf16 is set. */
cudaError_t hn_k_f32_to_half(const float *x, void *y, size_t count, int bf16, cudaStream_t s);
cudaError_t hn_k_half_to_f32(const void *x, float *y, size_t count, int bf16, cudaStream_t s);
/* acc[i] += (float)x16[i] */
cudaError_t hn_k_half_accumulate(const void *x16, float *acc, size_t count, int bf16,
				 cudaStream_t s);
/* *flag = 1 if any of x[0..count) is inf or NaN (flag is not cleared here). */
cudaError_t hn_k_check_finite(const float *x, size_t count, int *flag, cudaStream_t s);
/*
 * out[i] = ((parts[0][i] + parts[1][i]) + parts[2][i]) + ... over nparts
 * rows of stride floats, for i < len: the ranks' gradient slices added in
 * rank order, as the cpu path adds them.
 */
cudaError_t hn_k_sum_parts(const float *parts, int nparts, size_t stride, size_t len, float *out,
			   cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
