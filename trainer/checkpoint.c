/*
 * checkpoint.c - save and load hntrain's state so that a run continues
 * exactly where it stopped.
 *
 * Layout (little-endian; docs/HNTRAIN.md has it in prose):
 *   struct ckpt_header (512 bytes: magic "HNCKPT\0\0", version, model spec,
 *     input shape, classes, parameter count, optimizer kind and constants,
 *     epochs completed, optimizer steps, seed, batch, accum, window,
 *     training samples per epoch, optimizer-state float count, and from
 *     version 2 the schedule: lr, gamma, epochs, step epochs, warm-up,
 *     schedule kind)
 *   struct ckpt_pos (version 3 on, 128 bytes; header_size 640 counts it):
 *     the position inside the epoch, for a checkpoint written between two
 *     optimizer steps (--checkpoint-every, a signal): global batches of the
 *     epoch trained, samples of its order consumed, the global batch, the
 *     epoch's loss and accuracy sums so far, why it was written, and the
 *     data's fingerprint (agree.c)
 *   float params[nparams]
 *   float opt[opt_floats]       (momentum buffer, or Adam's m then v)
 *   uint64 XXH3-64 of everything before it
 * The sample order, --augment and dropout are functions of (seed, epoch,
 * position in the epoch's order, step), so these fields are the whole RNG
 * state. The file is written to a temporary name, fsynced and renamed over
 * the old one: a crash leaves either the old or the new checkpoint, never
 * half of one. The checksum vouches only for the bytes, not for what they
 * say: every count is range-checked and every float checked finite on load
 * (a resealed file with a valid checksum over bad fields is refused by
 * field name).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/safe_open.h"
#include "common/util.h"
#include "trainer/checkpoint.h"
#include "trainer/data.h"

struct ckpt_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size;
	char spec[256];
	uint32_t in_c, in_h, in_w, nclasses;
	uint64_t nparams;
	uint32_t optim_kind;
	float momentum, beta1, beta2, eps, weight_decay;
	uint64_t epoch, step, seed;
	uint32_t batch, accum, window, reserved;
	uint64_t train_count;
	uint64_t opt_floats;
	double lr, gamma; /* version 2 on; zero in version 1 */
	uint64_t epochs, step_epochs, warmup;
	uint32_t sched, reserved2;
	uint8_t pad[484 - 424]; /* 424..439 (pad[0..15]): evaluation split; 440..443: ranks */
	char augment[28];	/* --augment's canonical spelling, NUL-padded; "" none */
};
#define CKPT_NRANKS_AT	   16 /* in pad */
#define CKPT_NORM_AT	   20 /* in pad: bytes 444..475, --normalize's mean[4] then std[4] */
#define CKPT_TEST_SPLIT_AT 0  /* in pad: bytes 424..439, the evaluation split, NUL-padded */
/* Version 3: the position in the epoch, right after the 512-byte header. */
struct ckpt_pos {
	uint64_t batch_in_epoch;   /* global batches of epoch `epoch` (0-based) trained */
	uint64_t samples_in_epoch; /* of that epoch's order: min(batches x global batch, count) */
	uint64_t global_batch;	   /* ranks x --batch, as batch x nranks says */
	uint64_t ep_seen, ep_correct;
	double ep_loss;
	uint32_t reason; /* enum hn_ckpt_reason */
	uint32_t reserved;
	uint64_t data_fp; /* hn_data_fingerprint of the data trained on; 0 not recorded */
	uint8_t pad[128 - 64];
};
_Static_assert(sizeof(struct ckpt_header) == 512, "checkpoint header layout");
_Static_assert(sizeof(struct ckpt_pos) == 128, "checkpoint position layout");
_Static_assert(HN_NORM_CH == 4, "the header holds 4 channels of --normalize");
_Static_assert(offsetof(struct ckpt_header, lr) == 376 &&
		       offsetof(struct ckpt_header, sched) == 416 &&
		       offsetof(struct ckpt_header, augment) == 484,
	       "checkpoint header layout (docs/HNTRAIN.md)");

