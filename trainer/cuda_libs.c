/*
 * cuda_libs.c - find the CUDA libraries the GPU plugin needs, wherever the
 * machine keeps them.
 *
 * The plugin's RUNPATH names the toolkit it was built against, and the
 * dynamic loader also tries LD_LIBRARY_PATH and ld.so.cache. Machines differ:
 * a toolkit under /usr/local/cuda-13.0/targets/x86_64-linux/lib, cuDNN only
 * inside a Python virtual environment's nvidia-* wheels, NVIDIA's Debian
 * packages under /usr/lib/x86_64-linux-gnu. When the plugin does not load
 * because one of its libraries is not found, each library is looked for in
 * the folders below, in order, and loaded by its full path (RTLD_GLOBAL), so
 * that the loader then resolves the plugin's needs by soname:
 *
 *   $CUDA_HOME, $CUDA_PATH: lib64, lib, targets/(any)/lib
 *   /usr/local/cuda, /usr/local/cuda-*: the same
 *   /usr/lib/x86_64-linux-gnu (or the multiarch folder this was built for), /usr/lib64
 *   the nvidia-* wheels (site-packages/nvidia/(any)/lib) of: $VIRTUAL_ENV,
 *   each python3 on PATH (its bin/../lib/python3.*), ~/.local, /usr/local
 *
 * cuDNN 9 loads its sub-libraries (libcudnn_ops, _cnn, _engines_*) itself;
 * those beside the libcudnn.so.9 found are loaded with it. NCCL
 * (libnccl.so.2), which the plugin loads itself only for a run of several
 * ranks, is looked for the same way beforehand, and named by -V.
 */
#include <dlfcn.h>
#include <glob.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer/cuda_libs.h"

/* What the plugin is linked against (cuda/meson.build), in load order. */
static const char *const needed[] = {"libcudart.so.13", "libcublasLt.so.13", "libcublas.so.13",
				     "libcudnn.so.9"};
#define NNEEDED (sizeof needed / sizeof needed[0])
/* What the plugin dlopens itself when a run needs it (cuda/nccl.c: several ranks). */
static const char *const optional[] = {"libnccl.so.2"};
#define NOPTIONAL (sizeof optional / sizeof optional[0])

#ifndef HN_MULTIARCH_LIBDIR
#define HN_MULTIARCH_LIBDIR "/usr/lib/x86_64-linux-gnu"
#endif

#define MAX_DIRS 64

struct dirs {
	char d[MAX_DIRS][PATH_MAX];
	int n;
};

static void add_dir(struct dirs *D, const char *dir)
{
	if (D->n >= MAX_DIRS || !dir || !*dir || strlen(dir) >= PATH_MAX)
		return;
	for (int i = 0; i < D->n; i++)
		if (!strcmp(D->d[i], dir))
			return;
	if (access(dir, X_OK) < 0)
		return;
	snprintf(D->d[D->n++], PATH_MAX, "%s", dir);
}

static void add_glob(struct dirs *D, const char *pattern)
{
	glob_t g;
	if (glob(pattern, GLOB_ONLYDIR, NULL, &g) != 0)
		return;
	/* newest toolkit or Python first: the sorted names backwards */
	for (size_t i = g.gl_pathc; i-- > 0;)
		add_dir(D, g.gl_pathv[i]);
	globfree(&g);
}

static void add_toolkit(struct dirs *D, const char *root)
{
	char p[PATH_MAX + 32];
	if (!root || !*root || strlen(root) > PATH_MAX - 32)
		return;
	snprintf(p, sizeof p, "%s/lib64", root);
	add_dir(D, p);
	snprintf(p, sizeof p, "%s/lib", root);
	add_dir(D, p);
	snprintf(p, sizeof p, "%s/targets/*/lib", root);
	add_glob(D, p);
}

/* site-packages/nvidia/(any)/lib under PREFIX/lib/python3.* */
static void add_wheels(struct dirs *D, const char *prefix)
{
	char p[PATH_MAX + 64];
	if (!prefix || !*prefix || strlen(prefix) > PATH_MAX - 64)
		return;
	snprintf(p, sizeof p, "%s/lib/python3*/site-packages/nvidia/*/lib", prefix);
	add_glob(D, p);
	snprintf(p, sizeof p, "%s/lib/python3*/dist-packages/nvidia/*/lib", prefix);
	add_glob(D, p);
}

