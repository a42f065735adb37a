/*
 * options.c - hntrain's command line: one table of the options (a row
 * each: name, argument, field, parser, bounds, help lines), the usage text
 * made from it, and the parsing of each value, with every message they
 * print; the checks across options are options_check.c's.
 *
 * Everything here runs before any data is read, so that a typo costs no
 * epoch: values are checked as they are parsed, and CPU lists against the
 * CPUs the process may use. A usage error exits 2.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/format.h"
#include "common/image.h"
#include "common/util.h"
#include "trainer/augment.h"
#include "trainer/backend.h"
#include "trainer/backend_load.h"
#include "trainer/cpus.h"
#include "trainer/cuda_libs.h"
#include "trainer/data.h"
#include "trainer/dist.h"
#include "trainer/model.h"
#include "trainer/options.h"
#include "trainer/team.h"

static const char *prog = HN_PROG;

/* The plugin and its CUDA libraries are loaded and named; the GPU is not touched. */
static void print_version(void)
{
	char plugin[PATH_MAX], err[HN_ERR_MAX];
	printf("hntrain %s (store format %u)\n", HNTRAIN_VERSION, SPRITE_VERSION);
	printf("cpu: %s\n", hn_backend_cpu_library());
	if (hn_cuda_plugin_find(plugin, sizeof plugin) == 0) {
		printf("gpu: CUDA plugin %s (--device gpu looks for a GPU)\n", plugin);
		if (hn_cuda_plugin_load(err) == 0)
			hn_cuda_libs_print(stdout);
		else
			printf("gpu: %s\n", err);
	} else
		printf("gpu: not built (no %s next to hntrain, in %s, or in "
		       "$HNTRAIN_CUDA_PLUGIN)\n",
		       HN_CUDA_PLUGIN_NAME, HN_PLUGIN_DIR);
	printf("ranks: %s\n", hn_dist_library());
}

/* With several ranks, a message says which rank on which machine it comes from. */
static void vmessage(const char *fmt, va_list ap)
{
	const struct hn_dist_info *d = hn_dist();
	if (d->size > 1)
		fprintf(stderr, "%s: rank %d on %s: ", prog, d->rank, d->host);
	else
		fprintf(stderr, "%s: ", prog);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void hn_die(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmessage(fmt, ap);
	va_end(ap);
	hn_dist_stop_early();
	exit(code);
}

int hn_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmessage(fmt, ap);
	va_end(ap);
	return -1;
}

/* An integer in [min, max], or exit 2 naming opt (and why, if given, after the range). */
static uint64_t parse_u64_why(const char *opt, const char *s, uint64_t min, uint64_t max,
			      const char *why)
{
	char *end;
	errno = 0;
	unsigned long long v = s && *s && *s != '-' ? strtoull(s, &end, 10) : 0;
	if (!s || !*s || *s == '-' || errno || *end || v < min || v > max)
		hn_die(2, "%s: expected an integer in [%" PRIu64 ", %" PRIu64 "]%s%s%s, got \"%s\"",
		       opt, min, max, why ? " (" : "", why ? why : "", why ? ")" : "", s ? s : "");
	return v;
}

static uint64_t parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max)
{
	return parse_u64_why(opt, s, min, max, NULL);
}

static double parse_f(const char *opt, const char *s, double min, double max)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end || !*s || !isfinite(v) || v < min || v > max)
		hn_die(2, "%s: expected a number in [%g, %g], got \"%s\"", opt, min, max, s);
	return v;
}

/*
 * Parse an --affinity style list and check that each CPU in it is one this
 * process may run on (sched_setaffinity would refuse a set with none of
 * them, and quietly drop the others): a usage error, exit 2.
 */
int hn_norm_parse(const char *s, struct hn_norm *n)
{
	memset(n, 0, sizeof *n);
	if (!strcmp(s, "none"))
		return 0;
	if (!strcmp(s, "auto")) {
		n->mode = HN_NORM_AUTO;
		return 0;
	}
	const char *p = s;
	for (;;) {
		char *end;
		if (n->nch == HN_NORM_CH)
			return -EINVAL;
		double mu = strtod(p, &end);
		if (end == p || *end != ':' || !isfinite(mu) || fabs(mu) > 1e6)
			return -EINVAL;
		p = end + 1;
		double sd = strtod(p, &end);
		if (end == p || !(sd > 0 && sd < 1e6))
			return -EINVAL;
		n->mean[n->nch] = (float)mu;
		n->std[n->nch++] = (float)sd;
		if (*end == '\0')
			break;
		if (*end != ',')
			return -EINVAL;
		p = end + 1;
	}
	n->mode = HN_NORM_GIVEN;
	return 0;
}

