/*
 * test_gpu_train - a short real training run on the gpu backend.
 *
 * Trains the built-in "cnn" on the first 6000 Fashion-MNIST training images
 * for 3 epochs (adam, lr 1e-3, batch 64, shuffled by a fixed seed, the last
 * partial batch included) and evaluates on the first 2000 test images:
 * test accuracy must reach 78% in fp32 and with --amp (fp16, and bf16 where
 * the GPU has it); the training loss of the last epoch must be below that of
 * the first; with fp16 at most 10% of the updates may be skipped for
 * overflow, with bf16 none. Prints samples/s from the
 * backend's own compute time. Skips (77) only without a GPU (or without the
 * Fashion-MNIST files, a declared dependency).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "tests/gpu_common.h"
#include "trainer/backend.h"
#include "trainer/model.h"

#define NTRAIN	6000
#define NTEST	2000
#define BATCH	64
#define EPOCHS	3
#define MIN_ACC 0.78

static uint32_t be32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/*
 * Read the first `want` records of a gzip IDX file (read here with zlib so
 * the test depends only on the backends): images (magic 0x803, 28x28) or
 * labels (0x801, values < 10).
 */
static uint8_t *load(const char *dir, const char *split, int images, int want)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s-%s-idx%d-ubyte.gz", dir, split,
		 images ? "images" : "labels", images ? 3 : 1);
	gzFile f = gzopen(path, "rb");
	if (!f) {
		if (errno == ENOENT) {
			printf("test_gpu_train: SKIP: %s not found\n", path);
			exit(77);
		}
		fprintf(stderr, "test_gpu_train: cannot open %s\n", path);
		exit(1);
	}
	uint8_t hdr[16];
	int hlen = images ? 16 : 8;
	size_t rec = images ? 28 * 28 : 1;
	uint8_t *data = malloc(rec * want);
	if (!data || gzread(f, hdr, hlen) != hlen || be32(hdr) != (images ? 0x803u : 0x801u) ||
	    be32(hdr + 4) < (uint32_t)want ||
	    (images && (be32(hdr + 8) != 28 || be32(hdr + 12) != 28)) ||
	    gzread(f, data, (unsigned)(rec * want)) != (int)(rec * want)) {
		fprintf(stderr, "test_gpu_train: %s: not a 28x28 IDX file with %d records\n", path,
			want);
		exit(1);
	}
	gzclose(f);
	for (int i = 0; !images && i < want; i++)
		if (data[i] >= 10) {
			fprintf(stderr, "test_gpu_train: %s: label %d out of range\n", path,
				data[i]);
			exit(1);
		}
	return data;
}

