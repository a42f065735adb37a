/*
 * hntrain.c - the training client: options, the training loop, and the
 * output a person or a benchmark reads.
 *
 * The compute thread (this one) takes ready batches from the loader queue
 * and hands them to a backend; the time it spends blocked on the queue is
 * data wait, the time inside the backend calls is compute, and the two are
 * reported apart per epoch, which is the point of the program. Everything
 * that decides the numbers (sample order, initial weights, dropout) derives
 * from --seed, so the same run over a store, an image folder, an IDX folder
 * or a spritefs mount ends with the same weights on CPU; the "weights xxh3"
 * line proves it. Only this file prints and exits.
 */
#include <dirent.h>
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
#include "common/util.h"
#include "trainer/app.h"
#include "trainer/backend.h"
#include "trainer/data.h"
#include "trainer/model.h"
#include "trainer/team.h"

#define HN_LOSS_DIVERGED 1e4 /* mean loss per sample; ln(classes) is where training starts */

enum sched_kind { SCHED_CONSTANT, SCHED_STEP, SCHED_COSINE };

struct opts {
	const char *data, *split, *test_split;
	uint64_t limit, test_limit;
	int preload;
	int strict;
	uint32_t tile_h, tile_w, tile_c;
	uint32_t window;
	uint64_t cache;
	const char *model;
	struct hn_optim optim;
	double lr;
	enum sched_kind sched;
	uint64_t step_epochs;
	double gamma;
	uint64_t warmup;
	int batch, accum;
	uint64_t epochs, stop_after;
	uint64_t seed;
	int threads, loaders, queue;
	const char *affinity, *loader_affinity;
	const char *device;
	int amp, plan, quiet;
	const char *checkpoint, *resume, *log;
	/* given explicitly on the command line (checked against --resume) */
	int given_model, given_optim, given_seed, given_batch, given_accum, given_window, given_wd;
	/* given explicitly: these override what a --resume checkpoint says */
	int given_lr, given_sched, given_gamma, given_step_epochs, given_warmup, given_epochs;
	/* given explicitly: each applies to one kind of source only */
	int given_tile, given_cache;
};

static const char *prog = "hntrain";

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
		"  --test-split NAME    evaluation split, or none (test)\n"
		"  --limit N            train on the first N samples only\n"
		"  --test-limit N       evaluate on the first N test samples only\n"
		"  --preload            read the whole data set into RAM first (zero-I/O "
		"baseline)\n"
		"  --strict             image folders: stop at a file that does not decode, or\n"
		"                       an entry that is neither a file nor a folder (default:\n"
		"                       report it and train without it)\n"
		"  --tile HxW[xC]       image folders: fit images to this tile (default: first "
		"image)\n"
		"  --window N           windowed order: shuffle N sheets at a time (larger than "
		"RAM)\n"
		"  --cache SIZE         store files: sheet cache budget (default: no limit)\n"
		"  --loaders N          loader threads (2)\n"
		"  --queue N            batches read ahead (8)\n"
		"model and training:\n"
		"  --model M            mlp, cnn, lenet5, or a spec such as c32k3-r-m2-d128-r "
		"(cnn)\n"
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
		"  --amp                gpu: mixed precision\n"
		"output:\n"
		"  --plan               print the memory the run needs and exit\n"
		"  --checkpoint FILE    write a checkpoint after each epoch (atomically; its "
		"folder\n"
		"                       is checked first); FILE must be new, empty or a\n"
		"                       checkpoint, and not in the data\n"
		"  --resume FILE        continue a run from a checkpoint (its lr, schedule and\n"
		"                       epochs too, unless given here); one with all the run's\n"
		"                       epochs is evaluated on the test split\n"
		"  --log FILE           JSON lines: one per epoch, then a final one\n"
		"                       (not in the data, nor the --checkpoint or --resume "
		"file)\n"
		"  --quiet              print only the final \"weights xxh3\" line and errors\n"
		"  -V, --version        the version, store format and backends, and exit\n"
		"  --help               this text\n"
		"\n"
		"docs/HNTRAIN.md describes the sources, the log fields and the checkpoint "
		"format.\n");
}

/* Cheap: the plugin is looked for, not loaded, so no CUDA library or GPU is touched. */
static void print_version(void)
{
	char plugin[PATH_MAX];
	printf("hntrain %s (store format %u)\n", HNTRAIN_VERSION, SPRITE_VERSION);
	printf("cpu: %s\n", hn_backend_cpu_library());
	if (hn_cuda_plugin_find(plugin, sizeof plugin) == 0)
		printf("gpu: CUDA plugin %s (--device gpu loads it and looks for a GPU)\n", plugin);
	else
		printf("gpu: not built (no %s next to hntrain, in %s, or in "
		       "$HNTRAIN_CUDA_PLUGIN)\n",
		       HN_CUDA_PLUGIN_NAME, HN_PLUGIN_DIR);
}

/* An image file that does not decode: named once, on its own line even under a progress bar. */
static void report_skip(void *ctx, const char *why)
{
	(void)ctx;
	fprintf(stderr, "%s%s: skipped %s\n", isatty(STDERR_FILENO) ? "\r\033[K" : "", prog, why);
}

/*
 * An entry of an image folder that is not an image of a class folder (a file
 * beside the class folders, a dangling link, a FIFO, a link loop): named once
 * when the folder is listed, the path escaped as spritefs-pack shows it.
 */
static void report_ignore(void *ctx, const char *path, const char *why)
{
	char shown[4 * PATH_MAX + 4];
	(void)ctx;
	fprintf(stderr, "%s: ignored %s: %s\n", prog, sprite_escape(path, shown, sizeof shown),
		why);
}