static void parse_cpus_opt(const char *opt, const char *s, const cpu_set_t *allowed, cpu_set_t *set)
{
	if (hn_cpus_parse(s, set) < 0)
		hn_die(2, "%s: expected a CPU list such as 0-1,3, got \"%s\"", opt, s);
	for (int i = 0; i < CPU_SETSIZE; i++) {
		if (!CPU_ISSET(i, set) || CPU_ISSET(i, allowed))
			continue;
		char list[256];
		hn_cpus_format(allowed, list, sizeof list);
		long ncpu = sysconf(_SC_NPROCESSORS_CONF);
		hn_die(2, "%s %s: %s CPU %d (this process may use %s)", opt, s,
		       ncpu > 0 && i >= ncpu ? "no such" : "not allowed:", i, list);
	}
}

/* ---- the option table ------------------------------------------------- */
/*
 * The value parsers a row names. Each checks its value as the option's own
 * message says (a usage error exits 2) and stores it; the generic ones at
 * the row's field, within its bounds.
 */
struct opt_row;
typedef void opt_parser(const struct opt_row *r, const char *arg, struct hn_opts *o);

/*
 * One row per option: its name, argument, short letter, parser, the field
 * the generic parsers fill and the given_* flag the option sets, bounds,
 * and its lines of the usage text. A row without a name is a heading of the
 * usage text. parse_opts builds getopt's table from these rows and usage()
 * the --help text, so that adding an option (say --background) is one row
 * here, its field in struct hn_opts, and its man page entry.
 */
struct opt_row {
	const char *name; /* NULL: a heading ("data:") */
	int arg;	  /* no_argument, required_argument or optional_argument */
	char letter;	  /* a short option (-V), or 0 */
	opt_parser *parse;
	size_t field;		    /* offsetof(struct hn_opts, ...) for the generic parsers */
	size_t given;		    /* offsetof its given_* flag; 0: none */
	uint64_t min, max;	    /* p_u64, p_int */
	double lo, hi;		    /* p_f64, p_f32 */
	const char *why;	    /* p_int: said after the range */
	const char *const *choices; /* p_choice, p_name: the values, NULL-terminated */
	const char *meta;	    /* the argument in the usage text: "N", "[=fp16|bf16]" */
	const char *help;	    /* its lines of the usage text, apart by '\n' */
};

#define AT(r, o, T) ((T *)(void *)((char *)(o) + (r)->field))

static const char *opt_name(const struct opt_row *r, char *buf, size_t cap)
{
	snprintf(buf, cap, "--%s", r->name);
	return buf;
}

static void p_str(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	*AT(r, o, const char *) = arg;
}

static void p_flag(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	(void)arg;
	*AT(r, o, int) = 1;
}

static void p_u64(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	char n[40];
	*AT(r, o, uint64_t) = parse_u64_why(opt_name(r, n, sizeof n), arg, r->min, r->max, r->why);
}

static void p_int(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	char n[40];
	*AT(r, o, int) = (int)parse_u64_why(opt_name(r, n, sizeof n), arg, r->min, r->max, r->why);
}

static void p_f64(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	char n[40];
	*AT(r, o, double) = parse_f(opt_name(r, n, sizeof n), arg, r->lo, r->hi);
}

static void p_f32(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	char n[40];
	*AT(r, o, float) = (float)parse_f(opt_name(r, n, sizeof n), arg, r->lo, r->hi);
}

static void p_tile(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	unsigned h = 0, w = 0, ch = 0;
	int n = sscanf(arg, "%ux%ux%u", &h, &w, &ch);
	(void)r;
	if (n < 2 || !h || !w || h > 4096 || w > 4096 || (n == 3 && (ch != 1 && ch != 3)))
		hn_die(2, "--tile: expected HxW or HxWxC (C 1 or 3), got \"%s\"", arg);
	o->tile_h = h;
	o->tile_w = w;
	o->tile_c = n == 3 ? ch : 0;
}

