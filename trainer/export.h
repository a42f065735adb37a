/*
 * export.h - the trained weights as a numpy .npz archive (--export FILE).
 *
 * One float32 .npy member per parameter tensor, named "<i>.<kind>.weight"
 * and "<i>.<kind>.bias" (i: the layer's number in the model description,
 * kind: conv2d, dense or batchnorm), in layer order, in the layouts of
 * backend.h: conv weights [out_c][in_c][k][k], dense weights [out][in] over
 * the CHW-flattened input, the layouts of PyTorch's Conv2d and Linear; a
 * batchnorm adds "<i>.batchnorm.running_mean" and "running_var". With input
 * normalisation, "input.mean" and "input.std" (per channel) come first.
 * docs/HNTRAIN.md has it.
 */
#ifndef HN_EXPORT_H
#define HN_EXPORT_H

#include "trainer/backend.h"

/*
 * Write params (m->nparams floats) to path as an uncompressed .npz, through
 * path.tmp.<pid>, fsynced and renamed: a crash leaves no half archive under
 * path. 0, or -errno with err naming the file.
 */
int hn_export_npz(const char *path, const struct hn_model *m, const float *params,
		  const float *mean, const float *std, int nch, char *err);

#endif