static void search_dirs(struct dirs *D)
{
	D->n = 0;
	add_toolkit(D, getenv("CUDA_HOME"));
	add_toolkit(D, getenv("CUDA_PATH"));
	add_toolkit(D, "/usr/local/cuda");
	glob_t g;
	if (glob("/usr/local/cuda-*", GLOB_ONLYDIR, NULL, &g) == 0) {
		for (size_t i = g.gl_pathc; i-- > 0;)
			add_toolkit(D, g.gl_pathv[i]);
		globfree(&g);
	}
	add_dir(D, HN_MULTIARCH_LIBDIR);
	add_dir(D, "/usr/lib64");
	add_wheels(D, getenv("VIRTUAL_ENV"));
	/* each python3 on PATH: a venv's bin/python3 is a link, so not resolved */
	const char *path = getenv("PATH");
	if (path && strlen(path) < 8192) {
		char buf[8192];
		snprintf(buf, sizeof buf, "%s", path);
		for (char *save, *d = strtok_r(buf, ":", &save); d;
		     d = strtok_r(NULL, ":", &save)) {
			char py[PATH_MAX + 16];
			if (strlen(d) > PATH_MAX - 16)
				continue;
			snprintf(py, sizeof py, "%s/python3", d);
			if (access(py, X_OK) < 0)
				continue;
			/* PREFIX/bin/python3: the wheels are under PREFIX/lib */
			snprintf(py, sizeof py, "%s", d);
			char *slash = strrchr(py, '/');
			if (!slash || slash == py)
				continue;
			*slash = 0;
			add_wheels(D, py);
		}
	}
	const char *home = getenv("HOME");
	if (home && strlen(home) < PATH_MAX - 16) {
		char p[PATH_MAX];
		snprintf(p, sizeof p, "%s/.local", home);
		add_wheels(D, p);
	}
	add_wheels(D, "/usr/local");
}

/* Is a library of this soname already in the process? */
static int loaded(const char *soname)
{
	void *h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
	if (h) {
		dlclose(h);
		return 1;
	}
	return 0;
}

/* cuDNN's sub-libraries beside libcudnn.so.9, loaded until none more will. */
static void load_cudnn_parts(const char *dir)
{
	char p[PATH_MAX + 32];
	glob_t g;
	snprintf(p, sizeof p, "%s/libcudnn_*.so.9", dir);
	if (glob(p, 0, NULL, &g) != 0)
		return;
	int progress = 1;
	char *done = calloc(g.gl_pathc, 1);
	while (done && progress) {
		progress = 0;
		for (size_t i = 0; i < g.gl_pathc; i++)
			if (!done[i] && dlopen(g.gl_pathv[i], RTLD_NOW | RTLD_GLOBAL)) {
				done[i] = 1;
				progress = 1;
			}
	}
	free(done);
	globfree(&g);
}

/* soname loaded already, by the default search, or from the first folder of D holding it. */
static int load_lib(const struct dirs *D, const char *soname)
{
	if (loaded(soname) || dlopen(soname, RTLD_NOW | RTLD_GLOBAL))
		return 1; /* RUNPATH-less default search (LD_LIBRARY_PATH, ld.so.cache) */
	for (int i = 0; i < D->n; i++) {
		char p[PATH_MAX + 32];
		snprintf(p, sizeof p, "%s/%s", D->d[i], soname);
		if (access(p, R_OK) < 0)
			continue;
		if (!strncmp(soname, "libcudnn", 8))
			load_cudnn_parts(D->d[i]);
		if (dlopen(p, RTLD_NOW | RTLD_GLOBAL))
			return 1;
	}
	return 0;
}

void hn_cuda_libs_optional(void)
{
	struct dirs *D = malloc(sizeof *D);
	if (!D)
		return;
	search_dirs(D);
	for (size_t k = 0; k < NOPTIONAL; k++)
		load_lib(D, optional[k]);
	free(D);
}

int hn_cuda_libs_preload(char *err, size_t cap)
{
	struct dirs *D = malloc(sizeof *D);
	if (!D) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	search_dirs(D);
	int rc = 0;
	for (size_t k = 0; k < NNEEDED && rc == 0; k++) {
		if (!load_lib(D, needed[k])) {
			/* the folders do not fit an error string: they go to stderr */
			fprintf(stderr,
				"hntrain: looked for %s in the loader's path (LD_LIBRARY_PATH, "
				"ld.so.cache), then in:",
				needed[k]);
			for (int i = 0; i < D->n; i++)
				fprintf(stderr, "\n  %s", D->d[i]);
			fprintf(stderr, "%s\n", D->n ? "" : " none of the usual folders exists");
			snprintf(err, cap,
				 "%s not found in any of those folders (set CUDA_HOME, or "
				 "LD_LIBRARY_PATH to the folder holding it)",
				 needed[k]);
			rc = -1;
		}
	}
	free(D);
	return rc;
}

static int list_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	FILE *f = arg;
	const char *name = info->dlpi_name;
	if (!name || !*name)
		return 0;
	const char *base = strrchr(name, '/');
	base = base ? base + 1 : name;
	for (size_t k = 0; k < NNEEDED; k++)
		if (!strcmp(base, needed[k]))
			fprintf(f, "gpu: %s %s\n", needed[k], name);
	for (size_t k = 0; k < NOPTIONAL; k++)
		if (!strcmp(base, optional[k]))
			fprintf(f, "gpu: %s %s (for several ranks)\n", optional[k], name);
	return 0;
}

void hn_cuda_libs_print(FILE *f)
{
	dl_iterate_phdr(list_one, f);
}