static void p_fit(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	(void)r;
	if (sprite_fit_parse(arg, &o->fit) < 0)
		hn_die(2, "--fit: expected crop, pad or stretch, got \"%s\"", arg);
}

static void p_background(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	(void)r;
	if (sprite_bg_parse(arg, &o->background) < 0)
		hn_die(2,
		       "--background: expected none, black, white or R,G,B (each 0-255), "
		       "got \"%s\"",
		       arg);
}

static void p_window(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	(void)r;
	o->window = !strcmp(arg, "full") ? 0 : (uint32_t)parse_u64("--window", arg, 1, 1u << 30);
}

/* The spelling now; whether the crop fits the tile once the data is open. */
static void p_augment(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	char err[HN_ERR_MAX];
	(void)r;
	if (hn_augment_parse(arg, &o->augment, err) < 0)
		hn_die(2, "--augment %s: %s", arg, err);
}

static void p_normalize(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	(void)r;
	if (hn_norm_parse(arg, &o->norm) < 0)
		hn_die(2,
		       "--normalize %s: expected none, auto or MEAN:STD per channel "
		       "(at most 4, STD > 0), such as 0.286:0.353",
		       arg);
}

static void p_cache(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	(void)r;
	if (sprite_parse_size(arg, &o->cache) < 0)
		hn_die(2, "--cache: expected a size such as 512M, got \"%s\"", arg);
}

/* The spelling now; whether it fits the tiles once the data is open. */
static void p_model(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	char err[HN_ERR_MAX];
	(void)r;
	if (hn_model_check_spec(arg, err) < 0)
		hn_die(2, "--model %s: %s", arg, err);
	o->model = arg;
}

/* Which of r->choices arg is; a usage error listing them when none. */
static int choice(const struct opt_row *r, const char *arg)
{
	char list[160] = "";
	size_t k = 0, n = 0;
	for (; r->choices[k]; k++)
		if (!strcmp(arg, r->choices[k]))
			return (int)k;
	for (size_t i = 0; i < k && n < sizeof list; i++) {
		const char *sep = i + 1 == k ? " or " : ", ";
		n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? sep : "",
				      r->choices[i]);
	}
	hn_die(2, "--%s: expected %s, got \"%s\"", r->name, list, arg);
}

/* One of the choices, stored as its index: an enum listed in its order. */
static void p_choice(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	*AT(r, o, int) = choice(r, arg);
}
_Static_assert(sizeof(enum hn_optim_kind) == sizeof(int) && HN_OPT_SGD == 0 &&
		       HN_OPT_MOMENTUM == 1 && HN_OPT_ADAM == 2,
	       "--optim's choices are enum hn_optim_kind in order");
_Static_assert(sizeof(enum hn_sched) == sizeof(int) && HN_SCHED_CONSTANT == 0 &&
		       HN_SCHED_STEP == 1 && HN_SCHED_COSINE == 2,
	       "--schedule's choices are enum hn_sched in order");

/* One of the choices, stored as its name. */
static void p_name(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	*AT(r, o, const char *) = r->choices[choice(r, arg)];
}

static void p_amp(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	(void)r;
	if (!arg || !strcmp(arg, "fp16"))
		o->amp = HN_AMP_FP16;
	else if (!strcmp(arg, "bf16"))
		o->amp = HN_AMP_BF16;
	else
		hn_die(2, "--amp=%s: fp16 or bf16", arg);
}

static void p_emulate(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	char err[HN_ERR_MAX];
	(void)r;
	if (hn_emulate_parse(arg, &o->emulate, err) < 0)
		hn_die(2, "--emulate %s: %s", arg, err);
}

/* N optimizer steps, or Nm: every N minutes. */
static void p_ckpt_every(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	size_t len = strlen(arg);
	int minutes = len > 1 && arg[len - 1] == 'm';
	char num[32];
	(void)r;
	snprintf(num, sizeof num, "%.*s", (int)(len - (size_t)minutes), arg);
	o->ckpt_every_steps = 0;
	o->ckpt_every_s = 0;
	if (minutes)
		o->ckpt_every_s = 60 * parse_f("--checkpoint-every", num, 0.01, 1e6);
	else
		o->ckpt_every_steps = parse_u64("--checkpoint-every", num, 1, UINT32_MAX);
}

static void usage(FILE *f);

static void p_help(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	(void)r, (void)arg, (void)o;
	usage(stdout);
	exit(0);
}

