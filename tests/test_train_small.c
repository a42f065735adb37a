/*
 * test_train_small.c - the CPU backend end to end: optimizer maths against
 * hand-computed values, gradient accumulation, bit-identical determinism,
 * and short Fashion-MNIST runs that must reach a stated accuracy.
 *
 * Default (the test, < 60 s on 2 cores):
 *   1. sgd (+L2), momentum (PyTorch: v = mu*v + g; w -= lr*v) and AdamW, two
 *      steps each, against the formulas evaluated by hand in double;
 *   2. accumulation: two micro-batches of 32 (group 64) equal one batch of
 *      64 after three updates, within 1e-4 relative; the same two batches
 *      applied by a third, empty one (what hntrain sends when every file of
 *      a batch failed to decode) give bit-identical parameters; an empty
 *      batch with nothing summed is refused;
 *   3. determinism: two backends, same init and data order -> memcmp-equal
 *      parameters (1 and 2 threads);
 *   4. training via the backend ops on the first 10,000 training samples,
 *      tested on the first 1,000 test samples: mlp 2 epochs >= 80%,
 *      cnn 2 epochs >= 80% (both reach ~84-86%; the margin absorbs seeds).
 * Skips (77) only when the Fashion-MNIST IDX files are absent.
 *
 * Extra modes, for the benchmarks (not run by meson test):
 *   --bench MODEL [--threads T] [--batch B] [--steps S]
 *       train_step samples/s on data already in RAM, one JSON line (T4).
 *   --full MODEL [--epochs E] [--lr LR] [--wd WD] [--threads T] [--batch B]
 *       full 60k training, momentum 0.9, cosine schedule, test accuracy on
 *       the 10k test split after each epoch, one JSON line per epoch (T6).
 * The data directory is $FASHION_MNIST_DIR or /usr/share/datasets/fashion-mnist.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zlib.h>

#include "common/perm.h"
#include "trainer/backend.h"
#include "trainer/layers.h"
#include "trainer/model.h"
#include "tests/check.h"

struct dataset {
	uint32_t n, h, w;
	uint8_t *px;
	uint16_t *labels;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int gz_read_all(gzFile f, void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len) {
		unsigned chunk = len > (1u << 30) ? (1u << 30) : (unsigned)len;
		int r = gzread(f, p, chunk);
		if (r <= 0)
			return -EIO;
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Load an IDX image+label pair (gzip), checking magic numbers and sizes. Returns 0, -ENOENT, -EIO.
 */
static int load_split(const char *dir, const char *prefix, struct dataset *d)
{
	char path[1024];
	uint8_t hdr[16];
	snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
	gzFile f = gzopen(path, "rb");
	if (!f)
		return -ENOENT;
	if (gz_read_all(f, hdr, 16) || be32(hdr) != 0x803 || be32(hdr + 4) > 1000000 ||
	    be32(hdr + 8) > 4096 || be32(hdr + 12) > 4096) {
		fprintf(stderr, "%s: not an IDX image file\n", path);
		gzclose(f);
		return -EIO;
	}
	d->n = be32(hdr + 4);
	d->h = be32(hdr + 8);
	d->w = be32(hdr + 12);
	d->px = malloc((size_t)d->n * d->h * d->w);
	if (!d->px || gz_read_all(f, d->px, (size_t)d->n * d->h * d->w)) {
		fprintf(stderr, "%s: truncated\n", path);
		gzclose(f);
		return -EIO;
	}
	gzclose(f);
	snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
	f = gzopen(path, "rb");
	if (!f)
		return -ENOENT;
	uint8_t *lab = malloc(d->n ? d->n : 1);
	if (gz_read_all(f, hdr, 8) || be32(hdr) != 0x801 || be32(hdr + 4) != d->n ||
	    gz_read_all(f, lab, d->n)) {
		fprintf(stderr, "%s: not a label file matching %u images\n", path, d->n);
		gzclose(f);
		free(lab);
		return -EIO;
	}
	gzclose(f);
	d->labels = malloc(sizeof(uint16_t) * (d->n ? d->n : 1));
	for (uint32_t i = 0; i < d->n; i++) {
		if (lab[i] > 9) {
			fprintf(stderr, "%s: label %u out of range\n", path, lab[i]);
			free(lab);
			return -EIO;
		}
		d->labels[i] = lab[i];
	}
	free(lab);
	return 0;
}

/* ---- 1. optimizers against hand-computed values ---- */

