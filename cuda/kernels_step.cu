/*
 * kernels_step.cu - the kernels of the GPU backend's training step (see
 * kernels.h for the contracts): the amp loss scale's update, the running
 * averages, the optimizers (SGD, momentum, Adam), the conversions of mixed
 * precision and the sum of the ranks' gradients. Split from the layers'
 * kernels (kernels.cu) along that seam; the same plain rules hold here.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cuda/kernels.h"
#include "cuda/kernels_int.cuh"

/* ---- the amp loss scale (kernels.h: struct hn_k_amp) ---- */

__global__ void k_amp_update(struct hn_k_amp *a, int growth, float min_scale, float max_scale)
{
	if (a->overflow) {
		a->good = 0;
		if (a->scale > min_scale)
			a->scale *= 0.5f;
	} else if (++a->good >= growth) {
		a->good = 0;
		if (a->scale < max_scale)
			a->scale *= 2.0f;
	}
	a->inv = 1.0f / a->scale;
}

extern "C" cudaError_t hn_k_amp_update(struct hn_k_amp *amp, int growth, float min_scale,
				       float max_scale, cudaStream_t s)
{
	k_amp_update<<<1, 1, 0, s>>>(amp, growth, min_scale, max_scale);
	return cudaGetLastError();
}
__global__ void k_running(float *run, const float *grad, size_t count, float m,
			  const struct hn_k_amp *amp)
{
	if (amp_skip(amp))
		return;
	float inv = amp_inv(amp);
	GRID_LOOP(i, count)
	{
		run[i] = (1.0f - m) * run[i] + m * (grad[i] * inv);
	}
}

extern "C" cudaError_t hn_k_running(float *run, const float *grad, size_t count, float m,
				    const struct hn_k_amp *amp, cudaStream_t s)
{
	if (count == 0)
		return cudaSuccess;
	k_running<<<hn_blocks(count), HN_K_THREADS, 0, s>>>(run, grad, count, m, amp);
	return cudaGetLastError();
}

/* ---- optimizers ---- */

__global__ void k_sgd(float *w, const float *grad, size_t count, float lr, float wd,
		      const struct hn_k_amp *amp)
{
	if (amp_skip(amp))
		return;
	float inv = amp_inv(amp);
	GRID_LOOP(i, count)
	{
		float g = grad[i] * inv + wd * w[i];
		w[i] -= lr * g;
	}
}

__global__ void k_momentum(float *w, const float *grad, float *v, size_t count, float lr, float mu,
			   float wd, const struct hn_k_amp *amp)
{
	if (amp_skip(amp))
		return;
	float inv = amp_inv(amp);
	GRID_LOOP(i, count)
	{
		float g = grad[i] * inv + wd * w[i];
		float vi = mu * v[i] + g;
		v[i] = vi;
		w[i] -= lr * vi;
	}
}

__global__ void k_adam(float *w, const float *grad, float *m, float *v, size_t count, float lr,
		       float b1, float b2, float eps, float decay, float c1, float c2,
		       const struct hn_k_amp *amp)
{
	if (amp_skip(amp))
		return;
	float inv = amp_inv(amp);
	GRID_LOOP(i, count)
	{
		float g = grad[i] * inv;
		float mi = b1 * m[i] + (1.0f - b1) * g;
		float vi = b2 * v[i] + (1.0f - b2) * g * g;
		m[i] = mi;
		v[i] = vi;
		/* AdamW, written as the cpu backend does (trainer/optim.c) for equal rounding */
		w[i] = w[i] * decay - lr * (mi * c1) / (sqrtf(vi * c2) + eps);
	}
}

extern "C" cudaError_t hn_k_sgd(float *w, const float *grad, size_t count, float lr, float wd,
				const struct hn_k_amp *amp, cudaStream_t s)
{
	if (count == 0)
		return cudaSuccess;
	k_sgd<<<hn_blocks(count), HN_K_THREADS, 0, s>>>(w, grad, count, lr, wd, amp);
	return cudaGetLastError();
}