#define CKPT_MAX_PARAMS (1ull << 31) /* 8 GiB of floats: refuse anything larger */
#define CKPT_BAD_MAX	160	     /* what is wrong with a field, named in the message */

int hn_checkpoint_check_dest(const char *path, char *err)
{
	char dcopy[4200];
	struct stat st;
	if (!*path) {
		snprintf(err, HN_ERR_MAX, "expected a file name");
		return -EINVAL;
	}
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(err, HN_ERR_MAX, "%s is a folder; give a file name in it", path);
		return -EISDIR;
	}
	snprintf(dcopy, sizeof dcopy, "%s", path);
	const char *dir = dirname(dcopy);
	int e = stat(dir, &st) < 0 ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
	if (e) {
		snprintf(err, HN_ERR_MAX, "folder %s: %s", dir, strerror(e));
		return -e;
	}
	if (access(dir, W_OK | X_OK) < 0) {
		e = errno;
		snprintf(err, HN_ERR_MAX, "folder %s: cannot create files there: %s", dir,
			 strerror(e));
		return -e;
	}
	return sprite_outfile_check(path, err); /* and not a folder anyone may swap files in */
}

int hn_checkpoint_check_replace(const char *path, char *err)
{
	struct stat st;
	char magic[8];
	if (stat(path, &st) < 0)
		return 0; /* nothing there (check_dest has looked at the folder) */
	if (S_ISREG(st.st_mode) && st.st_size == 0)
		return 0; /* nothing to lose */
	int fd = S_ISREG(st.st_mode) ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	int ours = fd >= 0 && pread(fd, magic, sizeof magic, 0) == (ssize_t)sizeof magic &&
		   !memcmp(magic, HN_CKPT_MAGIC, sizeof magic);
	if (fd >= 0)
		close(fd);
	if (ours)
		return 0;
	snprintf(err, HN_ERR_MAX,
		 "%s exists and is not an hntrain checkpoint (%s); a checkpoint would replace "
		 "it: give another file name, or remove it first",
		 path, S_ISREG(st.st_mode) ? "no HNCKPT magic" : "not a regular file");
	return -EEXIST;
}

