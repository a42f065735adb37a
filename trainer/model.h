/*
 * model.h - build a model description (backend.h's struct hn_model) from a
 * name or a spec string, and initialise its parameters.
 *
 * Built-in names: "mlp" (flatten-256-128-classes), "cnn" (conv3x3 32 valid, relu,
 * maxpool 2, conv3x3 64 valid, relu, maxpool 2, dense 128, relu, dense classes:
 * 28x28x1 -> 26 -> 13 -> 11 -> 5, 225k parameters),
 * "lenet5", "cnn-bn" (c32k3p1-bn-r-m2-c64k3p1-bn-r-m2-d256-bn-r-x0.3, 826k
 * parameters). A spec string builds others, layers separated by '-':
 *   c<out>k<k>[s<stride>][p<pad>]  conv2d       e.g. c32k3p1
 *   m<k>[s<stride>]                maxpool      e.g. m2
 *   r                              relu
 *   d<out>                         dense        e.g. d128
 *   x<p>                           dropout      e.g. x0.25
 *   bn                             batch normalisation (per channel)
 *   gap                            global average pooling (C x H x W -> C)
 *   res<c>[s<s>][p][x<n>]          n basic residual blocks of c channels
 *   bot<w>[s<s>][p][x<n>]          n bottleneck blocks (w wide, 4w out)
 * (c...nb: a conv without bias; m<k>s<s>p<p>: a padded max-pool; the
 * blocks' p: a 1x1 projection shortcut on the first one), and the presets
 * "resnet18", "resnet50" (torchvision's, the stem by tile size) and
 * "resnet-fm" (0.31M parameters, for 28x28 gray tiles). * and the final dense layer to nclasses is
 * appended when the spec does not end with one of that size. docs/HNTRAIN.md documents it.
 */
#ifndef HN_MODEL_H
#define HN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/backend.h"

/*
 * Is name_or_spec a built-in name or a spec that parses (every token, the
 * length, the layer count)? The shapes are checked by hn_model_build, once
 * the input is known. 0, or -EINVAL with err naming the bad token.
 */
int hn_model_check_spec(const char *name_or_spec, char *err);

/* Build from a built-in name or a spec; -EINVAL with err naming the bad token or shape. */
int hn_model_build(const char *name_or_spec, int in_c, int in_h, int in_w, int nclasses,
		   struct hn_model *m, char *err);

/* He/Kaiming-uniform weights, zero biases (batchnorm: gamma 1, beta 0, mean 0, var 1), from a
 * seeded generator (perm.h's). */
void hn_model_init_params(const struct hn_model *m, uint64_t seed, float *params);

/*
 * Parameters an optimizer trains: nparams less the batchnorm running
 * statistics (which PyTorch keeps as buffers, so this is the count
 * torchvision's sum(p.numel() for p in model.parameters()) gives).
 */
size_t hn_model_trainable(const struct hn_model *m);

/* Activation floats per sample summed over layers (for --plan). */
uint64_t hn_model_activation_floats(const struct hn_model *m);

/*
 * Floating-point operations of one training sample in the matrix products,
 * a multiply and an add counted apart: per conv or dense layer 2 * MACs for
 * the forward pass, as many for the weight gradient, and as many for the
 * input gradient where a layer below has parameters (the first such layer's
 * is never made). Activations, pooling, normalisation and the optimizer
 * (a few operations per element) are left out. The numerator of a
 * GFLOP/s figure; the cnn: 15.4 MFLOP.
 */
double hn_model_train_flops(const struct hn_model *m);

/* One line per layer into buf ("conv2d 1x28x28 -> 32x28x28, 320 params"). */
void hn_model_describe(const struct hn_model *m, char *buf, size_t cap);

#endif