static int run(const struct hn_backend_ops *gpu, int amp, const uint8_t *trx, const uint16_t *try_,
	       const uint8_t *tex, const uint16_t *tey, size_t tile)
{
	struct hn_model m;
	char err[HN_ERR_MAX] = "";
	const char *tag = amp == HN_AMP_BF16 ? "bf16" : amp ? "fp16" : "fp32";
	if (hn_model_build("cnn", 1, 28, 28, 10, &m, err) < 0) {
		fprintf(stderr, "test_gpu_train: model: %s\n", err);
		return 1;
	}
	float *init = malloc(m.nparams * sizeof(float));
	hn_model_init_params(&m, 1, init);
	struct hn_optim o = {.kind = HN_OPT_ADAM, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
	struct hn_backend_config cfg = {.max_batch = BATCH, .amp = amp, .seed = 3};
	void *st = NULL;
	if (gpu->create(&m, &o, &cfg, init, &st, err) < 0) {
		free(init);
		if (amp == HN_AMP_BF16 && strstr(err, "compute capability")) {
			printf("test_gpu_train: bf16 not run: %s\n", err);
			return 0;
		}
		fprintf(stderr, "test_gpu_train: %s create: %s\n", tag, err);
		return 1;
	}
	printf("test_gpu_train: %s on %s, %.1f MiB of device memory\n", tag, gpu->describe(st),
	       gpu->memory_bytes(st) / 1048576.0);
	uint8_t *bt = malloc(tile * BATCH);
	uint16_t bl[BATCH];
	int order[NTRAIN];
	for (int i = 0; i < NTRAIN; i++)
		order[i] = i;
	uint64_t rs = 12345, step = 0;
	double first_loss = 0, last_loss = 0, compute = 0;
	int skipped = 0, updates = 0, fail = 0;
	for (int ep = 0; ep < EPOCHS && !fail; ep++) {
		for (int i = NTRAIN - 1; i > 0; i--) { /* Fisher-Yates with an LCG */
			rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
			int j = (int)((rs >> 33) % (uint64_t)(i + 1));
			int t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
		double loss = 0;
		for (int b = 0; b < NTRAIN; b += BATCH) {
			int n = NTRAIN - b < BATCH ? NTRAIN - b : BATCH;
			for (int k = 0; k < n; k++) {
				memcpy(bt + tile * k, trx + tile * order[b + k], tile);
				bl[k] = try_[order[b + k]];
			}
			struct hn_step_result res;
			step++;
			if (gpu->train_step(st, bt, bl, n, n, 1, 1e-3f, step, &res) < 0) {
				fprintf(stderr, "test_gpu_train: %s train_step failed\n", tag);
				fail = 1;
				break;
			}
			loss += res.loss_sum;
			compute += res.compute_s;
			skipped += res.skipped;
			updates++;
			if (!(res.compute_s > 0)) {
				fprintf(stderr, "test_gpu_train: compute_s %g\n", res.compute_s);
				fail = 1;
			}
		}
		loss /= NTRAIN;
		if (ep == 0)
			first_loss = loss;
		last_loss = loss;
		printf("test_gpu_train: %s epoch %d train loss %.4f\n", tag, ep + 1, loss);
	}
	int correct = 0;
	double tloss = 0;
	for (int b = 0; b < NTEST && !fail; b += BATCH) {
		int n = NTEST - b < BATCH ? NTEST - b : BATCH;
		struct hn_step_result res;
		if (gpu->evaluate(st, tex + tile * b, tey + b, n, &res) < 0) {
			fprintf(stderr, "test_gpu_train: %s evaluate failed\n", tag);
			fail = 1;
			break;
		}
		correct += res.correct;
		tloss += res.loss_sum;
	}
	double acc = (double)correct / NTEST;
	printf("test_gpu_train: %s test accuracy %.4f (need %.2f), test loss %.4f, %d/%d updates "
	       "skipped, %.0f samples/s of device compute\n",
	       tag, acc, MIN_ACC, tloss / NTEST, skipped, updates,
	       compute > 0 ? EPOCHS * NTRAIN / compute : 0.0);
	if (!fail && acc < MIN_ACC) {
		printf("FAIL %s: accuracy %.4f < %.2f\n", tag, acc, MIN_ACC);
		fail = 1;
	}
	if (!fail && !(last_loss < first_loss)) {
		printf("FAIL %s: train loss did not fall (%.4f -> %.4f)\n", tag, first_loss,
		       last_loss);
		fail = 1;
	}
	if (!fail && amp == HN_AMP_BF16 && skipped) {
		printf("FAIL bf16: %d updates skipped (bf16 has no loss scale)\n", skipped);
		fail = 1;
	}
	if (!fail && skipped * 10 > updates) {
		printf("FAIL %s: %d of %d updates skipped\n", tag, skipped, updates);
		fail = 1;
	}
	gpu->destroy(st);
	free(bt);
	free(init);
	return fail;
}

int main(void)
{
	const struct hn_backend_ops *gpu = gpu_test_load("test_gpu_train");
	const char *dir = getenv("HN_FASHION_MNIST");
	if (!dir || !*dir)
		dir = "/usr/share/datasets/fashion-mnist";
	uint8_t *trx = load(dir, "train", 1, NTRAIN);
	uint8_t *trl = load(dir, "train", 0, NTRAIN);
	uint8_t *tex = load(dir, "t10k", 1, NTEST);
	uint8_t *tel = load(dir, "t10k", 0, NTEST);
	static uint16_t try_[NTRAIN], tey[NTEST];
	for (int i = 0; i < NTRAIN; i++)
		try_[i] = trl[i];
	for (int i = 0; i < NTEST; i++)
		tey[i] = tel[i];
	int fail = run(gpu, 0, trx, try_, tex, tey, 28 * 28);
	fail |= run(gpu, HN_AMP_FP16, trx, try_, tex, tey, 28 * 28);
	fail |= run(gpu, HN_AMP_BF16, trx, try_, tex, tey, 28 * 28);
	free(trx);
	free(trl);
	free(tex);
	free(tel);
	printf("test_gpu_train: %s\n", fail ? "FAILED" : "passed");
	return fail;
}
