/*
 * gpu_common.h - shared by the gpu tests: load the plugin the way hntrain
 * does (dlopen + dlsym, never linked) and skip (77) only when the plugin
 * itself says there is no usable GPU.
 *
 * The plugin path comes from $HNTRAIN_CUDA_PLUGIN (tests/meson.build points
 * it at the build tree). A plugin that cannot be loaded is a failure, not a
 * skip: the build said CUDA was there.
 */
#ifndef HN_TEST_GPU_COMMON_H
#define HN_TEST_GPU_COMMON_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "trainer/backend.h"

static inline const struct hn_backend_ops *gpu_test_load(const char *prog)
{
	const char *path = getenv("HNTRAIN_CUDA_PLUGIN");
	if (!path || !*path) {
		fprintf(stderr, "%s: HNTRAIN_CUDA_PLUGIN is not set\n", prog);
		exit(1);
	}
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "%s: cannot load %s: %s\n", prog, path, dlerror());
		exit(1);
	}
	hn_cuda_backend_fn fn = (hn_cuda_backend_fn)dlsym(h, "hn_cuda_backend");
	hn_cuda_probe_fn probe = (hn_cuda_probe_fn)dlsym(h, "hn_cuda_probe");
	if (!fn || !probe) {
		fprintf(stderr, "%s: %s lacks hn_cuda_backend or hn_cuda_probe\n", prog, path);
		exit(1);
	}
	char err[HN_ERR_MAX] = "";
	const struct hn_backend_ops *ops = fn(err);
	if (!ops) {
		printf("%s: SKIP: %s\n", prog, err);
		exit(77);
	}
	char info[256] = "";
	uint64_t fr = 0, tot = 0;
	if (probe(info, sizeof(info), &fr, &tot) < 0 || tot == 0 || fr > tot) {
		fprintf(stderr, "%s: hn_cuda_probe failed on a machine with a GPU: %s\n", prog,
			info);
		exit(1);
	}
	printf("%s: %s, %.1f of %.1f GiB free\n", prog, info, fr / 1073741824.0,
	       tot / 1073741824.0);
	return ops;
}

#endif