static void check_close(const char *what, int step, const float *got, const double *want, int n)
{
	for (int i = 0; i < n; i++)
		if (fabs(got[i] - want[i]) > 1e-6 * (1 + fabs(want[i]))) {
			FAIL("%s step %d: w[%d] = %.9g, hand-computed %.9g", what, step, i, got[i],
			     want[i]);
			return;
		}
}

static void test_optimizers(void)
{
	const float w0[3] = {0.5f, -1.0f, 2.0f};
	const float g1[3] = {0.1f, 0.2f, -0.3f}, g2[3] = {-0.4f, 0.05f, 0.6f};
	const float *gs[2] = {g1, g2};
	const float lr = 0.1f, wd = 0.01f;

	/* sgd with L2: w -= lr * (g + wd*w) */
	{
		struct hn_optim o = {.kind = HN_OPT_SGD, .weight_decay = wd};
		float w[3], g[3];
		double ww[3];
		memcpy(w, w0, sizeof w);
		for (int i = 0; i < 3; i++)
			ww[i] = w0[i];
		for (int t = 0; t < 2; t++) {
			memcpy(g, gs[t], sizeof g);
			hn_optim_update(&o, w, g, NULL, NULL, 3, lr, (uint64_t)t + 1);
			for (int i = 0; i < 3; i++)
				ww[i] -= lr * ((double)gs[t][i] + wd * ww[i]);
			check_close("sgd", t + 1, w, ww, 3);
			if (g[0] != 0 || g[1] != 0 || g[2] != 0)
				FAIL("sgd: gradients not zeroed after the update");
		}
	}
	/* momentum (PyTorch): g' = g + wd*w; v = mu*v + g'; w -= lr*v */
	{
		struct hn_optim o = {.kind = HN_OPT_MOMENTUM, .momentum = 0.9f, .weight_decay = wd};
		float w[3], g[3], v[3] = {0};
		double ww[3], vv[3] = {0};
		memcpy(w, w0, sizeof w);
		for (int i = 0; i < 3; i++)
			ww[i] = w0[i];
		for (int t = 0; t < 2; t++) {
			memcpy(g, gs[t], sizeof g);
			hn_optim_update(&o, w, g, v, NULL, 3, lr, (uint64_t)t + 1);
			for (int i = 0; i < 3; i++) {
				vv[i] = 0.9 * vv[i] + (gs[t][i] + wd * ww[i]);
				ww[i] -= lr * vv[i];
			}
			check_close("momentum", t + 1, w, ww, 3);
		}
	}
	/* AdamW: w *= 1 - lr*wd; m, v moments; bias-corrected step */
	{
		struct hn_optim o = {.kind = HN_OPT_ADAM,
				     .beta1 = 0.9f,
				     .beta2 = 0.999f,
				     .eps = 1e-8f,
				     .weight_decay = wd};
		float w[3], g[3], st[6] = {0};
		double ww[3], m[3] = {0}, v[3] = {0};
		memcpy(w, w0, sizeof w);
		for (int i = 0; i < 3; i++)
			ww[i] = w0[i];
		for (int t = 0; t < 2; t++) {
			memcpy(g, gs[t], sizeof g);
			hn_optim_update(&o, w, g, st, st + 3, 3, lr, (uint64_t)t + 1);
			for (int i = 0; i < 3; i++) {
				double gi = gs[t][i];
				m[i] = 0.9 * m[i] + 0.1 * gi;
				v[i] = 0.999 * v[i] + 0.001 * gi * gi;
				double mh = m[i] / (1 - pow(0.9, t + 1)),
				       vh = v[i] / (1 - pow(0.999, t + 1));
				ww[i] = ww[i] * (1 - lr * wd) - lr * mh / (sqrt(vh) + 1e-8);
			}
			check_close("adamw", t + 1, w, ww, 3);
		}
	}
}

/* ---- helpers over the backend ---- */

struct run {
	struct hn_model m;
	void *st;
	float *params;
};

static float opt_wd; /* --full --wd: weight decay for the T6 runs */

static int run_create(struct run *r, const char *model, const struct dataset *d,
		      enum hn_optim_kind kind, int threads, int max_batch, uint64_t seed)
{
	char err[HN_ERR_MAX];
	if (hn_model_build(model, 1, (int)d->h, (int)d->w, 10, &r->m, err)) {
		FAIL("%s", err);
		return -1;
	}
	r->params = malloc(sizeof(float) * r->m.nparams);
	hn_model_init_params(&r->m, seed, r->params);
	struct hn_optim o = {.kind = kind,
			     .momentum = 0.9f,
			     .beta1 = 0.9f,
			     .beta2 = 0.999f,
			     .eps = 1e-8f,
			     .weight_decay = opt_wd};
	struct hn_backend_config cfg = {.threads = threads, .max_batch = max_batch, .seed = seed};
	if (hn_backend_cpu.create(&r->m, &o, &cfg, r->params, &r->st, err)) {
		FAIL("create %s: %s", model, err);
		return -1;
	}
	return 0;
}

