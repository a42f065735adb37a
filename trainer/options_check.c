/*
 * options_check.c - hntrain's checks across options, after parsing and
 * before any data is read: options against the kind of --data (from its
 * name alone), outputs against the inputs they could overwrite, and a
 * --resume checkpoint against what the command line says, whose schedule
 * fills in what the command line leaves out. A usage error exits 2, a file
 * that cannot be used exits 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "trainer/augment.h"
#include "trainer/checkpoint.h"
#include "trainer/data.h"
#include "trainer/dist.h"
#include "trainer/options.h"

static const char *prog = HN_PROG;

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
static void check_source_options(const struct hn_opts *o, int kind)
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
		{o->given_fit,
		 "--fit",
		 "image folders",
		 HN_SOURCE_IMAGES,
		 {fixed_tiles, fixed_tiles, "its images have the size the IDX file says"}},
		{o->given_background,
		 "--background",
		 "image folders",
		 HN_SOURCE_IMAGES,
		 {"its tiles were made (spritefs-pack --background)",
		  "its tiles were made (-o background= of the mount)", "IDX images have no alpha"}},
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
		{o->skip_bad_sheets,
		 "--skip-bad-sheets",
		 "store files and spritefs mounts",
		 HN_SOURCE_STORE,
		 {NULL, NULL, "it has no sheets, and a bad file stops the run",
		  "it has no sheets; a file that does not decode is skipped already"}},
	};
	/* why[k] NULL: the option applies to kind k too */
	for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
		if (rules[i].given && kind != rules[i].kind && rules[i].why[kind])
			hn_die(2, "%s does not apply to %s (%s): %s; %s is for %s only",
			       rules[i].opt, kinds[kind], o->data, rules[i].why[kind], rules[i].opt,
			       rules[i].only);
}

/*
 * --checkpoint, --log and --export write files: refuse up front (a usage error, exit
 * 2) when one names the data, the checkpoint being resumed or the other
 * output, which it would replace (a checkpoint is renamed over its name) or
 * append JSON to. --checkpoint naming the --resume file is the normal way
 * to continue a run in place. A folder of data (image tree, IDX files, a
 * mount) takes no outputs either: a checkpoint in a class folder would be
 * read as an image next time.
 */
static void check_outputs(const struct hn_opts *o)
{
	struct stat st;
	int data_dir = stat(o->data, &st) == 0 && S_ISDIR(st.st_mode);
	const struct {
		const char *opt, *path, *harm;
	} out[] = {
		{"--checkpoint", o->checkpoint, "replace it with a checkpoint"},
		{"--log", o->log, "append JSON lines to it"},
		{"--export", o->export_path, "replace it with the weights"},
	};
	if (o->checkpoint && o->log && same_file(o->checkpoint, o->log))
		hn_die(2, "--checkpoint and --log both name %s: give them different files",
		       o->checkpoint);
	if (o->export_path && ((o->checkpoint && same_file(o->export_path, o->checkpoint)) ||
			       (o->log && same_file(o->export_path, o->log))))
		hn_die(2, "--export %s is also the --checkpoint or --log file: give another name",
		       o->export_path);
	for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
		const char *opt = out[i].opt, *path = out[i].path;
		if (!path)
			continue;
		if (!data_dir && same_file(path, o->data))
			hn_die(2,
			       "%s %s is the --data store: this would %s; give another file name",
			       opt, path, out[i].harm);
		if (data_dir && inside_folder(path, o->data))
			hn_die(2,
			       "%s %s is inside the --data folder %s: write it outside the data (a "
			       "file there could be read as data)",
			       opt, path, o->data);
		if (i > 0 && o->resume && same_file(path, o->resume))
			hn_die(2, "%s %s is the --resume checkpoint: this would %s", opt, path,
			       out[i].harm);
	}
}

static const char *const sched_names[] = {"constant", "step", "cosine"};

/*
 * The schedule a checkpoint was trained with is used for what the command
 * line leaves out, so that `--resume FILE` alone continues the run as
 * planned. What the command line gives wins, with a note, because the run
 * then no longer continues the one it resumes.
 */