int hn_checkpoint_save(const char *path, const struct hn_checkpoint *c, char *err)
{
	struct ckpt_header h;
	struct ckpt_pos pos;
	memset(&h, 0, sizeof h);
	memset(&pos, 0, sizeof pos);
	memcpy(h.magic, HN_CKPT_MAGIC, 8);
	h.version = HN_CKPT_VERSION;
	h.header_size = sizeof h + sizeof pos;
	snprintf(h.spec, sizeof h.spec, "%s", c->spec);
	h.in_c = (uint32_t)c->in_c;
	h.in_h = (uint32_t)c->in_h;
	h.in_w = (uint32_t)c->in_w;
	h.nclasses = (uint32_t)c->nclasses;
	h.nparams = c->nparams;
	h.optim_kind = (uint32_t)c->optim.kind;
	h.momentum = c->optim.momentum;
	h.beta1 = c->optim.beta1;
	h.beta2 = c->optim.beta2;
	h.eps = c->optim.eps;
	h.weight_decay = c->optim.weight_decay;
	h.epoch = c->epoch;
	h.step = c->step;
	h.seed = c->seed;
	h.batch = c->batch;
	h.accum = c->accum;
	h.window = c->window;
	uint32_t nranks = c->nranks ? c->nranks : 1;
	memcpy(h.pad + CKPT_NRANKS_AT, &nranks, sizeof nranks);
	memcpy(h.pad + CKPT_TEST_SPLIT_AT, c->test_split, strnlen(c->test_split, 16));
	memcpy(h.augment, c->augment, sizeof h.augment);
	memcpy(h.pad + CKPT_NORM_AT, c->norm_mean, sizeof c->norm_mean);
	memcpy(h.pad + CKPT_NORM_AT + sizeof c->norm_mean, c->norm_std, sizeof c->norm_std);
	h.train_count = c->train_count;
	h.opt_floats = c->nparams * (uint64_t)hn_optim_state_per_param(c->optim.kind);
	h.lr = c->lr;
	h.gamma = c->gamma;
	h.epochs = c->epochs;
	h.step_epochs = c->step_epochs;
	h.warmup = c->warmup;
	h.sched = c->sched;
	pos.batch_in_epoch = c->batch_in_epoch;
	pos.global_batch = (uint64_t)c->batch * nranks;
	pos.samples_in_epoch = pos.batch_in_epoch * pos.global_batch;
	if (pos.samples_in_epoch > c->train_count)
		pos.samples_in_epoch = c->train_count;
	pos.ep_seen = c->ep_seen;
	pos.ep_correct = c->ep_correct;
	pos.ep_loss = c->ep_loss;
	pos.reason = c->reason;
	pos.data_fp = c->data_fp;

	size_t hlen = sizeof h + sizeof pos;
	size_t plen = c->nparams * sizeof(float), olen = h.opt_floats * sizeof(float);
	size_t total = hlen + plen + olen;
	uint8_t *buf = malloc(total + 8);
	if (!buf) {
		snprintf(err, HN_ERR_MAX, "%s: out of memory for the checkpoint", path);
		return -ENOMEM;
	}
	memcpy(buf, &h, sizeof h);
	memcpy(buf + sizeof h, &pos, sizeof pos);
	memcpy(buf + hlen, c->params, plen);
	if (olen)
		memcpy(buf + hlen + plen, c->opt, olen);
	uint64_t sum = sprite_checksum(buf, total);
	memcpy(buf + total, &sum, 8);

	char why[SPRITE_ERR_MAX];
	int rc = sprite_write_file_atomic(path, buf, total + 8, why);
	free(buf);
	if (rc < 0) {
		snprintf(err, HN_ERR_MAX, "cannot write the checkpoint: %.200s", why);
		return rc;
	}
	return 0;
}

/* Is v within [lo, hi]? Else *bad names the field, with its value and the range. */
#define RANGE(field, v, lo, hi)                                                                    \
	do {                                                                                       \
		double v_ = (double)(v);                                                           \
		if (!bad[0] && !(v_ >= (double)(lo) && v_ <= (double)(hi)))                        \
			snprintf(bad, CKPT_BAD_MAX, "%s is %.15g, expected %.15g to %.15g", field, \
				 v_, (double)(lo), (double)(hi));                                  \
	} while (0)

/*
 * The fields of a header whose checksum held: every count and index within
 * what hntrain can have written, every float finite, and the counts
 * consistent with each other (the steps with the epochs, the batches, the
 * accumulation and the position in the epoch). A checksum vouches only for
 * the bytes: a file resealed over bad fields would otherwise divide by zero
 * (accum) or train on garbage. bad gets the first bad field, "" when none.
 */