extern "C" cudaError_t hn_k_momentum(float *w, const float *grad, float *v, size_t count, float lr,
				     float mu, float wd, const struct hn_k_amp *amp, cudaStream_t s)
{
	if (count == 0)
		return cudaSuccess;
	k_momentum<<<hn_blocks(count), HN_K_THREADS, 0, s>>>(w, grad, v, count, lr, mu, wd, amp);
	return cudaGetLastError();
}

extern "C" cudaError_t hn_k_adam(float *w, const float *grad, float *m, float *v, size_t count,
				 float lr, float beta1, float beta2, float eps, float wd, float c1,
				 float c2, const struct hn_k_amp *amp, cudaStream_t s)
{
	if (count == 0)
		return cudaSuccess;
	k_adam<<<hn_blocks(count), HN_K_THREADS, 0, s>>>(w, grad, m, v, count, lr, beta1, beta2,
							 eps, 1.0f - lr * wd, c1, c2, amp);
	return cudaGetLastError();
}

/* ---- mixed precision ---- */

/*
 * H: __half or __nv_bfloat16 (to_h / from_h: kernels_int.cuh). Two at a
 * time: the same rounding (to nearest even, each half of the pair alone).
 */
static __device__ __forceinline__ void to_h2(float2 v, __half2 *y)
{
	*y = __floats2half2_rn(v.x, v.y);
}
static __device__ __forceinline__ void to_h2(float2 v, __nv_bfloat162 *y)
{
	*y = __floats2bfloat162_rn(v.x, v.y);
}
static __device__ __forceinline__ float2 from_h2(__half2 v)
{
	return __half22float2(v);
}
static __device__ __forceinline__ float2 from_h2(__nv_bfloat162 v)
{
	return __bfloat1622float2(v);
}

template <typename H> __global__ void k_f32_to_h(const float *x, H *y, size_t count)
{
	GRID_LOOP(i, count)
	{
		to_h(x[i], &y[i]);
	}
}

template <typename H> __global__ void k_h_to_f32(const H *x, float *y, size_t count)
{
	GRID_LOOP(i, count)
	{
		y[i] = from_h(x[i]);
	}
}

/*
 * The same conversions by pairs (8-byte float loads and stores, 4-byte
 * half ones), for x and y aligned to them; an odd last element alone. The
 * activations' conversions move a step's every conv input and output.
 */
template <typename H, typename H2>
__global__ void k_f32_to_h_pairs(const float *x, H *y, size_t count)
{
	const float2 *x2 = (const float2 *)x;
	H2 *y2 = (H2 *)y;
	GRID_LOOP(i, count / 2)
	{
		to_h2(x2[i], &y2[i]);
	}
	if ((count & 1) && blockIdx.x == 0 && threadIdx.x == 0)
		to_h(x[count - 1], &y[count - 1]);
}

template <typename H, typename H2>
__global__ void k_h_to_f32_pairs(const H *x, float *y, size_t count)
{
	const H2 *x2 = (const H2 *)x;
	float2 *y2 = (float2 *)y;
	GRID_LOOP(i, count / 2)
	{
		y2[i] = from_h2(x2[i]);
	}
	if ((count & 1) && blockIdx.x == 0 && threadIdx.x == 0)
		y[count - 1] = from_h(x[count - 1]);
}

/* f32 at f aligned for float2, halves at h for a pair of them */
static int pairs_ok(const void *f, const void *h)
{
	return (uintptr_t)f % 8 == 0 && (uintptr_t)h % 4 == 0;
}

template <typename H> __global__ void k_h_accumulate(const H *x, float *acc, size_t count)
{
	GRID_LOOP(i, count)
	{
		acc[i] += from_h(x[i]);
	}
}