/* How the data is read after all (epoch views a mount cannot serve): said once, unless --quiet. */
static void report_note(void *ctx, const char *note)
{
	(void)ctx;
	fprintf(stderr, "%s%s: note: %s\n", isatty(STDERR_FILENO) ? "\r\033[K" : "", prog, note);
}

static void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(int code, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

/* An integer in [min, max], or exit 2 naming opt (and why, if given, after the range). */
static uint64_t parse_u64_why(const char *opt, const char *s, uint64_t min, uint64_t max,
			      const char *why)
{
	char *end;
	errno = 0;
	unsigned long long v = s && *s && *s != '-' ? strtoull(s, &end, 10) : 0;
	if (!s || !*s || *s == '-' || errno || *end || v < min || v > max)
		die(2, "%s: expected an integer in [%" PRIu64 ", %" PRIu64 "]%s%s%s, got \"%s\"",
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
		die(2, "%s: expected a number in [%g, %g], got \"%s\"", opt, min, max, s);
	return v;
}

/* "0-3,6" into a CPU set; -EINVAL on a malformed list. */
static int parse_cpus(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	const char *p = s;
	while (*p) {
		char *e;
		errno = 0;
		long a = strtol(p, &e, 10), b;
		if (e == p || errno || a < 0 || a >= CPU_SETSIZE)
			return -EINVAL;
		b = a;
		p = e;
		if (*p == '-') {
			p++;
			b = strtol(p, &e, 10);
			if (e == p || b < a || b >= CPU_SETSIZE)
				return -EINVAL;
			p = e;
		}
		for (long i = a; i <= b; i++)
			CPU_SET((int)i, set);
		if (*p == ',')
			p++;
		else if (*p)
			return -EINVAL;
	}
	return CPU_COUNT(set) ? 0 : -EINVAL;
}

/* A CPU set as a list: "0-3,6". */
static void format_cpus(const cpu_set_t *set, char *buf, size_t cap)
{
	size_t n = 0;
	buf[0] = 0;
	for (int i = 0; i < CPU_SETSIZE && n < cap; i++) {
		if (!CPU_ISSET(i, set) || (i > 0 && CPU_ISSET(i - 1, set)))
			continue;
		int j = i;
		while (j + 1 < CPU_SETSIZE && CPU_ISSET(j + 1, set))
			j++;
		n += (size_t)snprintf(buf + n, cap - n, j > i ? "%s%d-%d" : "%s%d", n ? "," : "", i,
				      j);
	}
}

/*
 * Parse an --affinity style list and check that each CPU in it is one this
 * process may run on (sched_setaffinity would refuse a set with none of
 * them, and quietly drop the others): a usage error, exit 2.
 */
static void parse_cpus_opt(const char *opt, const char *s, const cpu_set_t *allowed, cpu_set_t *set)
{
	if (parse_cpus(s, set) < 0)
		die(2, "%s: expected a CPU list such as 0-1,3, got \"%s\"", opt, s);
	for (int i = 0; i < CPU_SETSIZE; i++) {
		if (!CPU_ISSET(i, set) || CPU_ISSET(i, allowed))
			continue;
		char list[256];
		format_cpus(allowed, list, sizeof list);
		long ncpu = sysconf(_SC_NPROCESSORS_CONF);
		die(2, "%s %s: %s CPU %d (this process may use %s)", opt, s,
		    ncpu > 0 && i >= ncpu ? "no such" : "not allowed:", i, list);
	}
}

/* Pin every thread that exists now (this one and the maths pool) to set. */
static int pin_all_threads(const cpu_set_t *set)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -errno;
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid > 0 && sched_setaffinity(tid, sizeof *set, set) < 0)
			rc = -errno;
	}
	closedir(d);
	return rc;
}

/*
 * The name of a file that may not exist yet, made canonical: realpath of
 * the file, or of its folder with the last name appended; the path as given
 * when not even the folder resolves.
 */
static void canonical_name(const char *path, char *out, size_t cap)
{
	char real[PATH_MAX], dir[PATH_MAX];
	if (realpath(path, real)) {
		snprintf(out, cap, "%s", real);
		return;
	}
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	const char *base = slash ? slash + 1 : path;
	if (slash == dir)
		snprintf(dir, sizeof dir, "/");
	else if (slash)
		*slash = 0;
	else
		snprintf(dir, sizeof dir, ".");
	int n = realpath(dir, real)
			? snprintf(out, cap, "%s%s%s", real, strcmp(real, "/") ? "/" : "", base)
			: -1;
	if (n < 0 || (size_t)n >= cap)
		snprintf(out, cap, "%s", path);
}

/* Do a and b name one file: the same inode when both exist, else the same canonical name. */
static int same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
	if (ea || eb)
		return ea && eb && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	char ca[PATH_MAX + 256], cb[PATH_MAX + 256];
	canonical_name(a, ca, sizeof ca);
	canonical_name(b, cb, sizeof cb);
	return !strcmp(ca, cb);
}

/*
 * Whether --log may append to path: a new or empty file, one that starts as
 * a JSON-lines log does, or no regular file at all (/dev/stderr, a FIFO).
 */