static void check_fields(const struct ckpt_header *h, const struct ckpt_pos *p, char *bad)
{
	bad[0] = 0;
	RANGE("nparams", h->nparams, 1, CKPT_MAX_PARAMS);
	RANGE("optim_kind", h->optim_kind, 0, HN_OPT_ADAM);
	if (!bad[0] && h->opt_floats != h->nparams * (uint64_t)hn_optim_state_per_param(
							     (enum hn_optim_kind)h->optim_kind))
		snprintf(bad, CKPT_BAD_MAX,
			 "opt_floats is %" PRIu64 ", not what the optimizer keeps", h->opt_floats);
	if (!bad[0] && (memchr(h->spec, 0, sizeof h->spec) == NULL || !h->spec[0]))
		snprintf(bad, CKPT_BAD_MAX, "spec is not a model description");
	RANGE("in_c", h->in_c, 1, 65535);
	RANGE("in_h", h->in_h, 1, 65535);
	RANGE("in_w", h->in_w, 1, 65535);
	RANGE("tile bytes (in_h x in_w x in_c)", (uint64_t)h->in_h * h->in_w * h->in_c, 1,
	      1u << 30);
	RANGE("nclasses", h->nclasses, 1, HN_MAX_CLASSES);
	RANGE("momentum", h->momentum, 0, 0.9999);
	RANGE("beta1", h->beta1, 0, 0.9999999);
	RANGE("beta2", h->beta2, 0, 0.9999999);
	RANGE("eps", h->eps, 0, 1);
	RANGE("weight_decay", h->weight_decay, 0, 1);
	RANGE("batch", h->batch, 1, 65536);
	RANGE("accum", h->accum, 1, 65536);
	RANGE("window", h->window, 0, 1u << 30);
	uint32_t nranks;
	memcpy(&nranks, h->pad + CKPT_NRANKS_AT, sizeof nranks);
	RANGE("nranks", nranks ? nranks : 1, 1, 65536);
	RANGE("train_count", h->train_count, 1, 1ull << 32);
	RANGE("epoch", h->epoch, 0, 1000000);
	if (h->version >= 2) {
		RANGE("lr", h->lr, 1e-12, 1e3);
		RANGE("gamma", h->gamma, 1e-6, 1);
		RANGE("epochs", h->epochs, h->epoch > 1 ? h->epoch : 1, 1000000);
		RANGE("step_epochs", h->step_epochs, 1, 1000000);
		RANGE("warmup", h->warmup, 0, UINT32_MAX);
		RANGE("sched", h->sched, 0, 2);
	}
	if (bad[0])
		return;
	/* The steps follow from the epochs done and the position in the epoch. */
	uint64_t gb = (uint64_t)h->batch * (nranks ? nranks : 1);
	uint64_t nb = (h->train_count + gb - 1) / gb, spe = (nb + h->accum - 1) / h->accum;
	uint64_t bie = h->version >= 3 ? p->batch_in_epoch : 0;
	if (h->version >= 3) {
		RANGE("batch_in_epoch", bie, 0, nb);
		if (!bad[0] && bie % h->accum && bie != nb)
			snprintf(bad, CKPT_BAD_MAX,
				 "batch_in_epoch is %" PRIu64 ", inside a group of --accum %u", bie,
				 h->accum);
		RANGE("global_batch", p->global_batch, gb, gb);
		uint64_t s = bie * gb < h->train_count ? bie * gb : h->train_count;
		RANGE("samples_in_epoch", p->samples_in_epoch, s, s);
		RANGE("ep_seen", p->ep_seen, 0, s);
		RANGE("ep_correct", p->ep_correct, 0, p->ep_seen);
		RANGE("ep_loss", p->ep_loss, 0, 1e300);
		RANGE("reason", p->reason, 0, HN_CKPT_SIGNAL);
		if (!bad[0] && h->version >= 2 && bie && h->epoch >= h->epochs)
			snprintf(bad, CKPT_BAD_MAX,
				 "batch_in_epoch is %" PRIu64 " of epoch %" PRIu64
				 ", beyond the run's %" PRIu64 " epochs",
				 bie, h->epoch + 1, h->epochs);
	}
	uint64_t want = h->epoch * spe + (bie + h->accum - 1) / h->accum;
	if (!bad[0] && h->step != want)
		snprintf(bad, CKPT_BAD_MAX,
			 "step is %" PRIu64 ", where %" PRIu64 " epochs and %" PRIu64
			 " batches of %" PRIu64 " samples (global batch %" PRIu64
			 ", --accum %u) make %" PRIu64,
			 h->step, h->epoch, bie, h->train_count, gb, h->accum, want);
}

/*
 * Every weight and optimizer value finite (and Adam's second moments not
 * negative): a NaN would otherwise train on, report an accuracy, and be
 * saved again. bad names the first that is not.
 */
static void check_floats(const float *v, uint64_t n, const char *field, int nonneg, char *bad)
{
	for (uint64_t i = 0; i < n && !bad[0]; i++)
		if (!isfinite(v[i]) || (nonneg && v[i] < 0))
			snprintf(bad, CKPT_BAD_MAX,
				 "%s[%" PRIu64 "] is %g, expected a finite%s value", field, i,
				 (double)v[i], nonneg ? " non-negative" : "");
}

