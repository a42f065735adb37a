/*
 * plugin.h - the two symbols the plugin hntrain-cuda.so exports.
 *
 * hntrain never links this plugin: trainer/backend_load.c dlopens it and
 * looks these names up with dlsym (types hn_cuda_backend_fn and
 * hn_cuda_probe_fn in trainer/backend.h). Everything else in the plugin is
 * static, so these are its whole ABI.
 */
#ifndef HN_CUDA_PLUGIN_H
#define HN_CUDA_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/backend.h"

/* The plugin is built with hidden visibility; only these two are exported. */
#define HN_CUDA_EXPORT __attribute__((visibility("default")))

/*
 * The gpu backend's ops table, or NULL with err (HN_ERR_MAX bytes) set when
 * no GPU can be used: "no CUDA device found (cudaGetDeviceCount: <why>)" or
 * "CUDA driver too old (...)". Safe to call on a machine without a GPU or
 * driver; it only asks the CUDA runtime how many devices there are.
 */
HN_CUDA_EXPORT const struct hn_backend_ops *hn_cuda_backend(char *err);

/*
 * For --plan: describe device 0 into info ("NVIDIA H100 80GB HBM3, sm_90,
 * 132 SMs, driver 13.0, cuDNN 9.19.0") and report its free and total memory.
 * Returns 0, or -ENODEV with the reason in info when there is no usable GPU.
 */
HN_CUDA_EXPORT int hn_cuda_probe(char *info, size_t cap, uint64_t *free_bytes,
				 uint64_t *total_bytes);

#endif