static void p_version(const struct opt_row *r, const char *arg, struct hn_opts *o)
{
	(void)r, (void)arg, (void)o;
	print_version();
	exit(0);
}

/* clang-format off */
#define F(f)	offsetof(struct hn_opts, f)
#define NONE	no_argument
#define REQ	required_argument
#define HEAD(h) {.help = h} /* a heading of the usage text */
/* clang-format on */
#define CHOICES(...) ((const char *const[]){__VA_ARGS__, NULL})

static const struct opt_row rows[] = {
	HEAD("data:"),
	{"data", REQ, .parse = p_str, .field = F(data), .meta = "PATH",
	 .help = "a spritefs mount, a store file (*.sprites), an image folder\n"
		 "(TIFF/PNG/JPEG/PGM: ROOT/<split>/<class>/ or ROOT/<class>/), or a\n"
		 "folder of IDX files"},
	{"split", REQ, .parse = p_str, .field = F(split), .meta = "NAME",
	 .help = "training split (train)"},
	{"test-split", REQ, .parse = p_str, .field = F(test_split), .given = F(given_test_split),
	 .meta = "NAME",
	 .help = "evaluation split, or none (default: val, valid, validation\n"
		 "or test, else the one split besides train)"},
	{"limit", REQ, .parse = p_u64, .field = F(limit), .min = 1, .max = UINT32_MAX, .meta = "N",
	 .help = "train on N samples only, spread over the split by --seed"},
	{"test-limit", REQ, .parse = p_u64, .field = F(test_limit), .min = 1, .max = UINT32_MAX,
	 .meta = "N", .help = "evaluate on N test samples only, drawn the same way"},
	{"preload", NONE, .parse = p_flag, .field = F(preload),
	 .help = "read the whole data set into RAM first (zero-I/O baseline)"},
	{"strict", NONE, .parse = p_flag, .field = F(strict),
	 .help = "image folders: stop at a file that does not decode, or\n"
		 "an entry that is neither a file nor a folder (default:\n"
		 "report it and train without it)"},
	{"skip-bad-sheets", NONE, .parse = p_flag, .field = F(skip_bad_sheets),
	 .help = "stores and mounts: train without the samples of a sheet\n"
		 "that cannot be read (default: stop), each sheet named"},
	{"tile", REQ, .parse = p_tile, .given = F(given_tile), .meta = "HxW[xC]",
	 .help = "image folders: fit images to this tile (default: first image)"},
	{"fit", REQ, .parse = p_fit, .given = F(given_fit), .meta = "MODE",
	 .help = "image folders: crop (default), pad or stretch, as\n"
		 "spritefs-pack --fit"},
	{"background", REQ, .parse = p_background, .given = F(given_background), .meta = "COLOUR",
	 .help = "image folders: what transparent pixels become: none\n"
		 "(default: the colours as stored, as PIL's convert), black,\n"
		 "white or R,G,B; as spritefs-pack --background"},
	{"window", REQ, .parse = p_window, .given = F(given_window), .meta = "N|full",
	 .help = "the sample order: N sheets per shuffle window, or the full\n"
		 "shuffle (default: the data set's, as a store records it)"},
	{"cache", REQ, .parse = p_cache, .given = F(given_cache), .meta = "SIZE",
	 .help = "store files: sheet cache budget (default: no limit)"},
	{"augment", REQ, .parse = p_augment, .given = F(given_augment), .meta = "LIST",
	 .help = "augment the training tiles in the loaders, seeded:\n"
		 "crop:P (zero-pad P, random crop), flip (horizontal),\n"
		 "rrc:S (random-resized-crop, area S..1)"},
	{"normalize", REQ, .parse = p_normalize, .given = F(given_normalize), .meta = "N",
	 .help = "per-channel input normalisation: none (default), auto\n"
		 "(mean and std of up to 10,000 training samples), or\n"
		 "MEAN:STD[,MEAN:STD...] per channel on the 0..1 scale"},
	{"loaders", REQ, .parse = p_int, .field = F(loaders), .given = F(given_loaders), .min = 1,
	 .max = 64, .meta = "N", .help = "loader threads (2; 1 with --emulate)"},
	{"queue", REQ, .parse = p_int, .field = F(queue), .given = F(given_queue), .min = 1,
	 .max = 1024, .meta = "N", .help = "batches read ahead (8; 2 with --emulate)"},
	HEAD("model and training:"),
	{"model", REQ, .parse = p_model, .given = F(given_model), .meta = "M",
	 .help = "mlp, cnn, lenet5, cnn-bn, resnet18, resnet50, resnet-fm, or a\n"
		 "spec such as c32k3-r-m2-d128-r or c32k3p1-bn-r-res32x2 (cnn)"},
	{"optim", REQ, .parse = p_choice, .field = F(optim.kind), .given = F(given_optim),
	 .choices = CHOICES("sgd", "momentum", "adam"), .meta = "O",
	 .help = "sgd, momentum or adam (momentum)"},
	{"lr", REQ, .parse = p_f64, .field = F(lr), .given = F(given_lr), .lo = 1e-12, .hi = 1e3,
	 .meta = "X", .help = "learning rate (0.05; adam 0.001)"},
	{"momentum", REQ, .parse = p_f32, .field = F(optim.momentum), .lo = 0, .hi = 0.9999,
	 .meta = "X", .help = "momentum (0.9)"},
	{"wd", REQ, .parse = p_f32, .field = F(optim.weight_decay), .given = F(given_wd), .lo = 0,
	 .hi = 1, .meta = "X", .help = "weight decay (5e-4 for sgd/momentum; adam 0)"},
	{"schedule", REQ, .parse = p_choice, .field = F(sched), .given = F(given_sched),
	 .choices = CHOICES("constant", "step", "cosine"), .meta = "S",
	 .help = "constant, step or cosine (cosine)"},
	{"step-epochs", REQ, .parse = p_u64, .field = F(step_epochs), .given = F(given_step_epochs),
	 .min = 1, .max = 1000000, .meta = "N",
	 .help = "step schedule: multiply lr by --gamma every N epochs (5)"},
	{"gamma", REQ, .parse = p_f64, .field = F(gamma), .given = F(given_gamma), .lo = 1e-6,
	 .hi = 1, .meta = "X", .help = "step schedule factor (0.1)"},
	{"warmup", REQ, .parse = p_u64, .field = F(warmup), .given = F(given_warmup), .min = 0,
	 .max = UINT32_MAX, .meta = "N",
	 .help = "linear warm-up over the first N optimizer steps (0)"},
	{"batch", REQ, .parse = p_int, .field = F(batch), .given = F(given_batch), .min = 1,
	 .max = 65536, .meta = "N", .help = "samples per batch (64)"},
	{"accum", REQ, .parse = p_int, .field = F(accum), .given = F(given_accum), .min = 1,
	 .max = 65536, .meta = "K", .help = "accumulate gradients over K batches per step (1)"},
	{"epochs", REQ, .parse = p_u64, .field = F(epochs), .given = F(given_epochs), .min = 1,
	 .max = 1000000, .meta = "N", .help = "epochs in the run, counting resumed ones (1)"},
	{"stop-after", REQ, .parse = p_u64, .field = F(stop_after), .min = 1, .max = 1000000,
	 .meta = "N", .help = "stop after epoch N (the schedule still spans --epochs)"},
	{"seed", REQ, .parse = p_u64, .field = F(seed), .given = F(given_seed), .min = 0,
	 .max = UINT64_MAX, .meta = "N",
	 .help = "seed of the sample order, weights and dropout (1)"},
	HEAD("compute:"),
	{"device", REQ, .parse = p_name, .field = F(device), .choices = CHOICES("cpu", "gpu"),
	 .meta = "D", .help = "cpu or gpu (cpu)"},
	{"threads", REQ, .parse = p_int, .field = F(threads), .min = 1, .max = HN_TEAM_MAX,
	 .why = "the CPU backend runs at most 64", .meta = "N",
	 .help = "maths threads, 1-64 (default: the backend's)"},
	{"affinity", REQ, .parse = p_str, .field = F(affinity), .meta = "LIST",
	 .help = "pin the compute thread and maths threads to CPUs, e.g. 0-1"},
	{"loader-affinity", REQ, .parse = p_str, .field = F(loader_affinity), .meta = "L",
	 .help = "pin the loader threads (default: the CPUs the process had)"},
	{"amp", optional_argument, .parse = p_amp, .meta = "[=fp16|bf16]",
	 .help = "gpu: mixed precision, fp16 with a loss scale (--amp) or\n"
		 "bf16"},
	{"fast", NONE, .parse = p_flag, .field = F(fast),
	 .help = "gpu: cuDNN's fastest convolution algorithms, timed at start;\n"
		 "weights then differ run to run (default: deterministic ones)"},
	{"tf32", NONE, .parse = p_flag, .field = F(tf32),
	 .help = "gpu: fp32 convolutions and products on tensor cores with\n"
		 "TF32 inputs (10-bit mantissa), as PyTorch's default for\n"
		 "convolutions; still deterministic (default: strict fp32)"},
	{"emulate", REQ, .parse = p_emulate, .meta = "PROFILE",
	 .help = "no model: each rank is an emulated accelerator that reads its\n"
		 "share of every batch and sleeps for the profile's compute\n"
		 "time (MLPerf Storage's method); reports accelerator\n"
		 "utilisation (AU). resnet50-h100 (batch 400, 0.224 s),\n"
		 "resnet50-a100, unet3d-h100, unet3d-a100, cosmoflow-h100,\n"
		 "cosmoflow-a100, or BATCH:SECONDS"},
	HEAD("output:"),
	{"plan", NONE, .parse = p_flag, .field = F(plan),
	 .help = "print the memory the run needs and exit"},
	{"gemm-peak", NONE, .parse = p_flag, .field = F(gemm_peak),
	 .help = "print the SGEMM GFLOP/s of --threads threads on this\n"
		 "machine (the bound of the training GFLOP/s in --log) and\n"
		 "exit"},
	{"checkpoint", REQ, .parse = p_str, .field = F(checkpoint), .meta = "FILE",
	 .help = "write a checkpoint after each epoch (atomically; its folder\n"
		 "is checked first); FILE must be new, empty or a\n"
		 "checkpoint, and not in the data"},
	{"checkpoint-every", REQ, .parse = p_ckpt_every, .meta = "N",
	 .help = "also write --checkpoint every N optimizer steps, or Nm:\n"
		 "every N minutes, inside an epoch (at a step boundary)\n"
		 "SIGTERM or SIGINT with --checkpoint: checkpoint at the\n"
		 "next step boundary and exit 75; SIGUSR1: checkpoint there\n"
		 "and go on"},
	{"resume", REQ, .parse = p_str, .field = F(resume), .meta = "FILE",
	 .help = "continue a run from a checkpoint (its lr, schedule and\n"
		 "epochs too, unless given here); one with all the run's\n"
		 "epochs is evaluated on the test split"},
	{"log", REQ, .parse = p_str, .field = F(log), .meta = "FILE",
	 .help = "JSON lines: one per epoch, then a final one\n"
		 "(not in the data, nor the --checkpoint or --resume file)"},
	{"export", REQ, .parse = p_str, .field = F(export_path), .meta = "FILE.npz",
	 .help = "write the final weights, by layer name, as a numpy .npz\n"
		 "(atomically; not in the data)"},
	{"quiet", NONE, .parse = p_flag, .field = F(quiet),
	 .help = "print only the final \"weights xxh3\" line and errors"},
	{"version", NONE, 'V', p_version,
	 .help = "the version, store format and backends, and exit"},
	{"help", NONE, 'h', p_help, .help = "this text"},
};
#define NROWS (sizeof rows / sizeof rows[0])