static void run_destroy(struct run *r)
{
	hn_backend_cpu.destroy(r->st);
	free(r->params);
}

/* Gather samples idx[0..n) into contiguous tiles/labels. */
static void gather(const struct dataset *d, const uint32_t *idx, int n, uint8_t *tiles,
		   uint16_t *labels)
{
	size_t sz = (size_t)d->h * d->w;
	for (int i = 0; i < n; i++) {
		memcpy(tiles + i * sz, d->px + idx[i] * sz, sz);
		labels[i] = d->labels[idx[i]];
	}
}

static double lr_cosine(double lr, uint64_t step, uint64_t total)
{
	return 0.5 * lr * (1 + cos(M_PI * (double)step / (double)total));
}

/* Train for epochs over the first ntrain samples (seeded order, full batches only). */
static int train(struct run *r, const struct dataset *tr, uint32_t ntrain, int batch, int epochs,
		 double lr, int cosine, uint64_t seed, const struct dataset *te, uint32_t ntest,
		 int log_json, double *acc_out)
{
	uint32_t *perm = malloc(sizeof(uint32_t) * ntrain);
	uint8_t *tiles = malloc((size_t)batch * tr->h * tr->w);
	uint16_t *labels = malloc(sizeof(uint16_t) * batch);
	uint64_t per_epoch = ntrain / (uint32_t)batch, total = per_epoch * (uint64_t)epochs,
		 step = 0;
	double acc = 0;
	for (int e = 0; e < epochs; e++) {
		sprite_perm(seed, (uint64_t)e, ntrain, perm);
		double loss = 0, t0 = now();
		for (uint64_t b = 0; b < per_epoch; b++) {
			struct hn_step_result res;
			gather(tr, perm + b * batch, batch, tiles, labels);
			float l = (float)(cosine ? lr_cosine(lr, step, total) : lr);
			step++;
			if (hn_backend_cpu.train_step(r->st, tiles, labels, batch, batch, 1, l,
						      step, &res)) {
				FAIL("train_step failed");
				return -1;
			}
			loss += res.loss_sum;
		}
		double dt = now() - t0;
		if (te) {
			int correct = 0;
			uint32_t seq[1000];
			for (uint32_t s = 0; s < ntest; s += (uint32_t)batch) {
				int n = ntest - s < (uint32_t)batch ? (int)(ntest - s) : batch;
				struct hn_step_result res;
				for (int i = 0; i < n; i++)
					seq[i] = s + (uint32_t)i;
				gather(te, seq, n, tiles, labels);
				hn_backend_cpu.evaluate(r->st, tiles, labels, n, &res);
				correct += res.correct;
			}
			acc = (double)correct / ntest;
		}
		if (log_json)
			printf("{\"epoch\": %d, \"train_loss\": %.5f, \"test_acc\": %.4f, "
			       "\"samples_per_s\": %.1f}\n",
			       e + 1, loss / (double)(per_epoch * batch), acc,
			       per_epoch * batch / dt);
		fflush(stdout);
	}
	*acc_out = acc;
	free(perm), free(tiles), free(labels);
	return 0;
}

/* ---- 2. accumulation ---- */