/* The fields of a checked header (and a version-3 position) into c. */
static void header_to_checkpoint(const struct ckpt_header *h, const struct ckpt_pos *pos,
				 struct hn_checkpoint *c)
{
	snprintf(c->spec, sizeof c->spec, "%s", h->spec);
	c->in_c = (int)h->in_c;
	c->in_h = (int)h->in_h;
	c->in_w = (int)h->in_w;
	c->nclasses = (int)h->nclasses;
	c->nparams = h->nparams;
	c->optim.kind = (enum hn_optim_kind)h->optim_kind;
	c->optim.momentum = h->momentum;
	c->optim.beta1 = h->beta1;
	c->optim.beta2 = h->beta2;
	c->optim.eps = h->eps;
	c->optim.weight_decay = h->weight_decay;
	c->epoch = h->epoch;
	c->step = h->step;
	c->seed = h->seed;
	c->batch = h->batch;
	c->accum = h->accum;
	c->window = h->window;
	memcpy(&c->nranks, h->pad + CKPT_NRANKS_AT, sizeof c->nranks);
	memcpy(c->test_split, h->pad + CKPT_TEST_SPLIT_AT, 16);
	c->test_split[16] = 0;
	if (c->nranks == 0) /* written before data-parallel training */
		c->nranks = 1;
	memcpy(c->augment, h->augment, sizeof c->augment);
	c->augment[sizeof c->augment - 1] = 0;
	memcpy(c->norm_mean, h->pad + CKPT_NORM_AT, sizeof c->norm_mean);
	memcpy(c->norm_std, h->pad + CKPT_NORM_AT + sizeof c->norm_mean, sizeof c->norm_std);
	c->train_count = h->train_count;
	if (h->version >= 2) {
		c->has_schedule = 1;
		c->sched = h->sched;
		c->lr = h->lr;
		c->gamma = h->gamma;
		c->epochs = h->epochs;
		c->step_epochs = h->step_epochs;
		c->warmup = h->warmup;
	}
	c->batch_in_epoch = pos->batch_in_epoch;
	c->ep_seen = pos->ep_seen;
	c->ep_correct = pos->ep_correct;
	c->ep_loss = pos->ep_loss;
	c->reason = pos->reason;
	c->data_fp = pos->data_fp;
}