static void resume_schedule(struct hn_opts *o, const struct hn_checkpoint *ck)
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
		o->sched = (enum hn_sched)ck->sched;
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
			o->sched != HN_SCHED_COSINE ? ""
			: o->epochs > ck->epochs    ? " (the cosine schedule is stretched)"
						    : " (the cosine schedule is shortened)");
}

/* A checkpoint decides model, optimizer, order and batch: a mismatch is an error. */
static void check_resume(struct hn_opts *o, struct hn_checkpoint *ck)
{
	char err[HN_ERR_MAX] = "";
	if (hn_checkpoint_load(o->resume, ck, err) < 0)
		hn_die(1, "--resume: %s", err);
	if (o->given_model && strcmp(o->model, ck->spec))
		hn_die(1, "--resume: the checkpoint trains model \"%s\", not \"%s\"", ck->spec,
		       o->model);
	if (o->given_optim && o->optim.kind != ck->optim.kind)
		hn_die(1, "--resume: the checkpoint uses another --optim");
	if (o->given_seed && o->seed != ck->seed)
		hn_die(1, "--resume: the checkpoint was trained with --seed %" PRIu64, ck->seed);
	/*
	 * What a checkpoint keeps is the global batch (ranks x --batch): any
	 * number of ranks that divides it continues the same sequence of steps.
	 */
	uint64_t gb = (uint64_t)ck->batch * ck->nranks, N = (uint64_t)hn_dist()->size;
	if (gb % N)
		hn_die(1,
		       "--resume: the checkpoint was trained with a global batch of %" PRIu64
		       " (%u rank%s x --batch %u), which %" PRIu64
		       " ranks cannot share evenly; resume with a number of ranks that divides it",
		       gb, ck->nranks, ck->nranks == 1 ? "" : "s", ck->batch, N);
	if ((o->given_batch && (uint64_t)o->batch != gb / N) ||
	    (o->given_accum && (uint32_t)o->accum != ck->accum) ||
	    (o->given_window && o->window != ck->window))
		hn_die(1,
		       "--resume: the checkpoint uses --batch %u on %u rank%s (global batch %" PRIu64
		       ") --accum %u --window %u",
		       ck->batch, ck->nranks, ck->nranks == 1 ? "" : "s", gb, ck->accum,
		       ck->window);
	if (ck->nranks != N && !o->quiet && hn_dist()->rank == 0)
		printf("resuming a checkpoint of %u rank%s x --batch %u on %" PRIu64
		       " rank%s x --batch %" PRIu64 ": the global batch of %" PRIu64 " is kept\n",
		       ck->nranks, ck->nranks == 1 ? "" : "s", ck->batch, N, N == 1 ? "" : "s",
		       gb / N, gb);
	o->model = ck->spec;
	o->optim = ck->optim;
	o->seed = ck->seed;
	o->batch = (int)(gb / N);
	o->accum = (int)ck->accum;
	o->window = ck->window;
	o->given_window = 1; /* the run's order, whatever the data set's says now */
	if (!o->given_test_split && ck->test_split[0]) /* evaluated on as before */
		o->test_split = ck->test_split;
	/* The augmentation is part of the run's draws: a resume keeps it exactly. */
	if (o->given_augment && strcmp(o->augment.spec, ck->augment))
		hn_die(1, "--resume: the checkpoint was trained with --augment %s, not %s",
		       ck->augment[0] ? ck->augment : "(none)", o->augment.spec);
	if (!o->given_augment && ck->augment[0] &&
	    hn_augment_parse(ck->augment, &o->augment, err) < 0)
		hn_die(1, "--resume %s: bad augmentation \"%s\": %s", o->resume, ck->augment, err);
	/* So is the input normalisation: the weights were trained on those inputs. */
	struct hn_norm was = {.mode = HN_NORM_NONE};
	for (int k = 0; k < HN_NORM_CH; k++)
		if (ck->norm_std[k] > 0) {
			was.mode = HN_NORM_GIVEN;
			was.nch = k + 1;
			was.mean[k] = ck->norm_mean[k];
			was.std[k] = ck->norm_std[k];
		}
	if (o->given_normalize && (o->norm.mode != was.mode || o->norm.nch != was.nch ||
				   memcmp(o->norm.mean, was.mean, sizeof was.mean) ||
				   memcmp(o->norm.std, was.std, sizeof was.std)))
		hn_die(1,
		       "--resume: the checkpoint fixes the input normalisation (%s); leave "
		       "--normalize out",
		       was.mode == HN_NORM_NONE ? "none" : "its own mean and std");
	o->norm = was;
	resume_schedule(o, ck);
}

