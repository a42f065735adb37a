/*
 * cuda_libs.h - the CUDA libraries the plugin needs, found and loaded before it
 * where the dynamic loader would not find them (cuda_libs.c, private to
 * trainer/: a toolkit folder, NVIDIA's Debian packages, nvidia-* wheels),
 * and named by --version.
 */
#ifndef HN_CUDA_LIBS_H
#define HN_CUDA_LIBS_H

#include <stddef.h>
#include <stdio.h>

/* cuda_libs.c: load the libraries the plugin needs from wherever they are;
 * -1 with err naming the missing one and the folders searched. */
int hn_cuda_libs_preload(char *err, size_t cap);
/* The libraries the plugin loads only when needed (NCCL), where found; quiet when not. */
void hn_cuda_libs_optional(void);
/* One "gpu: SONAME PATH" line per CUDA library loaded in this process. */
void hn_cuda_libs_print(FILE *f);

#endif