int hn_checkpoint_load(const char *path, struct hn_checkpoint *c, char *err)
{
	memset(c, 0, sizeof *c);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not hang */
	if (fd < 0) {
		int e = errno;
		snprintf(err, HN_ERR_MAX, "%s: %s", path, strerror(e));
		return -e;
	}
	struct stat st;
	struct ckpt_header h;
	struct ckpt_pos pos;
	int rc = 0;
	uint8_t *buf = NULL;
	char bad[CKPT_BAD_MAX] = "";
	memset(&pos, 0, sizeof pos);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, HN_ERR_MAX, "%s: not a regular file", path);
		rc = -EINVAL;
		goto out;
	}
	if ((uint64_t)st.st_size < sizeof h + 8 ||
	    pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
		snprintf(err, HN_ERR_MAX, "%s: too short to be a checkpoint", path);
		rc = -EINVAL;
		goto out;
	}
	if (memcmp(h.magic, HN_CKPT_MAGIC, 8)) {
		snprintf(err, HN_ERR_MAX, "%s: not an hntrain checkpoint (bad magic)", path);
		rc = -EINVAL;
		goto out;
	}
	size_t hlen = h.version >= 3 ? sizeof h + sizeof pos : sizeof h;
	if (h.version < 1 || h.version > HN_CKPT_VERSION || h.header_size != hlen) {
		snprintf(err, HN_ERR_MAX, "%s: checkpoint version %u, this hntrain reads 1 to %u",
			 path, h.version, HN_CKPT_VERSION);
		rc = -EINVAL;
		goto out;
	}
	if (h.nparams == 0 || h.nparams > CKPT_MAX_PARAMS || h.optim_kind > HN_OPT_ADAM ||
	    h.opt_floats != h.nparams * (uint64_t)hn_optim_state_per_param(h.optim_kind)) {
		snprintf(err, HN_ERR_MAX, "%s: corrupt checkpoint header (parameter count)", path);
		rc = -EINVAL;
		goto out;
	}
	uint64_t total = hlen + (h.nparams + h.opt_floats) * sizeof(float);
	if ((uint64_t)st.st_size != total + 8) {
		snprintf(err, HN_ERR_MAX,
			 "%s: checkpoint is %" PRIu64 " bytes, expected %" PRIu64 " (truncated?)",
			 path, (uint64_t)st.st_size, total + 8);
		rc = -EINVAL;
		goto out;
	}
	buf = malloc(total + 8);
	if (!buf) {
		rc = -ENOMEM;
		snprintf(err, HN_ERR_MAX, "%s: out of memory", path);
		goto out;
	}
	size_t got = 0;
	while (got < total + 8) {
		ssize_t r = pread(fd, buf + got, total + 8 - got, (off_t)got);
		if (r <= 0) {
			snprintf(err, HN_ERR_MAX, "%s: read error", path);
			rc = -EIO;
			goto out;
		}
		got += (size_t)r;
	}
	uint64_t sum;
	memcpy(&sum, buf + total, 8);
	if (sum != sprite_checksum(buf, total)) {
		snprintf(err, HN_ERR_MAX, "%s: checkpoint checksum mismatch (corrupt file)", path);
		rc = -EINVAL;
		goto out;
	}
	if (h.version >= 3)
		memcpy(&pos, buf + sizeof h, sizeof pos);
	check_fields(&h, &pos, bad);
	if (bad[0]) {
		snprintf(err, HN_ERR_MAX, "%s: corrupt checkpoint header: %s", path, bad);
		rc = -EINVAL;
		goto out;
	}
	const float *pv =
		(const float *)(buf + hlen); /* hlen and the buffer keep 8-byte alignment */
	check_floats(pv, h.nparams, "params", 0, bad);
	if (h.optim_kind == HN_OPT_ADAM) {
		check_floats(pv + h.nparams, h.nparams, "adam_m", 0, bad);
		check_floats(pv + 2 * h.nparams, h.nparams, "adam_v", 1, bad);
	} else
		check_floats(pv + h.nparams, h.opt_floats, "momentum_buffer", 0, bad);
	if (bad[0]) {
		snprintf(err, HN_ERR_MAX, "%s: corrupt checkpoint: %s", path, bad);
		rc = -EINVAL;
		goto out;
	}
	header_to_checkpoint(&h, &pos, c);
	for (int k = 0; k < HN_NORM_CH; k++) /* whatever the file says: finite, std >= 0 */
		if (!isfinite(c->norm_mean[k]) || !(c->norm_std[k] >= 0 && c->norm_std[k] < 1e6)) {
			snprintf(err, HN_ERR_MAX, "%s: bad input normalisation in the header",
				 path);
			rc = -EINVAL;
			goto out;
		}
	c->params = malloc(h.nparams * sizeof(float));
	c->opt = malloc((h.opt_floats ? h.opt_floats : 1) * sizeof(float));
	if (!c->params || !c->opt) {
		hn_checkpoint_free(c);
		rc = -ENOMEM;
		snprintf(err, HN_ERR_MAX, "%s: out of memory", path);
		goto out;
	}
	memcpy(c->params, buf + hlen, h.nparams * sizeof(float));
	memcpy(c->opt, buf + hlen + h.nparams * sizeof(float), h.opt_floats * sizeof(float));
out:
	free(buf);
	close(fd);
	return rc;
}

void hn_checkpoint_free(struct hn_checkpoint *c)
{
	free(c->params);
	free(c->opt);
	c->params = c->opt = NULL;
}