static void usage(FILE *f)
{
	fputs("usage: hntrain --data PATH [options]\n"
	      "\n"
	      "Train an image classifier on CPU (OpenBLAS) or GPU (CUDA plugin), reporting\n"
	      "compute time and data-wait time apart.\n"
	      "\n",
	      f);
	for (size_t i = 0; i < NROWS; i++) {
		const struct opt_row *r = &rows[i];
		if (!r->name) {
			fprintf(f, "%s\n", r->help);
			continue;
		}
		char left[64], letter[8] = "";
		if (r->letter)
			snprintf(letter, sizeof letter, "-%c, ", r->letter);
		snprintf(left, sizeof left, "%s--%s%s%s", letter, r->name,
			 r->meta && r->meta[0] != '[' ? " " : "", r->meta ? r->meta : "");
		const char *h = r->help; /* lines after the first are indented as it is */
		for (int line = 0; *h; line++) {
			size_t n = strcspn(h, "\n");
			fprintf(f, "  %-20s %.*s\n", line ? "" : left, (int)n, h);
			h += n + (h[n] == '\n');
		}
	}
	fputs("\n"
	      "A read that brings no data for HNTRAIN_DATA_TIMEOUT seconds (default 60), or\n"
	      "HNTRAIN_DATA_TIMEOUT_FACTOR (default 10) times the slowest read so far where\n"
	      "longer, ends the run naming the source (a mount: its daemon and pid); with\n"
	      "several ranks HNTRAIN_DIST_TIMEOUT (default 600) bounds it too.\n"
	      "docs/HNTRAIN.md describes the sources, the log fields and the checkpoint format.\n",
	      f);
}