void hn_opts_check(struct hn_opts *o, struct hn_checkpoint *ck)
{
	char err[HN_ERR_MAX] = "";
	/* What --data is decides which options apply: found from names, nothing read yet. */
	int kind = hn_source_kind(o->data, err);
	if (kind < 0)
		hn_die(1, "--data: %s", err);
	if (kind == HN_SOURCE_IN_MOUNT)
		hn_die(2, "--data: %s", err);
	check_source_options(o, kind);
	check_outputs(o);

	if ((o->ckpt_every_steps || o->ckpt_every_s > 0) && !o->checkpoint)
		hn_die(2, "--checkpoint-every needs --checkpoint FILE (where to write them)");
	if (o->resume)
		check_resume(o, ck);
	if (o->checkpoint && hn_checkpoint_check_dest(o->checkpoint, err) < 0)
		hn_die(1, "--checkpoint %s: %s", o->checkpoint, err);
	if (o->checkpoint && hn_checkpoint_check_replace(o->checkpoint, err) < 0)
		hn_die(2, "--checkpoint: %s", err);
	if (o->export_path && hn_checkpoint_check_dest(o->export_path, err) < 0)
		hn_die(1, "--export %s: %s", o->export_path, err);
	if (o->log && !log_appendable(o->log))
		hn_die(2,
		       "--log %s: a file that is not a JSON-lines log (its first byte is not '{'); "
		       "appending would mix the two: give another file name, or remove it first",
		       o->log);
	if (o->stop_after && o->stop_after > o->epochs)
		hn_die(2, "--stop-after %" PRIu64 " is beyond --epochs %" PRIu64, o->stop_after,
		       o->epochs);
	/* A run cannot end before the epochs the checkpoint has trained; at them, it evaluates. */
	if (o->resume && o->epochs < ck->epoch)
		hn_die(2,
		       "--epochs %" PRIu64 " is fewer than the %" PRIu64 " epochs %s has trained "
		       "(give %" PRIu64 " or more, or leave --epochs out)",
		       o->epochs, ck->epoch, o->resume, ck->epoch);
	/* A checkpoint inside epoch E+1 has trained part of it: the run goes on to its end. */
	if (o->resume && ck->batch_in_epoch && o->epochs <= ck->epoch)
		hn_die(2,
		       "--epochs %" PRIu64 ": %s stopped inside epoch %" PRIu64 " (give %" PRIu64
		       " or more, or leave --epochs out)",
		       o->epochs, o->resume, ck->epoch + 1, ck->epoch + 1);
	if (o->resume && ck->batch_in_epoch && o->stop_after && o->stop_after <= ck->epoch)
		hn_die(2,
		       "--stop-after %" PRIu64 ": %s stopped inside epoch %" PRIu64
		       " (give %" PRIu64 " or more, or leave --stop-after out)",
		       o->stop_after, o->resume, ck->epoch + 1, ck->epoch + 1);
	if (o->resume && o->stop_after && o->stop_after < ck->epoch)
		hn_die(2,
		       "--stop-after %" PRIu64 ": %s has already trained %" PRIu64 " of %" PRIu64
		       " epochs (give %" PRIu64 " or more, or leave --stop-after out)",
		       o->stop_after, o->resume, ck->epoch, o->epochs, ck->epoch);

	/* Defaults that train the cnn past 91% on Fashion-MNIST in 15 epochs (docs/HNTRAIN.md). */
	if (o->lr < 0)
		o->lr = o->optim.kind == HN_OPT_ADAM ? 0.001 : 0.05;
	if (!o->resume && !o->given_wd &&
	    o->optim.kind != HN_OPT_ADAM) /* a checkpoint keeps its own */
		o->optim.weight_decay = 5e-4f;
}
