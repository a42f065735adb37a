/*
 * options.c - hntrain's command line: the usage text, the option table
 * and the parsing of each value, with every message they print; the checks
 * across options are options_check.c's.
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
#include "trainer/app.h"
#include "trainer/backend.h"
#include "trainer/data.h"
#include "trainer/dist.h"
#include "trainer/model.h"
#include "trainer/options.h"
#include "trainer/team.h"

static const char *prog = HN_PROG;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: hntrain --data PATH [options]\n"
		"\n"
		"Train an image classifier on CPU (OpenBLAS) or GPU (CUDA plugin), reporting\n"
		"compute time and data-wait time apart.\n"
		"\n"
		"data:\n"
		"  --data PATH          a spritefs mount, a store file (*.sprites), an image "
		"folder\n"
		"                       (TIFF/PNG/JPEG/PGM: ROOT/<split>/<class>/ or "
		"ROOT/<class>/), "
		"or a\n"
		"                       folder of IDX files\n"
		"  --split NAME         training split (train)\n"
		"  --test-split NAME    evaluation split, or none (default: val, valid, validation\n"
		"                       or test, else the one split besides train)\n"
		"  --limit N            train on N samples only, spread over the split by --seed\n"
		"  --test-limit N       evaluate on N test samples only, drawn the same way\n"
		"  --preload            read the whole data set into RAM first (zero-I/O "
		"baseline)\n"
		"  --strict             image folders: stop at a file that does not decode, or\n"
		"                       an entry that is neither a file nor a folder (default:\n"
		"                       report it and train without it)\n"
		"  --skip-bad-sheets    stores and mounts: train without the samples of a sheet\n"
		"                       that cannot be read (default: stop), each sheet named\n"
		"  --tile HxW[xC]       image folders: fit images to this tile (default: first "
		"image)\n"
		"  --fit MODE           image folders: crop (default), pad or stretch, as\n"
		"                       spritefs-pack --fit\n"
		"  --window N|full      the sample order: N sheets per shuffle window, or the full\n"
		"                       shuffle (default: the data set's, as a store records it)\n"
		"  --cache SIZE         store files: sheet cache budget (default: no limit)\n"
		"  --augment LIST       augment the training tiles in the loaders, seeded:\n"
		"                       crop:P (zero-pad P, random crop), flip (horizontal),\n"
		"                       rrc:S (random-resized-crop, area S..1)\n"
		"  --normalize N        per-channel input normalisation: none (default), auto\n"
		"                       (mean and std of up to 10,000 training samples), or\n"
		"                       MEAN:STD[,MEAN:STD...] per channel on the 0..1 scale\n"
		"  --loaders N          loader threads (2)\n"
		"  --queue N            batches read ahead (8)\n"
		"model and training:\n"
		"  --model M            mlp, cnn, lenet5, cnn-bn, resnet18, resnet50, resnet-fm, or a\n"
		"                       spec such as c32k3-r-m2-d128-r or c32k3p1-bn-r-res32x2 (cnn)\n"
		"  --optim O            sgd, momentum or adam (momentum)\n"
		"  --lr X               learning rate (0.05; adam 0.001)\n"
		"  --momentum X         momentum (0.9)\n"
		"  --wd X               weight decay (5e-4 for sgd/momentum; adam 0)\n"
		"  --schedule S         constant, step or cosine (cosine)\n"
		"  --step-epochs N      step schedule: multiply lr by --gamma every N epochs (5)\n"
		"  --gamma X            step schedule factor (0.1)\n"
		"  --warmup N           linear warm-up over the first N optimizer steps (0)\n"
		"  --batch N            samples per batch (64)\n"
		"  --accum K            accumulate gradients over K batches per step (1)\n"
		"  --epochs N           epochs in the run, counting resumed ones (1)\n"
		"  --stop-after N       stop after epoch N (the schedule still spans --epochs)\n"
		"  --seed N             seed of the sample order, weights and dropout (1)\n"
		"compute:\n"
		"  --device D           cpu or gpu (cpu)\n"
		"  --threads N          maths threads, 1-64 (default: the backend's)\n"
		"  --affinity LIST      pin the compute thread and maths threads to CPUs, e.g. "
		"0-1\n"
		"  --loader-affinity L  pin the loader threads (default: the CPUs the process "
		"had)\n"
		"  --amp[=fp16|bf16]    gpu: mixed precision, fp16 with a loss scale (--amp) or\n"
		"                       bf16\n"
		"  --fast               gpu: cuDNN's fastest convolution algorithms, timed at start;\n"
		"                       weights then differ run to run (default: deterministic ones)\n"
		"  --emulate PROFILE    no model: each rank is an emulated accelerator that reads its\n"
		"                       share of every batch and sleeps for the profile's compute\n"
		"                       time (MLPerf Storage's method); reports accelerator\n"
		"                       utilisation (AU). resnet50-h100 (batch 400, 0.224 s),\n"
		"                       resnet50-a100, unet3d-h100, unet3d-a100, cosmoflow-h100,\n"
		"                       cosmoflow-a100, or BATCH:SECONDS\n"
		"output:\n"
		"  --plan               print the memory the run needs and exit\n"
		"  --gemm-peak          print the SGEMM GFLOP/s of --threads threads on this\n"
		"                       machine (the bound of the training GFLOP/s in --log) and\n"
		"                       exit\n"
		"  --checkpoint FILE    write a checkpoint after each epoch (atomically; its "
		"folder\n"
		"                       is checked first); FILE must be new, empty or a\n"
		"                       checkpoint, and not in the data\n"
		"  --checkpoint-every N also write --checkpoint every N optimizer steps, or Nm:\n"
		"                       every N minutes, inside an epoch (at a step boundary)\n"
		"                       SIGTERM or SIGINT with --checkpoint: checkpoint at the\n"
		"                       next step boundary and exit 75; SIGUSR1: checkpoint there\n"
		"                       and go on\n"
		"  --resume FILE        continue a run from a checkpoint (its lr, schedule and\n"
		"                       epochs too, unless given here); one with all the run's\n"
		"                       epochs is evaluated on the test split\n"
		"  --log FILE           JSON lines: one per epoch, then a final one\n"
		"                       (not in the data, nor the --checkpoint or --resume "
		"file)\n"
		"  --export FILE.npz    write the final weights, by layer name, as a numpy .npz\n"
		"                       (atomically; not in the data)\n"
		"  --quiet              print only the final \"weights xxh3\" line and errors\n"
		"  -V, --version        the version, store format and backends, and exit\n"
		"  --help               this text\n"
		"\n"
		"A read that brings no data for HNTRAIN_DATA_TIMEOUT seconds (default 60), or\n"
		"HNTRAIN_DATA_TIMEOUT_FACTOR (default 10) times the slowest read so far where\n"
		"longer, ends the run naming the source (a mount: its daemon and pid); with\n"
		"several ranks HNTRAIN_DIST_TIMEOUT (default 600) bounds it too.\n"
		"docs/HNTRAIN.md describes the sources, the log fields and the checkpoint "
		"format.\n");
}

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

static void parse_opts(int argc, char **argv, struct hn_opts *o)
{
	int gemm_peak = 0;
	enum {
		O_DATA = 256,
		O_SPLIT,
		O_TEST_SPLIT,
		O_LIMIT,
		O_TEST_LIMIT,
		O_PRELOAD,
		O_TILE,
		O_FIT,
		O_WINDOW,
		O_AUGMENT,
		O_NORMALIZE,
		O_CACHE,
		O_LOADERS,
		O_QUEUE,
		O_MODEL,
		O_OPTIM,
		O_LR,
		O_MOMENTUM,
		O_WD,
		O_SCHEDULE,
		O_STEP_EPOCHS,
		O_GAMMA,
		O_WARMUP,
		O_BATCH,
		O_ACCUM,
		O_EPOCHS,
		O_STOP_AFTER,
		O_SEED,
		O_DEVICE,
		O_THREADS,
		O_AFFINITY,
		O_LOADER_AFFINITY,
		O_AMP,
		O_FAST,
		O_PLAN,
		O_CHECKPOINT,
		O_RESUME,
		O_CKPT_EVERY,
		O_LOG,
		O_EXPORT,
		O_STRICT,
		O_SKIP_BAD,
		O_QUIET,
		O_HELP,
		O_VERSION,
		O_GEMM_PEAK,
		O_EMULATE,
	};
	static const struct option lo[] = {
		{"data", required_argument, 0, O_DATA},
		{"split", required_argument, 0, O_SPLIT},
		{"test-split", required_argument, 0, O_TEST_SPLIT},
		{"limit", required_argument, 0, O_LIMIT},
		{"test-limit", required_argument, 0, O_TEST_LIMIT},
		{"preload", no_argument, 0, O_PRELOAD},
		{"tile", required_argument, 0, O_TILE},
		{"fit", required_argument, 0, O_FIT},
		{"window", required_argument, 0, O_WINDOW},
		{"augment", required_argument, 0, O_AUGMENT},
		{"normalize", required_argument, 0, O_NORMALIZE},
		{"cache", required_argument, 0, O_CACHE},
		{"loaders", required_argument, 0, O_LOADERS},
		{"queue", required_argument, 0, O_QUEUE},
		{"model", required_argument, 0, O_MODEL},
		{"optim", required_argument, 0, O_OPTIM},
		{"lr", required_argument, 0, O_LR},
		{"momentum", required_argument, 0, O_MOMENTUM},
		{"wd", required_argument, 0, O_WD},
		{"schedule", required_argument, 0, O_SCHEDULE},
		{"step-epochs", required_argument, 0, O_STEP_EPOCHS},
		{"gamma", required_argument, 0, O_GAMMA},
		{"warmup", required_argument, 0, O_WARMUP},
		{"batch", required_argument, 0, O_BATCH},
		{"accum", required_argument, 0, O_ACCUM},
		{"epochs", required_argument, 0, O_EPOCHS},
		{"stop-after", required_argument, 0, O_STOP_AFTER},
		{"seed", required_argument, 0, O_SEED},
		{"device", required_argument, 0, O_DEVICE},
		{"threads", required_argument, 0, O_THREADS},
		{"affinity", required_argument, 0, O_AFFINITY},
		{"loader-affinity", required_argument, 0, O_LOADER_AFFINITY},
		{"amp", optional_argument, 0, O_AMP},
		{"fast", no_argument, 0, O_FAST},
		{"plan", no_argument, 0, O_PLAN},
		{"checkpoint", required_argument, 0, O_CHECKPOINT},
		{"resume", required_argument, 0, O_RESUME},
		{"checkpoint-every", required_argument, 0, O_CKPT_EVERY},
		{"log", required_argument, 0, O_LOG},
		{"export", required_argument, 0, O_EXPORT},
		{"strict", no_argument, 0, O_STRICT},
		{"skip-bad-sheets", no_argument, 0, O_SKIP_BAD},
		{"quiet", no_argument, 0, O_QUIET},
		{"help", no_argument, 0, O_HELP},
		{"version", no_argument, 0, O_VERSION},
		{"gemm-peak", no_argument, 0, O_GEMM_PEAK},
		{"emulate", required_argument, 0, O_EMULATE},
		{0, 0, 0, 0},
	};
	char err[HN_ERR_MAX];
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hV", lo, NULL)) != -1) {
		switch (c) {
		case O_DATA:
			o->data = optarg;
			break;
		case O_SPLIT:
			o->split = optarg;
			break;
		case O_TEST_SPLIT:
			o->test_split = optarg;
			o->given_test_split = 1;
			break;
		case O_LIMIT:
			o->limit = parse_u64("--limit", optarg, 1, UINT32_MAX);
			break;
		case O_TEST_LIMIT:
			o->test_limit = parse_u64("--test-limit", optarg, 1, UINT32_MAX);
			break;
		case O_PRELOAD:
			o->preload = 1;
			break;
		case O_STRICT:
			o->strict = 1;
			break;
		case O_SKIP_BAD:
			o->skip_bad_sheets = 1;
			break;
		case O_TILE: {
			unsigned h = 0, w = 0, ch = 0;
			int n = sscanf(optarg, "%ux%ux%u", &h, &w, &ch);
			if (n < 2 || !h || !w || h > 4096 || w > 4096 ||
			    (n == 3 && (ch != 1 && ch != 3)))
				hn_die(2, "--tile: expected HxW or HxWxC (C 1 or 3), got \"%s\"",
				       optarg);
			o->tile_h = h;
			o->tile_w = w;
			o->tile_c = n == 3 ? ch : 0;
			o->given_tile = 1;
			break;
		}
		case O_FIT:
			if (sprite_fit_parse(optarg, &o->fit) < 0)
				hn_die(2, "--fit: expected crop, pad or stretch, got \"%s\"",
				       optarg);
			o->given_fit = 1;
			break;
		case O_WINDOW:
			o->window = !strcmp(optarg, "full")
					    ? 0
					    : (uint32_t)parse_u64("--window", optarg, 1, 1u << 30);
			o->given_window = 1;
			break;
		case O_AUGMENT:
			/* The spelling now; whether the crop fits the tile once the data is open.
			 */
			if (hn_augment_parse(optarg, &o->augment, err) < 0)
				hn_die(2, "--augment %s: %s", optarg, err);
			o->given_augment = 1;
			break;
		case O_NORMALIZE:
			if (hn_norm_parse(optarg, &o->norm) < 0)
				hn_die(2,
				       "--normalize %s: expected none, auto or MEAN:STD per channel "
				       "(at most 4, STD > 0), such as 0.286:0.353",
				       optarg);
			o->given_normalize = 1;
			break;
		case O_CACHE:
			if (sprite_parse_size(optarg, &o->cache) < 0)
				hn_die(2, "--cache: expected a size such as 512M, got \"%s\"",
				       optarg);
			o->given_cache = 1;
			break;
		case O_LOADERS:
			o->loaders = (int)parse_u64("--loaders", optarg, 1, 64);
			break;
		case O_QUEUE:
			o->queue = (int)parse_u64("--queue", optarg, 1, 1024);
			break;
		case O_MODEL:
			/* The spelling now; whether it fits the tiles once the data is open. */
			if (hn_model_check_spec(optarg, err) < 0)
				hn_die(2, "--model %s: %s", optarg, err);
			o->model = optarg;
			o->given_model = 1;
			break;
		case O_OPTIM:
			if (!strcmp(optarg, "sgd"))
				o->optim.kind = HN_OPT_SGD;
			else if (!strcmp(optarg, "momentum"))
				o->optim.kind = HN_OPT_MOMENTUM;
			else if (!strcmp(optarg, "adam"))
				o->optim.kind = HN_OPT_ADAM;
			else
				hn_die(2, "--optim: expected sgd, momentum or adam, got \"%s\"",
				       optarg);
			o->given_optim = 1;
			break;
		case O_LR:
			o->lr = parse_f("--lr", optarg, 1e-12, 1e3);
			o->given_lr = 1;
			break;
		case O_MOMENTUM:
			o->optim.momentum = (float)parse_f("--momentum", optarg, 0, 0.9999);
			break;
		case O_WD:
			o->optim.weight_decay = (float)parse_f("--wd", optarg, 0, 1);
			o->given_wd = 1;
			break;
		case O_SCHEDULE:
			if (!strcmp(optarg, "constant"))
				o->sched = HN_SCHED_CONSTANT;
			else if (!strcmp(optarg, "step"))
				o->sched = HN_SCHED_STEP;
			else if (!strcmp(optarg, "cosine"))
				o->sched = HN_SCHED_COSINE;
			else
				hn_die(2,
				       "--schedule: expected constant, step or cosine, got \"%s\"",
				       optarg);
			o->given_sched = 1;
			break;
		case O_STEP_EPOCHS:
			o->step_epochs = parse_u64("--step-epochs", optarg, 1, 1000000);
			o->given_step_epochs = 1;
			break;
		case O_GAMMA:
			o->gamma = parse_f("--gamma", optarg, 1e-6, 1);
			o->given_gamma = 1;
			break;
		case O_WARMUP:
			o->warmup = parse_u64("--warmup", optarg, 0, UINT32_MAX);
			o->given_warmup = 1;
			break;
		case O_BATCH:
			o->batch = (int)parse_u64("--batch", optarg, 1, 65536);
			o->given_batch = 1;
			break;
		case O_ACCUM:
			o->accum = (int)parse_u64("--accum", optarg, 1, 65536);
			o->given_accum = 1;
			break;
		case O_EPOCHS:
			o->epochs = parse_u64("--epochs", optarg, 1, 1000000);
			o->given_epochs = 1;
			break;
		case O_STOP_AFTER:
			o->stop_after = parse_u64("--stop-after", optarg, 1, 1000000);
			break;
		case O_SEED:
			o->seed = parse_u64("--seed", optarg, 0, UINT64_MAX);
			o->given_seed = 1;
			break;
		case O_DEVICE:
			if (strcmp(optarg, "cpu") && strcmp(optarg, "gpu"))
				hn_die(2, "--device: expected cpu or gpu, got \"%s\"", optarg);
			o->device = optarg;
			break;
		case O_THREADS:
			o->threads = (int)parse_u64_why("--threads", optarg, 1, HN_TEAM_MAX,
							"the CPU backend runs at most 64");
			break;
		case O_AFFINITY:
			o->affinity = optarg;
			break;
		case O_LOADER_AFFINITY:
			o->loader_affinity = optarg;
			break;
		case O_AMP:
			if (!optarg || !strcmp(optarg, "fp16"))
				o->amp = HN_AMP_FP16;
			else if (!strcmp(optarg, "bf16"))
				o->amp = HN_AMP_BF16;
			else
				hn_die(2, "--amp=%s: fp16 or bf16", optarg);
			break;
		case O_FAST:
			o->fast = 1;
			break;
		case O_PLAN:
			o->plan = 1;
			break;
		case O_CHECKPOINT:
			o->checkpoint = optarg;
			break;
		case O_RESUME:
			o->resume = optarg;
			break;
		case O_CKPT_EVERY: {
			size_t len = strlen(optarg);
			int minutes = len > 1 && optarg[len - 1] == 'm';
			char num[32];
			snprintf(num, sizeof num, "%.*s", (int)(len - (size_t)minutes), optarg);
			o->ckpt_every_steps = o->ckpt_every_s = 0;
			if (minutes)
				o->ckpt_every_s = 60 * parse_f("--checkpoint-every", num, 0.01, 1e6);
			else
				o->ckpt_every_steps =
					parse_u64("--checkpoint-every", num, 1, UINT32_MAX);
			break;
		}
		case O_LOG:
			o->log = optarg;
			break;
		case O_EXPORT:
			o->export_path = optarg;
			break;
		case O_QUIET:
			o->quiet = 1;
			break;
		case 'h':
		case O_HELP:
			usage(stdout);
			exit(0);
		case 'V':
		case O_VERSION:
			print_version();
			exit(0);
		case O_GEMM_PEAK:
			gemm_peak = 1;
			break;
		case O_EMULATE:
			if (hn_emulate_parse(optarg, &o->emulate, err) < 0)
				hn_die(2, "--emulate %s: %s", optarg, err);
			break;
		case ':':
			hn_die(2, "option %s needs a value (see --help)", argv[optind - 1]);
		default:
			if (optopt && optopt < 256)
				hn_die(2, "unknown option -%c (see --help)", optopt);
			hn_die(2, "unknown or incomplete option \"%s\" (see --help)",
			       argv[optind - 1]);
		}
	}
	if (optind < argc)
		hn_die(2, "unexpected argument \"%s\" (see --help)", argv[optind]);
	if (gemm_peak) {
		double g = 0;
		int nt = hn_backend_cpu_threads(o->threads);
		if (hn_gemm_peak(nt, &g, err) < 0)
			hn_die(1, "%s", err);
		printf("sgemm peak: %.1f GFLOP/s (%d thread%s x 2048^3, %s)\n", g, nt,
		       nt == 1 ? "" : "s", hn_backend_cpu_library());
		exit(0);
	}
	if (!o->data)
		hn_die(2, "--data PATH is required (see --help)");
	if (!o->given_lr)
		o->lr = -1; /* the optimizer's default, once --resume has said which */
	if (o->amp && strcmp(o->device, "gpu"))
		hn_die(2, "--amp needs --device gpu");
	if (o->fast && strcmp(o->device, "gpu"))
		hn_die(2, "--fast needs --device gpu (the cpu backend has one algorithm)");
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
