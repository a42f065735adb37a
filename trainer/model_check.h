/*
 * model_check.h - the one validation of a model description (struct
 * hn_model), for every backend and tool that takes one from outside: a
 * --model spec, a checkpoint, the plugin interface.
 *
 * hn_model_check() accepts exactly the descriptions trainer/model.c can
 * build: shapes chain from the input to one value per class, each layer's
 * geometry and parameter sizes match its kind, every parameter range lies
 * inside the one block of nparams floats, and every count is bounded so that
 * no size a backend derives from it can overflow. It is safe on malicious
 * input (fuzzed by tests/fuzz_model.c), depends only on libc, and is built
 * into both the CPU library and the CUDA plugin. Backends add only their own
 * limits on top.
 *
 * Returns 0, or -EINVAL with a message naming the model and the layer in err
 * (HN_ERR_MAX bytes; may be NULL).
 */
#ifndef HN_MODEL_CHECK_H
#define HN_MODEL_CHECK_H

#include "backend.h"

#define HN_CHECK_MAX_SIDE     65536	   /* input and output height, width */
#define HN_CHECK_MAX_CHANNELS 65536	   /* channels, units */
#define HN_CHECK_MAX_CLASSES  65535	   /* labels are uint16, as the store's */
#define HN_CHECK_MAX_PARAMS   (1ULL << 31) /* floats in the parameter block */
#define HN_CHECK_MAX_FLOATS   (1ULL << 31) /* floats of one sample's activation */

int hn_model_check(const struct hn_model *m, char *err);

#endif