/* getopt_long's table and short options, built from rows: option k returns 256 + k. */
static void parse_opts(int argc, char **argv, struct hn_opts *o)
{
	struct option lo[NROWS + 1];
	char shorts[2 * NROWS + 2] = ":";
	size_t n = 0, ns = 1;
	memset(lo, 0, sizeof lo);
	for (size_t i = 0; i < NROWS; i++) {
		if (!rows[i].name)
			continue;
		lo[n++] = (struct option){rows[i].name, rows[i].arg, NULL, 256 + (int)i};
		if (rows[i].letter)
			shorts[ns++] = rows[i].letter;
	}
	shorts[ns] = 0;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, shorts, lo, NULL)) != -1;) {
		if (c == ':')
			hn_die(2, "option %s needs a value (see --help)", argv[optind - 1]);
		const struct opt_row *r = c >= 256 && c < 256 + (int)NROWS ? &rows[c - 256] : NULL;
		for (size_t i = 0; i < NROWS && !r; i++)
			if (rows[i].letter && c == rows[i].letter)
				r = &rows[i];
		if (!r) {
			if (optopt && optopt < 256)
				hn_die(2, "unknown option -%c (see --help)", optopt);
			hn_die(2, "unknown or incomplete option \"%s\" (see --help)",
			       argv[optind - 1]);
		}
		r->parse(r, optarg, o);
		if (r->given)
			*(int *)(void *)((char *)o + r->given) = 1;
	}
	if (optind < argc)
		hn_die(2, "unexpected argument \"%s\" (see --help)", argv[optind]);
	if (o->gemm_peak)
		return; /* a mode of its own (main): no data, no training */
	if (!o->data)
		hn_die(2, "--data PATH is required (see --help)");
	if (!o->given_lr)
		o->lr = -1; /* the optimizer's default, once --resume has said which */
	if (o->amp && strcmp(o->device, "gpu"))
		hn_die(2, "--amp needs --device gpu");
	if (o->fast && strcmp(o->device, "gpu"))
		hn_die(2, "--fast needs --device gpu (the cpu backend has one algorithm)");
	if (o->tf32 && strcmp(o->device, "gpu"))
		hn_die(2, "--tf32 needs --device gpu (the cpu backend computes in fp32)");
	if (o->tf32 && o->amp)
		hn_die(2, "--tf32 and --amp: choose one (--amp computes in 16-bit floats already)");
}

