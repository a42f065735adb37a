/*
 * plan.c - --plan: the memory a run needs, before it starts.
 *
 * The figures are computed from the model description and the data set's
 * shape, not measured, so that a plan can be made for a run that would not
 * fit: data set bytes (tiles + labels of both splits), weights, gradients,
 * optimizer state, activations per batch (forward values and their
 * gradients), and the redundancy K1 = weights / (samples x features), the
 * ratio the papers use to say how much a model can memorise. On the cpu the
 * backend's own sizing (hn_backend_cpu_bytes) adds what backward keeps and
 * each thread's scratch, and the RAM verdict uses it. The data set is
 * compared with MemAvailable (/proc/meminfo) and, for gpu, with the free
 * memory the CUDA plugin reports.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "trainer/backend_load.h"
#include "trainer/model.h"
#include "trainer/plan.h"

int64_t hn_mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	if (!f)
		return -errno;
	char line[256];
	int64_t kb = -ENOENT;
	while (fgets(line, sizeof line, f)) {
		long long v;
		if (sscanf(line, "MemAvailable: %lld kB", &v) == 1) {
			kb = v;
			break;
		}
	}
	fclose(f);
	return kb < 0 ? kb : kb * 1024;
}

static void row(FILE *f, const char *what, uint64_t bytes, const char *note)
{
	char b[32];
	fprintf(f, "  %-28s %12s%s%s\n", what, sprite_fmt_size(bytes, b, sizeof b),
		note ? "  " : "", note ? note : "");
}

int hn_plan_print(FILE *f, const struct hn_plan_input *in)
{
	const struct hn_source_info *d = in->data;
	const struct hn_model *m = in->model;
	uint64_t feat = (uint64_t)d->h * d->w * d->c;
	uint64_t samples = d->count[HN_SPLIT_TRAIN] + d->count[HN_SPLIT_TEST];
	uint64_t data = samples * (feat + sizeof(uint16_t));
	uint64_t w = m->nparams * sizeof(float);
	uint64_t opt = w * (uint64_t)hn_optim_state_per_param(in->optim->kind);
	uint64_t act = hn_model_activation_floats(m) * (uint64_t)in->batch * sizeof(float) * 2;
	uint64_t total = w * 2 + opt + act;
	double k1 = (double)m->nparams / ((double)d->count[HN_SPLIT_TRAIN] * (double)feat);
	char b1[32], b2[32];

	fprintf(f, "plan: model %s on %s tiles %ux%ux%u, %u classes, batch %d, device %s\n",
		m->name, d->kind, d->h, d->w, d->c, d->nclasses, in->batch, in->device);
	char note[128];
	snprintf(note, sizeof note,
		 "(%" PRIu64 " train + %" PRIu64 " test samples x %" PRIu64 " bytes + label)",
		 d->count[HN_SPLIT_TRAIN], d->count[HN_SPLIT_TEST], feat);
	row(f, "data set", data, note);
	if (hn_model_trainable(m) == m->nparams)
		snprintf(note, sizeof note, "(%zu parameters)", m->nparams);
	else /* the trained count is the one PyTorch's model.parameters() gives */
		snprintf(note, sizeof note,
			 "(%zu parameters: %zu trained, %zu batchnorm statistics)", m->nparams,
			 hn_model_trainable(m), m->nparams - hn_model_trainable(m));
	row(f, "weights", w, note);
	row(f, "gradients", w, NULL);
	row(f, "optimizer state", opt,
	    in->optim->kind == HN_OPT_ADAM	 ? "(adam: m, v)"
	    : in->optim->kind == HN_OPT_MOMENTUM ? "(momentum buffer)"
						 : "(sgd: none)");
	snprintf(note, sizeof note, "(%" PRIu64 " floats/sample, values + gradients)",
		 hn_model_activation_floats(m));
	row(f, "activations per batch", act, note);
	row(f, "model total", total, NULL);
	if (in->backend_bytes) /* what it allocates, so what a run holds resident */
		row(f, "cpu backend allocates", in->backend_bytes,
		    "(as it lays them out, with kept im2col / Winograd matrices and scratch)");
	if (in->backend_bytes > total)
		total = in->backend_bytes;
	fprintf(f, "  %-28s %12.4g  (weights / (train samples x features))\n", "K1", k1);
	fprintf(f, "  %-28s %12.1f  (matrix products, forward + backward; --log: compute_gflops)\n",
		"MFLOP per training sample", hn_model_train_flops(m) / 1e6);

	int rc = 0;
	int64_t avail = hn_mem_available();
	if (avail > 0) {
		int fits = data + total < (uint64_t)avail;
		fprintf(f, "  RAM: %s available; data set + model %s %s\n",
			sprite_fmt_size((uint64_t)avail, b1, sizeof b1),
			sprite_fmt_size(data + total, b2, sizeof b2),
			fits ? "fit (--preload possible)" : "do NOT fit (stream it: no --preload)");
		if (!fits)
			rc = 1;
	}
	if (!strcmp(in->device, "gpu")) {
		char info[256] = "";
		uint64_t free_b = 0, total_b = 0;
		int r = hn_cuda_probe_load(info, sizeof info, &free_b, &total_b);
		if (r < 0) {
			fprintf(f, "  GPU: %s\n", info);
		} else {
			fprintf(f, "  GPU: %s, %s free of %s\n", info,
				sprite_fmt_size(free_b, b1, sizeof b1),
				sprite_fmt_size(total_b, b2, sizeof b2));
			fprintf(f, "  GPU: model %s; data set %s in GPU memory\n",
				total < free_b ? "fits" : "does NOT fit",
				data + total < free_b ? "also fits" : "does not fit");
		}
	}
	return rc;
}