static void test_accumulation(const struct dataset *d)
{
	struct run a, b, c;
	if (run_create(&a, "cnn", d, HN_OPT_MOMENTUM, 2, 64, 3) ||
	    run_create(&b, "cnn", d, HN_OPT_MOMENTUM, 2, 64, 3) ||
	    run_create(&c, "cnn", d, HN_OPT_MOMENTUM, 2, 64, 3))
		return;
	struct hn_step_result r0;
	if (hn_backend_cpu.train_step(c.st, NULL, NULL, 0, 64, 1, 0.05f, 1, &r0) != -EINVAL)
		FAIL("an empty batch with no gradients summed was not refused");
	uint8_t *tiles = malloc((size_t)64 * d->h * d->w);
	uint16_t labels[64];
	uint32_t idx[64];
	size_t sz = (size_t)d->h * d->w;
	for (int step = 1; step <= 3; step++) {
		struct hn_step_result r1, r2, r3;
		for (int i = 0; i < 64; i++)
			idx[i] = (uint32_t)(step * 64 + i);
		gather(d, idx, 64, tiles, labels);
		hn_backend_cpu.train_step(a.st, tiles, labels, 64, 64, 1, 0.05f, (uint64_t)step,
					  &r1);
		hn_backend_cpu.train_step(b.st, tiles, labels, 32, 64, 0, 0.05f, (uint64_t)step,
					  &r2);
		hn_backend_cpu.train_step(b.st, tiles + 32 * sz, labels + 32, 32, 64, 1, 0.05f,
					  (uint64_t)step, &r3);
		hn_backend_cpu.train_step(c.st, tiles, labels, 32, 64, 0, 0.05f, (uint64_t)step,
					  &r0);
		hn_backend_cpu.train_step(c.st, tiles + 32 * sz, labels + 32, 32, 64, 0, 0.05f,
					  (uint64_t)step, &r0);
		if (hn_backend_cpu.train_step(c.st, NULL, NULL, 0, 64, 1, 0.05f, (uint64_t)step,
					      &r0) != 0 ||
		    r0.loss_sum != 0 || r0.correct != 0)
			FAIL("accumulation step %d: an empty batch did not apply the group", step);
		if (fabs(r1.loss_sum - (r2.loss_sum + r3.loss_sum)) > 1e-4 * r1.loss_sum ||
		    r1.correct != r2.correct + r3.correct)
			FAIL("accumulation step %d: loss %g vs %g+%g", step, r1.loss_sum,
			     r2.loss_sum, r3.loss_sum);
	}
	float *pa = malloc(sizeof(float) * a.m.nparams), *pb = malloc(sizeof(float) * a.m.nparams);
	hn_backend_cpu.get_params(a.st, pa);
	hn_backend_cpu.get_params(b.st, pb);
	double worst = 0, moved = 0;
	for (size_t i = 0; i < a.m.nparams; i++) {
		worst = fmax(worst, fabs(pa[i] - pb[i]) / (1e-2 + fabs(pa[i])));
		moved = fmax(moved, fabs(pa[i] - a.params[i]));
	}
	if (worst > 1e-4 || moved == 0)
		FAIL("accumulation: K=2 x 32 vs 64 differ by %g relative (params moved %g)", worst,
		     moved);
	hn_backend_cpu.get_params(c.st, pa);
	if (memcmp(pa, pb, sizeof(float) * a.m.nparams))
		FAIL("accumulation: applying the group with an empty batch changed the result");
	run_destroy(&a), run_destroy(&b), run_destroy(&c);
	free(pa), free(pb), free(tiles);
}

/* ---- 3. determinism ---- */

static void test_determinism(const struct dataset *d, const char *model, int threads)
{
	float *p[2];
	size_t np = 0;
	for (int k = 0; k < 2; k++) {
		struct run r;
		double acc = 0;
		if (run_create(&r, model, d, HN_OPT_MOMENTUM, threads, 64, 11))
			return;
		train(&r, d, 64 * 20, 64, 1, 0.05, 0, 11, NULL, 0, 0, &acc);
		np = r.m.nparams;
		p[k] = malloc(sizeof(float) * np);
		hn_backend_cpu.get_params(r.st, p[k]);
		run_destroy(&r);
	}
	if (memcmp(p[0], p[1], sizeof(float) * np))
		FAIL("determinism: %s, %d threads: two identical runs give different weights",
		     model, threads);
	free(p[0]), free(p[1]);
}

/* ---- modes ---- */