void hn_opts_parse(int argc, char **argv, struct hn_opts *o)
{
	*o = (struct hn_opts){
		.split = "train",
		.test_split = NULL, /* found in the data: hn_source_pick_test_split */
		.fit = SPRITE_FIT_CROP,
		.model = "cnn",
		.optim = {.kind = HN_OPT_MOMENTUM,
			  .momentum = 0.9f,
			  .beta1 = 0.9f,
			  .beta2 = 0.999f,
			  .eps = 1e-8f},
		.sched = HN_SCHED_COSINE,
		.step_epochs = 5,
		.gamma = 0.1,
		.batch = 64,
		.accum = 1,
		.epochs = 1,
		.seed = 1,
		.loaders = 2,
		.queue = 8,
		.device = "cpu",
	};
	parse_opts(argc, argv, o);
	if (o->gemm_peak)
		return; /* --affinity has never applied to it */
	/* CPU lists are checked against the CPUs this process may use, before any work. */
	cpu_set_t orig_mask;
	sched_getaffinity(0, sizeof orig_mask, &orig_mask);
	o->loader_mask = orig_mask;
	if (o->affinity)
		parse_cpus_opt("--affinity", o->affinity, &orig_mask, &o->pin_mask);
	if (o->loader_affinity)
		parse_cpus_opt("--loader-affinity", o->loader_affinity, &orig_mask,
			       &o->loader_mask);
}