__global__ void k_check_finite(const float *x, size_t count, int *flag)
{
	GRID_LOOP(i, count)
	{
		if (!isfinite(x[i]))
			*flag = 1; /* benign race: every writer stores 1 */
	}
}

extern "C" cudaError_t hn_k_f32_to_half(const float *x, void *y, size_t count, int bf16,
					cudaStream_t s)
{
	if (count == 0)
		return cudaSuccess;
	unsigned b = hn_blocks(count / 2 ? count / 2 : 1);
	if (pairs_ok(x, y) && bf16)
		k_f32_to_h_pairs<__nv_bfloat16, __nv_bfloat162>
			<<<b, HN_K_THREADS, 0, s>>>(x, (__nv_bfloat16 *)y, count);
	else if (pairs_ok(x, y))
		k_f32_to_h_pairs<__half, __half2><<<b, HN_K_THREADS, 0, s>>>(x, (__half *)y, count);
	else if (bf16)
		k_f32_to_h<<<hn_blocks(count), HN_K_THREADS, 0, s>>>(x, (__nv_bfloat16 *)y, count);
	else
		k_f32_to_h<<<hn_blocks(count), HN_K_THREADS, 0, s>>>(x, (__half *)y, count);
	return cudaGetLastError();
}

extern "C" cudaError_t hn_k_half_to_f32(const void *x, float *y, size_t count, int bf16,
					cudaStream_t s)
{
	if (count == 0)
		return cudaSuccess;
	unsigned b = hn_blocks(count / 2 ? count / 2 : 1);
	if (pairs_ok(y, x) && bf16)
		k_h_to_f32_pairs<__nv_bfloat16, __nv_bfloat162>
			<<<b, HN_K_THREADS, 0, s>>>((const __nv_bfloat16 *)x, y, count);
	else if (pairs_ok(y, x))
		k_h_to_f32_pairs<__half, __half2>
			<<<b, HN_K_THREADS, 0, s>>>((const __half *)x, y, count);
	else if (bf16)
		k_h_to_f32<<<hn_blocks(count), HN_K_THREADS, 0, s>>>((const __nv_bfloat16 *)x, y,
								     count);
	else
		k_h_to_f32<<<hn_blocks(count), HN_K_THREADS, 0, s>>>((const __half *)x, y, count);
	return cudaGetLastError();
}

extern "C" cudaError_t hn_k_half_accumulate(const void *x16, float *acc, size_t count, int bf16,
					    cudaStream_t s)
{
	if (count == 0)
		return cudaSuccess;
	if (bf16)
		k_h_accumulate<<<hn_blocks(count), HN_K_THREADS, 0, s>>>((const __nv_bfloat16 *)x16,
									 acc, count);
	else
		k_h_accumulate<<<hn_blocks(count), HN_K_THREADS, 0, s>>>((const __half *)x16, acc,
									 count);
	return cudaGetLastError();
}

extern "C" cudaError_t hn_k_check_finite(const float *x, size_t count, int *flag, cudaStream_t s)
{
	if (count == 0)
		return cudaSuccess;
	k_check_finite<<<hn_blocks(count), HN_K_THREADS, 0, s>>>(x, count, flag);
	return cudaGetLastError();
}

__global__ void k_sum_parts(const float *parts, int nparts, size_t stride, size_t len, float *out)
{
	GRID_LOOP(i, len)
	{
		float acc = parts[i];
		for (int q = 1; q < nparts; q++)
			acc = __fadd_rn(acc, parts[(size_t)q * stride + i]);
		out[i] = acc;
	}
}

extern "C" cudaError_t hn_k_sum_parts(const float *parts, int nparts, size_t stride, size_t len,
				      float *out, cudaStream_t s)
{
	if (len == 0)
		return cudaSuccess;
	k_sum_parts<<<hn_blocks(len), HN_K_THREADS, 0, s>>>(parts, nparts, stride, len, out);
	return cudaGetLastError();
}
