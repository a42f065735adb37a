/*
 * backend_load.c - pick the compute backend: "cpu" is linked in, "gpu" is
 * the plugin hntrain-cuda.so, loaded at run time with dlopen.
 *
 * The same installed hntrain then starts on a machine without CUDA
 * libraries, and uses a GPU where there is one. The plugin is looked for, in
 * order: $HNTRAIN_CUDA_PLUGIN (the file, or a folder holding it), next to
 * the hntrain binary, ../cuda/ beside it (the build tree), ../<libdir>/hntrain
 * relative to it (a relocated install), and the configured install libdir.
 * Every failure is told apart for the user: no plugin built or installed, a
 * plugin whose CUDA libraries cannot load (cuda_libs.c looks for them where
 * the plugin's RUNPATH does not say, and names what it searched), or no
 * usable GPU.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer/backend.h"
#include "trainer/backend_load.h"
#include "trainer/cuda_libs.h"
#include "trainer/dist.h"

#ifndef HN_PLUGIN_DIR
#define HN_PLUGIN_DIR "/usr/local/lib/hntrain"
#endif
#ifndef HN_LIBDIR_REL
#define HN_LIBDIR_REL "lib"
#endif

static void *plugin_handle;

/* Candidate paths, in search order; returns how many were written. */
static int candidates(char out[][PATH_MAX], int max)
{
	int n = 0;
	const char *env = getenv("HNTRAIN_CUDA_PLUGIN");
	if (env && *env && n < max) {
		size_t l = strlen(env);
		if (l > 3 && !strcmp(env + l - 3, ".so"))
			snprintf(out[n++], PATH_MAX, "%s", env);
		else
			snprintf(out[n++], PATH_MAX, "%s/%s", env, HN_CUDA_PLUGIN_NAME);
	}
	char exe[PATH_MAX];
	ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (l > 0) {
		exe[l] = 0;
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = 0;
			if (n < max)
				snprintf(out[n++], PATH_MAX, "%.3000s/%s", exe,
					 HN_CUDA_PLUGIN_NAME);
			if (n < max)
				snprintf(out[n++], PATH_MAX, "%.3000s/../cuda/%s", exe,
					 HN_CUDA_PLUGIN_NAME);
			if (n < max)
				snprintf(out[n++], PATH_MAX, "%.3000s/../%s/hntrain/%s", exe,
					 HN_LIBDIR_REL, HN_CUDA_PLUGIN_NAME);
		}
	}
	if (n < max)
		snprintf(out[n++], PATH_MAX, "%s/%s", HN_PLUGIN_DIR, HN_CUDA_PLUGIN_NAME);
	return n;
}

/* dlopen the first plugin found; NULL with err set when none loads. */
static void *plugin_open(char *err)
{
	if (plugin_handle)
		return plugin_handle;
	char paths[6][PATH_MAX];
	int n = candidates(paths, 6);
	for (int i = 0; i < n; i++) {
		if (access(paths[i], F_OK) < 0)
			continue;
		void *h = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			/* a CUDA library not where the plugin's RUNPATH says: look for it */
			char why[HN_ERR_MAX];
			if (hn_cuda_libs_preload(why, sizeof why) < 0) {
				snprintf(err, HN_ERR_MAX, "cannot load the CUDA backend: %.200s",
					 why);
				return NULL;
			}
			h = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
		}
		if (!h) {
			const char *why = dlerror();
			snprintf(err, HN_ERR_MAX, "cannot load the CUDA backend %.100s: %.120s",
				 paths[i], why ? why : "unknown error");
			return NULL;
		}
		plugin_handle = h;
		return h;
	}
	snprintf(err, HN_ERR_MAX,
		 "hntrain was built without the CUDA backend (%s not found next to hntrain, in %s, "
		 "or in $HNTRAIN_CUDA_PLUGIN)",
		 HN_CUDA_PLUGIN_NAME, HN_PLUGIN_DIR);
	return NULL;
}

const struct hn_backend_ops *hn_backend_load(const char *device, char *err)
{
	if (!strcmp(device, "cpu"))
		return &hn_backend_cpu;
	if (strcmp(device, "gpu") && strcmp(device, "cuda")) {
		snprintf(err, HN_ERR_MAX, "unknown device \"%s\" (cpu or gpu)", device);
		return NULL;
	}
	void *h = plugin_open(err);
	if (!h)
		return NULL;
	if (hn_dist()->size > 1)
		hn_cuda_libs_optional(); /* NCCL, for the plugin's own dlopen */
	hn_cuda_backend_fn fn;
	*(void **)&fn = dlsym(h, "hn_cuda_backend");
	if (!fn) {
		snprintf(err, HN_ERR_MAX, "%s does not export hn_cuda_backend (a wrong plugin?)",
			 HN_CUDA_PLUGIN_NAME);
		return NULL;
	}
	char why[HN_ERR_MAX] = "";
	const struct hn_backend_ops *ops = fn(why);
	if (!ops) {
		if (!strncmp(why, "no CUDA device", 14) || !strncmp(why, "CUDA driver", 11))
			snprintf(err, HN_ERR_MAX, "%s", why);
		else
			snprintf(err, HN_ERR_MAX, "no CUDA device found: %s",
				 why[0] ? why : "the plugin gave no reason");
	}
	return ops;
}

int hn_cuda_plugin_load(char *err)
{
	if (!plugin_open(err))
		return -1;
	hn_cuda_libs_optional(); /* -V names NCCL too */
	return 0;
}

int hn_cuda_plugin_find(char *path, size_t cap)
{
	char paths[6][PATH_MAX];
	int n = candidates(paths, 6);
	for (int i = 0; i < n; i++) {
		char real[PATH_MAX];
		if (access(paths[i], F_OK) < 0)
			continue;
		snprintf(path, cap, "%s", realpath(paths[i], real) ? real : paths[i]);
		return 0;
	}
	return -ENOENT;
}

int hn_cuda_probe_load(char *info, size_t cap, uint64_t *free_bytes, uint64_t *total_bytes)
{
	char err[HN_ERR_MAX];
	void *h = plugin_open(err);
	if (!h) {
		snprintf(info, cap, "%s", err);
		return -ENOENT;
	}
	hn_cuda_probe_fn fn;
	*(void **)&fn = dlsym(h, "hn_cuda_probe");
	if (!fn) {
		snprintf(info, cap, "%s does not export hn_cuda_probe", HN_CUDA_PLUGIN_NAME);
		return -ENOENT;
	}
	return fn(info, cap, free_bytes, total_bytes);
}
