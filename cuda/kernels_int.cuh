/*
 * kernels_int.cuh - what the two kernel files of the GPU backend share
 * (kernels.cu: the layers, kernels_step.cu: the training step): the launch
 * shape, the grid-stride loop, the reading of the amp loss scale
 * (kernels.h: struct hn_k_amp; NULL when amp is off), and the scalar
 * conversions to and from 16 bits. nvcc only.
 */
#ifndef HN_CUDA_KERNELS_INT_CUH
#define HN_CUDA_KERNELS_INT_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stddef.h>

#include "cuda/kernels.h"

#define HN_K_THREADS	256
#define HN_K_MAX_BLOCKS 65535

static inline unsigned hn_blocks(size_t count)
{
	size_t b = (count + HN_K_THREADS - 1) / HN_K_THREADS;
	if (b < 1)
		b = 1;
	if (b > HN_K_MAX_BLOCKS)
		b = HN_K_MAX_BLOCKS;
	return (unsigned)b;
}

#define GRID_LOOP(i, count)                                                                        \
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (count);                \
	     i += (size_t)blockDim.x * gridDim.x)

__device__ __forceinline__ static float amp_scale(const struct hn_k_amp *a)
{
	return a ? a->scale : 1.0f;
}

__device__ __forceinline__ static float amp_inv(const struct hn_k_amp *a)
{
	return a ? a->inv : 1.0f;
}

__device__ __forceinline__ static int amp_skip(const struct hn_k_amp *a)
{
	return a && a->overflow;
}

/*
 * To and from 16 bits (__half or __nv_bfloat16), rounding to nearest even;
 * the float overloads let a kernel templated on its element type take fp32
 * as it is.
 */
static __device__ __forceinline__ void to_h(float x, __half *y)
{
	*y = __float2half_rn(x); /* beyond 65504 -> inf, caught by the overflow check */
}
static __device__ __forceinline__ void to_h(float x, __nv_bfloat16 *y)
{
	*y = __float2bfloat16_rn(x);
}
static __device__ __forceinline__ void to_h(float x, float *y)
{
	*y = x;
}
static __device__ __forceinline__ float from_h(__half x)
{
	return __half2float(x);
}
static __device__ __forceinline__ float from_h(__nv_bfloat16 x)
{
	return __bfloat162float(x);
}
static __device__ __forceinline__ float from_h(float x)
{
	return x;
}

#endif
