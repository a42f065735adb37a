/*
 * backend_load.h - finding and loading the CUDA plugin (backend_load.c, private to
 * trainer/), for --device gpu, --version and --plan; hn_backend_load itself
 * is declared in backend.h with the backends.
 */
#ifndef HN_BACKEND_LOAD_H
#define HN_BACKEND_LOAD_H

#include <stddef.h>
#include <stdint.h>

/*
 * For --version: the path of the CUDA plugin --device gpu would load, without
 * loading it (no CUDA library, no GPU touched). -ENOENT when none is found.
 */
int hn_cuda_plugin_find(char *path, size_t cap);
/* Load the plugin and its CUDA libraries (not the GPU): 0, or -1 with err set. */
int hn_cuda_plugin_load(char *err);
/* For --plan with gpu: ask the plugin about device 0. -ENODEV/-ENOENT with info set. */
int hn_cuda_probe_load(char *info, size_t cap, uint64_t *free_bytes, uint64_t *total_bytes);

#endif