static int bench(const struct dataset *d, const char *model, int threads, int batch, int steps)
{
	struct run r;
	if (run_create(&r, model, d, HN_OPT_MOMENTUM, threads, batch, 1))
		return 1;
	uint32_t n = (uint32_t)batch * 64;
	uint8_t *tiles = malloc((size_t)n * d->h * d->w);
	uint16_t *labels = malloc(sizeof(uint16_t) * n);
	uint32_t *perm = malloc(sizeof(uint32_t) * n);
	sprite_perm(1, 0, n, perm);
	gather(d, perm, (int)n, tiles, labels);
	size_t sz = (size_t)d->h * d->w;
	struct hn_step_result res;
	for (int s = 0; s < 10; s++) /* warm-up: OpenBLAS threads, page faults */
		hn_backend_cpu.train_step(r.st, tiles + (size_t)(s % 64) * batch * sz,
					  labels + (s % 64) * batch, batch, batch, 1, 0.01f,
					  (uint64_t)s + 1, &res);
	struct timespec c0, c1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
	double t0 = now();
	for (int s = 0; s < steps; s++)
		hn_backend_cpu.train_step(r.st, tiles + (size_t)(s % 64) * batch * sz,
					  labels + (s % 64) * batch, batch, batch, 1, 0.01f,
					  (uint64_t)s + 11, &res);
	double dt = now() - t0;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
	double cpu = (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
	/* cpu_ms_per_step: CPU time of all threads, steadier than wall time on a busy machine */
	printf("{\"peer\": \"hn-cpu\", \"model\": \"%s\", \"threads\": %d, \"batch\": %d, "
	       "\"steps\": %d, \"samples_per_s\": %.1f, \"cpu_ms_per_step\": %.3f, "
	       "\"backend\": \"%s\"}\n",
	       model, threads, batch, steps, (double)steps * batch / dt, 1e3 * cpu / steps,
	       hn_backend_cpu.describe(r.st));
	run_destroy(&r);
	free(tiles), free(labels), free(perm);
	return 0;
}

int main(int argc, char **argv)
{
	const char *dir = getenv("FASHION_MNIST_DIR");
	const char *mode = NULL, *model = "cnn";
	int threads = 2, batch = 64, steps = 200, epochs = 15;
	double lr = 0.05;
	if (!dir)
		dir = "/usr/share/datasets/fashion-mnist";
	for (int i = 1; i < argc; i++) {
		if ((!strcmp(argv[i], "--bench") || !strcmp(argv[i], "--full")) && i + 1 < argc)
			mode = argv[i], model = argv[++i];
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
			batch = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
			steps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--epochs") && i + 1 < argc)
			epochs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--lr") && i + 1 < argc)
			lr = atof(argv[++i]);
		else if (!strcmp(argv[i], "--wd") && i + 1 < argc)
			opt_wd = (float)atof(argv[++i]);
		else {
			fprintf(stderr,
				"usage: %s [--bench MODEL | --full MODEL] [--threads T] [--batch "
				"B] "
				"[--steps S] [--epochs E] [--lr LR] [--wd WD]\n",
				argv[0]);
			return 2;
		}
	}
	if (batch < 1 || batch > 4096 || threads < 0 || steps < 1 || epochs < 1) {
		fprintf(stderr, "bad --batch/--threads/--steps/--epochs\n");
		return 2;
	}

	struct dataset tr = {0}, te = {0};
	int rc = load_split(dir, "train", &tr);
	if (rc == 0)
		rc = load_split(dir, "t10k", &te);
	if (rc == -ENOENT) {
		printf("SKIP: Fashion-MNIST IDX files not found in %s\n", dir);
		return 77;
	}
	if (rc)
		return 1;

	if (mode && !strcmp(mode, "--bench"))
		return bench(&tr, model, threads, batch, steps);
	if (mode) {
		struct run r;
		double acc = 0;
		if (run_create(&r, model, &tr, HN_OPT_MOMENTUM, threads, batch, 1))
			return 1;
		double t0 = now();
		train(&r, &tr, tr.n, batch, epochs, lr, 1, 1, &te, te.n > 10000 ? 10000 : te.n, 1,
		      &acc);
		printf("{\"final\": true, \"model\": \"%s\", \"test_acc\": %.4f, \"wall_s\": "
		       "%.1f}\n",
		       model, acc, now() - t0);
		run_destroy(&r);
		return 0;
	}

	test_optimizers();
	test_accumulation(&tr);
	test_determinism(&tr, "cnn", 1);
	test_determinism(&tr, "cnn", 2);
	test_determinism(&tr, "c8k3p1-r-m2-x0.3-d32-r", 2); /* dropout masks are seeded too */

	static const struct {
		const char *model;
		int epochs;
		double lr, min_acc;
	} runs[] = {
		{"mlp", 2, 0.05, 0.80},
		{"cnn", 2, 0.05, 0.80},
	};
	for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
		struct run r;
		double acc = 0, t0 = now();
		if (run_create(&r, runs[i].model, &tr, HN_OPT_MOMENTUM, 2, 64, 5))
			continue;
		train(&r, &tr, 10000, 64, runs[i].epochs, runs[i].lr, 1, 5, &te, 1000, 0, &acc);
		printf("%s: %d epochs on 10000 samples: test accuracy %.1f%% on 1000 (%.1f s)\n",
		       runs[i].model, runs[i].epochs, 100 * acc, now() - t0);
		if (acc < runs[i].min_acc)
			FAIL("%s reached %.1f%% test accuracy, want >= %.0f%%", runs[i].model,
			     100 * acc, 100 * runs[i].min_acc);
		run_destroy(&r);
	}
	free(tr.px), free(tr.labels), free(te.px), free(te.labels);
	if (failures) {
		fprintf(stderr, "test_train_small: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_train_small: all passed\n");
	return 0;
}