static int log_appendable(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
		return 1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char c = 0;
	int ok = fd >= 0 && pread(fd, &c, 1, 0) == 1 && c == '{';
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Is path (existing or not) below the folder dir? */
static int inside_folder(const char *path, const char *dir)
{
	char cp[PATH_MAX + 256], cd[PATH_MAX];
	if (!realpath(dir, cd))
		return 0;
	canonical_name(path, cp, sizeof cp);
	size_t n = strlen(cd);
	return !strcmp(cd, "/") || (!strncmp(cp, cd, n) && cp[n] == '/');
}

/*
 * An option that only one kind of source reads is refused for the others
 * (exit 2), as spritefs-pack refuses the options of another mode: --tile
 * given with a store would look as if it had shaped the tiles.
 */
static void check_source_options(const struct opts *o, int kind)
{
	static const char *const kinds[] = {
		[HN_SOURCE_STORE] = "a store file",
		[HN_SOURCE_MOUNT] = "a spritefs mount",
		[HN_SOURCE_IDX] = "an IDX folder",
		[HN_SOURCE_IMAGES] = "an image folder",
	};
	static const char *const fixed_tiles =
		"its samples have the tile shape they were stored with";
	const struct {
		int given;
		const char *opt, *only;
		int kind;
		const char *why[HN_SOURCE_IMAGES + 1];
	} rules[] = {
		{o->given_tile,
		 "--tile",
		 "image folders",
		 HN_SOURCE_IMAGES,
		 {fixed_tiles, fixed_tiles, "its images have the size the IDX file says"}},
		{o->strict,
		 "--strict",
		 "image folders",
		 HN_SOURCE_IMAGES,
		 {"a sheet that does not verify stops the run anyway",
		  "a sheet the mount cannot verify stops the run anyway",
		  "it is loaded whole, and a bad file stops the run anyway"}},
		{o->given_cache,
		 "--cache",
		 "store files",
		 HN_SOURCE_STORE,
		 {NULL, "the mount caches sheets itself (mount it with -o cache=SIZE)",
		  "it is loaded whole", "image files are decoded as they are read, not cached"}},
	};
	for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
		if (rules[i].given && kind != rules[i].kind)
			die(2, "%s does not apply to %s (%s): %s; %s is for %s only", rules[i].opt,
			    kinds[kind], o->data, rules[i].why[kind], rules[i].opt, rules[i].only);
}

/*
 * --checkpoint and --log write files: refuse up front (a usage error, exit
 * 2) when one names the data, the checkpoint being resumed or the other
 * output, which it would replace (a checkpoint is renamed over its name) or
 * append JSON to. --checkpoint naming the --resume file is the normal way
 * to continue a run in place. A folder of data (image tree, IDX files, a
 * mount) takes no outputs either: a checkpoint in a class folder would be
 * read as an image next time.
 */
static void check_outputs(const struct opts *o)
{
	struct stat st;
	int data_dir = stat(o->data, &st) == 0 && S_ISDIR(st.st_mode);
	const struct {
		const char *opt, *path, *harm;
	} out[] = {
		{"--checkpoint", o->checkpoint, "replace it with a checkpoint"},
		{"--log", o->log, "append JSON lines to it"},
	};
	if (o->checkpoint && o->log && same_file(o->checkpoint, o->log))
		die(2, "--checkpoint and --log both name %s: give them different files",
		    o->checkpoint);
	for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
		const char *opt = out[i].opt, *path = out[i].path;
		if (!path)
			continue;
		if (!data_dir && same_file(path, o->data))
			die(2, "%s %s is the --data store: this would %s; give another file name",
			    opt, path, out[i].harm);
		if (data_dir && inside_folder(path, o->data))
			die(2,
			    "%s %s is inside the --data folder %s: write it outside the data (a "
			    "file there could be read as data)",
			    opt, path, o->data);
		if (i > 0 && o->resume && same_file(path, o->resume))
			die(2, "%s %s is the --resume checkpoint: this would %s", opt, path,
			    out[i].harm);
	}
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	enum {
		O_DATA = 256,
		O_SPLIT,
		O_TEST_SPLIT,
		O_LIMIT,
		O_TEST_LIMIT,
		O_PRELOAD,
		O_TILE,
		O_WINDOW,
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
		O_PLAN,
		O_CHECKPOINT,
		O_RESUME,
		O_LOG,
		O_STRICT,
		O_QUIET,
		O_HELP,
		O_VERSION,
	};
	static const struct option lo[] = {
		{"data", required_argument, 0, O_DATA},
		{"split", required_argument, 0, O_SPLIT},
		{"test-split", required_argument, 0, O_TEST_SPLIT},
		{"limit", required_argument, 0, O_LIMIT},
		{"test-limit", required_argument, 0, O_TEST_LIMIT},
		{"preload", no_argument, 0, O_PRELOAD},
		{"tile", required_argument, 0, O_TILE},
		{"window", required_argument, 0, O_WINDOW},
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
		{"amp", no_argument, 0, O_AMP},
		{"plan", no_argument, 0, O_PLAN},
		{"checkpoint", required_argument, 0, O_CHECKPOINT},
		{"resume", required_argument, 0, O_RESUME},
		{"log", required_argument, 0, O_LOG},
		{"strict", no_argument, 0, O_STRICT},
		{"quiet", no_argument, 0, O_QUIET},
		{"help", no_argument, 0, O_HELP},
		{"version", no_argument, 0, O_VERSION},
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
		case O_TILE: {
			unsigned h = 0, w = 0, ch = 0;
			int n = sscanf(optarg, "%ux%ux%u", &h, &w, &ch);
			if (n < 2 || !h || !w || h > 4096 || w > 4096 ||
			    (n == 3 && (ch != 1 && ch != 3)))
				die(2, "--tile: expected HxW or HxWxC (C 1 or 3), got \"%s\"",
				    optarg);
			o->tile_h = h;
			o->tile_w = w;
			o->tile_c = n == 3 ? ch : 0;
			o->given_tile = 1;
			break;
		}
		case O_WINDOW:
			o->window = (uint32_t)parse_u64("--window", optarg, 1, 1u << 30);
			o->given_window = 1;
			break;
		case O_CACHE:
			if (sprite_parse_size(optarg, &o->cache) < 0)
				die(2, "--cache: expected a size such as 512M, got \"%s\"", optarg);
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
				die(2, "--model %s: %s", optarg, err);
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
				die(2, "--optim: expected sgd, momentum or adam, got \"%s\"",
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
				o->sched = SCHED_CONSTANT;
			else if (!strcmp(optarg, "step"))
				o->sched = SCHED_STEP;
			else if (!strcmp(optarg, "cosine"))
				o->sched = SCHED_COSINE;
			else
				die(2, "--schedule: expected constant, step or cosine, got \"%s\"",
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
				die(2, "--device: expected cpu or gpu, got \"%s\"", optarg);
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
			o->amp = 1;
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
		case O_LOG:
			o->log = optarg;
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
		case ':':
			die(2, "option %s needs a value (see --help)", argv[optind - 1]);
		default:
			if (optopt && optopt < 256)
				die(2, "unknown option -%c (see --help)", optopt);
			die(2, "unknown or incomplete option \"%s\" (see --help)",
			    argv[optind - 1]);
		}
	}
	if (optind < argc)
		die(2, "unexpected argument \"%s\" (see --help)", argv[optind]);
	if (!o->data)
		die(2, "--data PATH is required (see --help)");
	if (!o->given_lr)
		o->lr = -1; /* the optimizer's default, once --resume has said which */
	if (o->amp && strcmp(o->device, "gpu"))
		die(2, "--amp needs --device gpu");
}

/* Learning rate of optimizer step s (0-based) of total. */
static double lr_at(const struct opts *o, uint64_t s, uint64_t steps_per_epoch, uint64_t total)
{
	double lr = o->lr;
	if (o->warmup && s < o->warmup)
		return lr * (double)(s + 1) / (double)o->warmup;
	switch (o->sched) {
	case SCHED_CONSTANT:
		break;
	case SCHED_STEP:
		lr *= pow(o->gamma, (double)((s / steps_per_epoch) / o->step_epochs));
		break;
	case SCHED_COSINE: {
		double span = total > o->warmup ? (double)(total - o->warmup) : 1;
		double t = (double)(s - o->warmup) / span;
		lr *= 0.5 * (1 + cos(M_PI * (t > 1 ? 1 : t)));
		break;
	}
	}
	return lr;
}

static const char *const sched_names[] = {"constant", "step", "cosine"};

/*
 * The schedule a checkpoint was trained with is used for what the command
 * line leaves out, so that `--resume FILE` alone continues the run as
 * planned. What the command line gives wins, with a note, because the run
 * then no longer continues the one it resumes.
 */
static void resume_schedule(struct opts *o, const struct hn_checkpoint *ck)
{
	if (!ck->has_schedule) {
		fprintf(stderr,
			"%s: note: %s is a version-1 checkpoint without its schedule; --lr, "
			"--schedule, --gamma, --step-epochs, --warmup and --epochs come from the "
			"command line\n",
			prog, o->resume);
		return;
	}
	const char *why = "differs from the checkpoint's";
	if (!o->given_lr)
		o->lr = ck->lr;
	else if (o->lr != ck->lr)
		fprintf(stderr, "%s: note: --lr %g %s %g\n", prog, o->lr, why, ck->lr);
	if (!o->given_sched)
		o->sched = (enum sched_kind)ck->sched;
	else if ((uint32_t)o->sched != ck->sched)
		fprintf(stderr, "%s: note: --schedule %s %s %s\n", prog, sched_names[o->sched], why,
			sched_names[ck->sched]);
	if (!o->given_gamma)
		o->gamma = ck->gamma;
	else if (o->gamma != ck->gamma)
		fprintf(stderr, "%s: note: --gamma %g %s %g\n", prog, o->gamma, why, ck->gamma);
	if (!o->given_step_epochs)
		o->step_epochs = ck->step_epochs;
	else if (o->step_epochs != ck->step_epochs)
		fprintf(stderr, "%s: note: --step-epochs %" PRIu64 " %s %" PRIu64 "\n", prog,
			o->step_epochs, why, ck->step_epochs);
	if (!o->given_warmup)
		o->warmup = ck->warmup;
	else if (o->warmup != ck->warmup)
		fprintf(stderr, "%s: note: --warmup %" PRIu64 " %s %" PRIu64 "\n", prog, o->warmup,
			why, ck->warmup);
	if (!o->given_epochs)
		o->epochs = ck->epochs;
	else if (o->epochs != ck->epochs && o->epochs >= ck->epoch) /* fewer: refused after */
		fprintf(stderr, "%s: note: --epochs %" PRIu64 " %s %" PRIu64 "%s\n", prog,
			o->epochs, why, ck->epochs,
			o->sched != SCHED_COSINE ? ""
			: o->epochs > ck->epochs ? " (the cosine schedule is stretched)"
						 : " (the cosine schedule is shortened)");
}

struct eval_result {
	double loss;
	uint64_t correct, seen;
	double secs;
};

/* One pass over the test split: the loader's next nb batches. */
static void evaluate(hn_loader *ld, const struct hn_backend_ops *be, void *st, uint64_t nb,
		     struct eval_result *r)
{
	char err[HN_ERR_MAX];
	double t0 = sprite_now();
	memset(r, 0, sizeof *r);
	for (uint64_t b = 0; b < nb; b++) {
		struct hn_batch *bt;
		if (hn_loader_next(ld, &bt, err) < 0) {
			hn_loader_stop(ld);
			die(1, "reading the test data: %s", err);
		}
		struct hn_step_result res = {0};
		int rc = bt->n ? be->evaluate(st, bt->tiles, bt->labels, bt->n, &res) : 0;
		if (rc < 0) {
			hn_loader_stop(ld);
			die(1, "evaluation failed: %s", strerror(-rc));
		}
		r->loss += res.loss_sum;
		r->correct += (uint64_t)res.correct;
		r->seen += (uint64_t)bt->n;
		hn_loader_release(ld, bt);
	}
	r->secs = sprite_now() - t0;
}

static uint64_t weights_hash(const struct hn_backend_ops *be, void *st, float *params,
			     size_t nparams)
{
	if (be->get_params(st, params) < 0)
		die(1, "cannot read the weights back from the backend");
	return sprite_checksum(params, nparams * sizeof(float));
}

int main(int argc, char **argv)
{
	struct opts o = {
		.split = "train",
		.test_split = "test",
		.model = "cnn",
		.optim = {.kind = HN_OPT_MOMENTUM,
			  .momentum = 0.9f,
			  .beta1 = 0.9f,
			  .beta2 = 0.999f,
			  .eps = 1e-8f},
		.sched = SCHED_COSINE,
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
	char err[HN_ERR_MAX] = "";
	setvbuf(stdout, NULL, _IOLBF, 0);
	parse_opts(argc, argv, &o);
	/* CPU lists are checked against the CPUs this process may use, before any work. */
	cpu_set_t orig_mask, pin_mask, loader_mask;
	sched_getaffinity(0, sizeof orig_mask, &orig_mask);
	loader_mask = orig_mask;
	if (o.affinity)
		parse_cpus_opt("--affinity", o.affinity, &orig_mask, &pin_mask);
	if (o.loader_affinity)
		parse_cpus_opt("--loader-affinity", o.loader_affinity, &orig_mask, &loader_mask);

	/* What --data is decides which options apply: found from names, nothing read yet. */
	int kind = hn_source_kind(o.data, err);
	if (kind < 0)
		die(1, "--data: %s", err);
	if (kind == HN_SOURCE_IN_MOUNT)
		die(2, "--data: %s", err);
	check_source_options(&o, kind);
	check_outputs(&o);

	/* A checkpoint decides model, optimizer, order and batch: a mismatch is an error. */
	struct hn_checkpoint ck = {0};
	if (o.resume) {
		if (hn_checkpoint_load(o.resume, &ck, err) < 0)
			die(1, "--resume: %s", err);
		if (o.given_model && strcmp(o.model, ck.spec))
			die(1, "--resume: the checkpoint trains model \"%s\", not \"%s\"", ck.spec,
			    o.model);
		if (o.given_optim && o.optim.kind != ck.optim.kind)
			die(1, "--resume: the checkpoint uses another --optim");
		if (o.given_seed && o.seed != ck.seed)
			die(1, "--resume: the checkpoint was trained with --seed %" PRIu64,
			    ck.seed);
		if ((o.given_batch && (uint32_t)o.batch != ck.batch) ||
		    (o.given_accum && (uint32_t)o.accum != ck.accum) ||
		    (o.given_window && o.window != ck.window))
			die(1, "--resume: the checkpoint uses --batch %u --accum %u --window %u",
			    ck.batch, ck.accum, ck.window);
		o.model = ck.spec;
		o.optim = ck.optim;
		o.seed = ck.seed;
		o.batch = (int)ck.batch;
		o.accum = (int)ck.accum;
		o.window = ck.window;
		resume_schedule(&o, &ck);
	}
	if (o.checkpoint && hn_checkpoint_check_dest(o.checkpoint, err) < 0)
		die(1, "--checkpoint %s: %s", o.checkpoint, err);
	if (o.checkpoint && hn_checkpoint_check_replace(o.checkpoint, err) < 0)
		die(2, "--checkpoint: %s", err);
	if (o.log && !log_appendable(o.log))
		die(2,
		    "--log %s: a file that is not a JSON-lines log (its first byte is not '{'); "
		    "appending would mix the two: give another file name, or remove it first",
		    o.log);
	if (o.stop_after && o.stop_after > o.epochs)
		die(2, "--stop-after %" PRIu64 " is beyond --epochs %" PRIu64, o.stop_after,
		    o.epochs);
	/* A run cannot end before the epochs the checkpoint has trained; at them, it evaluates. */
	if (o.resume && o.epochs < ck.epoch)
		die(2,
		    "--epochs %" PRIu64 " is fewer than the %" PRIu64 " epochs %s has trained "
		    "(give %" PRIu64 " or more, or leave --epochs out)",
		    o.epochs, ck.epoch, o.resume, ck.epoch);
	if (o.resume && o.stop_after && o.stop_after < ck.epoch)
		die(2,
		    "--stop-after %" PRIu64 ": %s has already trained %" PRIu64 " of %" PRIu64
		    " epochs (give %" PRIu64 " or more, or leave --stop-after out)",
		    o.stop_after, o.resume, ck.epoch, o.epochs, ck.epoch);

	/* Defaults that train the cnn past 91% on Fashion-MNIST in 15 epochs (docs/HNTRAIN.md). */
	if (o.lr < 0)
		o.lr = o.optim.kind == HN_OPT_ADAM ? 0.001 : 0.05;
	if (!o.resume && !o.given_wd &&
	    o.optim.kind != HN_OPT_ADAM) /* a checkpoint keeps its own */
		o.optim.weight_decay = 5e-4f;

	struct hn_source_options so = {
		.train_split = o.split,
		.test_split = o.test_split,
		.limit = o.limit,
		.test_limit = o.test_limit,
		.tile_h = o.tile_h,
		.tile_w = o.tile_w,
		.tile_c = o.tile_c,
		.window = o.window,
		.seed = o.seed,
		.batch = (uint32_t)o.batch,
		.cache_bytes = o.cache,
		.strict = o.strict,
		.on_skip = report_skip,
		.on_ignore = report_ignore,
		.on_note = o.quiet ? NULL : report_note,
	};
	hn_source *src = NULL;
	if (hn_source_open(o.data, &so, &src, err) < 0)
		die(1, "--data: %s", err);
	const struct hn_source_info *di = hn_source_info(src);

	struct hn_model m;
	if (hn_model_build(o.model, (int)di->c, (int)di->h, (int)di->w, (int)di->nclasses, &m,
			   err) < 0)
		die(1, "--model %s with %ux%ux%u tiles and %u classes: %s", o.model, di->h, di->w,
		    di->c, di->nclasses, err);

	if (o.resume) {
		if (ck.in_c != m.in_c || ck.in_h != m.in_h || ck.in_w != m.in_w ||
		    ck.nclasses != m.nclasses || ck.nparams != m.nparams)
			die(1,
			    "--resume: the checkpoint's model (%dx%dx%d input, %d classes, %" PRIu64
			    " parameters) differs from this data's",
			    ck.in_h, ck.in_w, ck.in_c, ck.nclasses, ck.nparams);
		if (ck.train_count != di->count[HN_SPLIT_TRAIN])
			die(1,
			    "--resume: the checkpoint trained on %" PRIu64
			    " samples per epoch, this data has %" PRIu64 " (--limit?)",
			    ck.train_count, di->count[HN_SPLIT_TRAIN]);
	}

	if (o.plan) {
		struct hn_plan_input pi = {.model = &m,
					   .data = di,
					   .optim = &o.optim,
					   .batch = o.batch,
					   .device = o.device};
		hn_plan_print(stdout, &pi);
		hn_source_close(src);
		hn_checkpoint_free(&ck);
		return 0;
	}

	const struct hn_backend_ops *be = hn_backend_load(o.device, err);
	if (!be)
		die(1, "--device %s: %s", o.device, err);

	float *params = malloc(m.nparams * sizeof(float));
	if (!params)
		die(1, "out of memory for %zu parameters", m.nparams);
	if (o.resume)
		memcpy(params, ck.params, m.nparams * sizeof(float));
	else
		hn_model_init_params(&m, o.seed, params);

	/* Pinning this thread first makes threads the backend starts inherit it. */
	if (o.affinity && sched_setaffinity(0, sizeof pin_mask, &pin_mask) < 0)
		die(1, "--affinity %s: %s", o.affinity, strerror(errno));

	struct hn_backend_config cfg = {
		.threads = o.threads,
		.max_batch = o.batch,
		.amp = o.amp,
		.device_index = 0,
		.seed = o.seed,
	};
	void *st = NULL;
	err[0] = 0;
	if (be->create(&m, &o.optim, &cfg, params, &st, err) < 0)
		die(1, "--device %s: cannot set up the model: %s", o.device, err);
	if (o.resume && hn_optim_state_per_param(o.optim.kind) && be->set_opt_state(st, ck.opt) < 0)
		die(1, "--resume: the backend refused the optimizer state");
	/* And the maths threads that already existed (OpenBLAS starts its pool early). */
	if (o.affinity && pin_all_threads(&pin_mask) < 0)
		die(1, "--affinity %s: cannot pin the maths threads: %s", o.affinity,
		    strerror(errno));

	if (o.preload) {
		double t0 = sprite_now();
		if (hn_source_preload(src, o.loaders, err) < 0)
			die(1, "--preload: %s", err);
		if (!o.quiet)
			printf("preloaded %" PRIu64 " samples in %.2f s\n",
			       di->count[0] + di->count[1], sprite_now() - t0);
	}

	uint64_t ntrain = di->count[HN_SPLIT_TRAIN], ntest = di->count[HN_SPLIT_TEST];
	uint64_t nb_train = hn_batches(ntrain, o.batch), nb_test = hn_batches(ntest, o.batch);
	uint64_t steps_per_epoch = (nb_train + (uint64_t)o.accum - 1) / (uint64_t)o.accum;
	uint64_t total_steps = steps_per_epoch * o.epochs;
	uint64_t first_epoch = o.resume ? ck.epoch : 0;
	uint64_t end_epoch = o.stop_after ? o.stop_after : o.epochs;
	uint64_t step = o.resume ? ck.step : 0;
	if (o.resume && ck.step != first_epoch * steps_per_epoch)
		die(1,
		    "--resume: %" PRIu64 " steps after %" PRIu64 " epochs do not match --batch %d "
		    "--accum %d over %" PRIu64 " samples",
		    ck.step, ck.epoch, o.batch, o.accum, ntrain);

	FILE *logf = NULL;
	if (o.log && !(logf = fopen(o.log, "a")))
		die(1, "--log %s: %s", o.log, strerror(errno));

	if (!o.quiet) {
		printf("data: %s\n", hn_source_describe(src));
		printf("      %" PRIu64 " train + %" PRIu64
		       " test samples, tiles %ux%ux%u, %u classes\n",
		       ntrain, ntest, di->h, di->w, di->c, di->nclasses);
		printf("model: %s, %zu parameters; %s, lr %g, batch %d x accum %d, seed %" PRIu64
		       "\n",
		       m.name, m.nparams,
		       o.optim.kind == HN_OPT_ADAM	 ? "adam"
		       : o.optim.kind == HN_OPT_MOMENTUM ? "momentum"
							 : "sgd",
		       o.lr, o.batch, o.accum, o.seed);
		printf("backend: %s; %d loaders, queue %d\n", be->describe(st), o.loaders, o.queue);
		if (o.resume)
			printf("resumed from %s after epoch %" PRIu64 " (step %" PRIu64 ")\n",
			       o.resume, ck.epoch, ck.step);
	}

	double run_wall = 0, run_compute = 0, run_wait = 0, last_test_acc = -1;
	uint64_t run_samples = 0, first_step = step;
	struct hn_loader_config lc = {
		.src = src,
		.nloaders = o.loaders,
		.queue = o.queue,
		.batch = o.batch,
		.seed = o.seed,
		.window = o.window,
		.first_epoch = first_epoch,
		.end_epoch = end_epoch,
		.eval = ntest > 0,
		.mask = &loader_mask,
	};
	if (first_epoch < end_epoch) {
		hn_loader *ld = NULL;
		if (hn_loader_start(&lc, &ld, err) < 0)
			die(1, "%s", err);
		uint64_t micro = 0;
		int pending = 0; /* batches summed into the group's gradients, not applied yet */

		for (uint64_t e = first_epoch; e < end_epoch; e++) {
			struct sprite_progress prog_bar;
			char label[48];
			snprintf(label, sizeof label, "epoch %" PRIu64 "/%" PRIu64, e + 1,
				 o.epochs);
			if (!o.quiet)
				sprite_progress_start(&prog_bar, label, ntrain);
			double wait = 0, compute = 0, loss = 0, lr = 0;
			uint64_t correct = 0, seen = 0;
			double t_epoch = sprite_now();
			for (uint64_t b = 0; b < nb_train; b++) {
				struct hn_batch *bt;
				double t0 = sprite_now();
				if (hn_loader_next(ld, &bt, err) < 0) {
					hn_loader_stop(ld); /* join the loaders before exiting */
					die(1, "reading the data: %s", err);
				}
				double t1 = sprite_now();
				wait += t1 - t0;
				uint64_t g0 = b - b % (uint64_t)o.accum;
				uint64_t g_end = g0 + (uint64_t)o.accum;
				if (g_end > nb_train)
					g_end = nb_train;
				uint64_t s_end = g_end * (uint64_t)o.batch;
				/*
				 * Gradients are averaged over the group's samples: those the batch
				 * holds, or with --accum those planned (a batch short of image
				 * files that did not decode is then weighted a little less).
				 */
				int group = o.accum == 1 ? bt->n
							 : (int)((s_end < ntrain ? s_end : ntrain) -
								 g0 * (uint64_t)o.batch);
				int apply = b + 1 == g_end;
				lr = lr_at(&o, step, steps_per_epoch, total_steps);
				/* Non-applying calls get their own dropout stream, outside the step
				 * range. */
				uint64_t sidx = apply ? step + 1 : (1ull << 63) | micro;
				struct hn_step_result res = {0};
				int rc = 0;
				/*
				 * A batch whose every file failed to decode: nothing to learn from,
				 * but the step still counts (the schedule and --resume count
				 * steps), and gradients already summed in its group are applied.
				 */
				if (bt->n > 0 || (apply && pending))
					rc = be->train_step(st, bt->tiles, bt->labels, bt->n, group,
							    apply, (float)lr, sidx, &res);
				pending = apply ? 0 : pending + (bt->n > 0);
				double t2 = sprite_now();
				if (rc < 0)
					die(1,
					    "epoch %" PRIu64 ", batch %" PRIu64
					    ": the backend failed: %s",
					    e + 1, b, strerror(-rc));
				compute += res.compute_s > 0 ? res.compute_s : t2 - t1;
				/*
				 * A mean cross-entropy above HN_LOSS_DIVERGED means logits wrong
				 * by that much: the run has diverged even if the stable loss
				 * has not overflowed to NaN yet.
				 */
				double mean = res.loss_sum / (bt->n ? bt->n : 1);
				if (!isfinite(mean) || mean > HN_LOSS_DIVERGED)
					die(1,
					    "the loss became %s at epoch %" PRIu64 ", step %" PRIu64
					    " (batch %" PRIu64 "): training diverged; try a lower "
					    "--lr (now %g)",
					    isnan(mean)	  ? "NaN"
					    : isinf(mean) ? "infinite"
							  : "huge",
					    e + 1, step + 1, b, lr);
				loss += res.loss_sum;
				correct += (uint64_t)res.correct;
				seen += (uint64_t)bt->n;
				micro++;
				if (apply)
					step++;
				int n = bt->n;
				hn_loader_release(ld, bt); /* a loader may refill it now */
				if (!o.quiet) {
					sprite_progress_add(&prog_bar, (uint64_t)n);
					sprite_progress_draw(&prog_bar);
				}
			}
			double wall = sprite_now() - t_epoch;
			if (!o.quiet)
				sprite_progress_end(&prog_bar);

			struct eval_result ev;
			evaluate(ld, be, st, nb_test, &ev);
			uint64_t tseen = ev.seen;

			struct hn_epoch_stats es = {
				.epoch = e + 1,
				.samples = seen,
				.steps = step,
				.wall_s = wall,
				.compute_s = compute,
				.data_wait_s = wait,
				.eval_s = ev.secs,
				.train_loss = seen ? loss / (double)seen : 0,
				.train_acc = seen ? (double)correct / (double)seen : 0,
				.test_loss = tseen ? ev.loss / (double)tseen : -1,
				.test_acc = tseen ? (double)ev.correct / (double)tseen : -1,
				.lr = lr,
			};
			last_test_acc = es.test_acc;
			run_wall += wall;
			run_compute += compute;
			run_wait += wait;
			run_samples += seen;
			if (!o.quiet) {
				char testbuf[32] = "test -";
				if (tseen)
					snprintf(testbuf, sizeof testbuf, "test %.2f%%",
						 100 * es.test_acc);
				printf("epoch %" PRIu64 "/%" PRIu64
				       "  loss %.4f  train %.2f%%  %s  "
				       "%.0f samples/s  compute %.2f s  data wait %.3f s "
				       "(%.2f%%)\n",
				       e + 1, o.epochs, es.train_loss, 100 * es.train_acc, testbuf,
				       wall > 0 ? (double)seen / wall : 0, compute, wait,
				       wall > 0 ? 100 * wait / wall : 0);
			}
			if (logf && hn_log_epoch(logf, &es) < 0)
				die(1, "--log %s: write error", o.log);
			if (o.checkpoint) {
				struct hn_checkpoint c = {
					.in_c = m.in_c,
					.in_h = m.in_h,
					.in_w = m.in_w,
					.nclasses = m.nclasses,
					.nparams = m.nparams,
					.optim = o.optim,
					.epoch = e + 1,
					.step = step,
					.seed = o.seed,
					.batch = (uint32_t)o.batch,
					.accum = (uint32_t)o.accum,
					.window = o.window,
					.train_count = ntrain,
					.has_schedule = 1,
					.sched = (uint32_t)o.sched,
					.lr = o.lr,
					.gamma = o.gamma,
					.step_epochs = o.step_epochs,
					.warmup = o.warmup,
					.epochs = o.epochs,
					.params = params,
				};
				snprintf(c.spec, sizeof c.spec, "%s", o.model);
				size_t per = (size_t)hn_optim_state_per_param(o.optim.kind);
				c.opt = malloc((m.nparams * per + 1) * sizeof(float));
				if (!c.opt || be->get_params(st, params) < 0 ||
				    (per && be->get_opt_state(st, c.opt) < 0))
					die(1, "--checkpoint: cannot read the state back from the "
					       "backend");
				if (hn_checkpoint_save(o.checkpoint, &c, err) < 0)
					die(1, "--checkpoint: %s", err);
				free(c.opt);
			}
		}
		hn_loader_stop(ld);
	} else {
		/*
		 * The checkpoint has every epoch the run asks for (resume refuses
		 * fewer): evaluate it, the way to ask a checkpoint for its accuracy.
		 */
		if (!o.quiet) {
			char why[64] = "";
			if (end_epoch < o.epochs)
				snprintf(why, sizeof why, ", where --stop-after %" PRIu64 " stops",
					 end_epoch);
			printf("nothing to train: %s has %" PRIu64 " of %" PRIu64 " epochs%s; %s\n",
			       o.resume, first_epoch, o.epochs, why,
			       ntest ? "evaluating it on the test split"
				     : "no test split to evaluate it on");
		}
		if (ntest) {
			hn_loader *ld = NULL;
			lc.eval_only = 1;
			if (hn_loader_start(&lc, &ld, err) < 0)
				die(1, "%s", err);
			struct eval_result ev;
			evaluate(ld, be, st, nb_test, &ev);
			hn_loader_stop(ld);
			if (ev.seen)
				last_test_acc = (double)ev.correct / (double)ev.seen;
			if (!o.quiet && ev.seen)
				printf("epoch %" PRIu64 "/%" PRIu64
				       "  test %.2f%%  test loss %.4f  (%" PRIu64
				       " samples evaluated in %.2f s)\n",
				       first_epoch, o.epochs, 100 * last_test_acc,
				       ev.loss / (double)ev.seen, ev.seen, ev.secs);
		}
	}

	uint64_t skipped = hn_source_skipped(src);
	if (skipped && !o.quiet)
		printf("skipped %" PRIu64
		       " image file%s that did not decode (named above; --strict "
		       "stops at the first)\n",
		       skipped, skipped == 1 ? "" : "s");
	uint64_t ignored = hn_source_ignored(src);
	if (ignored && !o.quiet)
		printf("ignored %" PRIu64
		       " entr%s of the image folder, not images in class folders (named above; "
		       "--strict stops at one that is neither a file nor a folder)\n",
		       ignored, ignored == 1 ? "y" : "ies");
	uint64_t hash = weights_hash(be, st, params, m.nparams);
	printf("weights xxh3 %016" PRIx64 "\n", hash);
	if (logf) {
		struct hn_final_stats fs = {
			.epochs = end_epoch > first_epoch ? end_epoch - first_epoch : 0,
			.steps = step - first_step,
			.run_epochs = end_epoch > first_epoch ? end_epoch : first_epoch,
			.run_steps = step,
			.samples = run_samples,
			.weights_xxh3 = hash,
			.wall_s = run_wall,
			.compute_s = run_compute,
			.data_wait_s = run_wait,
			.test_acc = last_test_acc,
			.source = di->kind,
			.device = o.device,
			.model = o.model,
			.nparams = m.nparams,
			.skipped_files = hn_source_skipped(src),
			.ignored_entries = ignored,
		};
		if (hn_log_final(logf, &fs) < 0 || fclose(logf) != 0)
			die(1, "--log %s: write error", o.log);
	}
	be->destroy(st);
	free(params);
	hn_checkpoint_free(&ck);
	hn_source_close(src);
	return 0;
}
