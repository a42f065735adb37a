/*
 * main.c - spritefs: mount a sprite store as a read-only FUSE filesystem.
 *
 *   spritefs [-f] [-d] [-o OPTIONS] [SOURCE] MOUNTPOINT
 *
 * Startup is ordered so that every user mistake is reported on the terminal
 * and nothing is mounted for it: parse options, resolve SOURCE (a store; an
 * image folder, packed into a cache store; nothing: Fashion-MNIST), open and
 * validate the store, build the tree, create the session, mount, and only
 * then detach (fuse_daemonize) and start threads: fork() keeps only the
 * calling thread, so the io_uring thread and decode workers are started in
 * the process that will serve. Shutdown unwinds through staged labels in the
 * reverse order. SIGTERM/SIGINT/SIGHUP end the session loop (libfuse's
 * handlers) and the mount is taken down before exit, with status 0.
 */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <fuse_opt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "common/cachestore.h"
#include "common/image.h"
#include "common/pack.h"
#include "common/util.h"
#include "fs/options.h"
#include "fs/sfs.h"

/*
 * The newest mount at the absolute path real (/proc/self/mountinfo): 1 when
 * there is one. A stat() of a FUSE mount point could wait on a session loop
 * that is not running yet (ours, just mounted).
 */
static int mount_at(const char *real, struct sprite_mount *out)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return 0;
	struct sprite_mount m;
	int found = 0;
	while (sprite_mountinfo_next(f, &m))
		if (!strcmp(m.point, real)) { /* the last one is the newest */
			*out = m;
			found = 1;
		}
	fclose(f);
	return found;
}

/*
 * A mount point that is missing, not a folder, a FUSE mount whose daemon
 * died, or a live spritefs mount (a second would hide the first) fails here,
 * before a source folder is packed (minutes, the first time), and not later
 * inside libfuse. A dead mount would otherwise get a second mount stacked on
 * it. /dev/fd/N (a /dev/fuse descriptor from a parent, libfuse's convention)
 * is left to libfuse. The path is made absolute into abs: the daemon runs in
 * / (fuse_daemonize), and libfuse unmounts at exit by the path it mounted,
 * so a relative one would leave the mount behind.
 */
static int check_mountpoint(const char *mnt, char *abs)
{
	if (!strncmp(mnt, "/dev/fd/", 8)) {
		snprintf(abs, PATH_MAX, "%s", mnt);
		return 0;
	}
	struct stat st;
	struct statfs sf;
	struct sprite_mount m;
	char q[2 * PATH_MAX];
	int dead = 0;
	if (stat(mnt, &st) < 0) {
		dead = errno == ENOTCONN;
		if (!dead) {
			fprintf(stderr, "spritefs: mount point %s: %s\n", mnt, strerror(errno));
			return -1;
		}
	} else if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "spritefs: mount point %s: not a folder\n", mnt);
		return -1;
	} else if (!realpath(mnt, abs)) {
		fprintf(stderr, "spritefs: mount point %s: %s\n", mnt, strerror(errno));
		return -1;
	} else if (mount_at(abs, &m) && !strncmp(m.type, "fuse", 4)) {
		/* stat() may be answered from cached attributes; statfs asks the daemon */
		dead = statfs(abs, &sf) < 0 && errno == ENOTCONN;
		if (!dead && !strcmp(m.type, "fuse.spritefs")) {
			fprintf(stderr,
				"spritefs: mount point %s: already a spritefs mount; unmount it "
				"first (fusermount3 -u %s) or choose another folder\n",
				mnt, sprite_shell_quote(mnt, q, sizeof(q)));
			return -1;
		}
	}
	if (dead) {
		fprintf(stderr,
			"spritefs: mount point %s: a FUSE mount whose daemon has gone "
			"(transport endpoint is not connected); unmount it first: "
			"fusermount3 -u %s\n",
			mnt, sprite_shell_quote(mnt, q, sizeof(q)));
		return -1;
	}
	return 0;
}

/*
 * The kernel sizes buffered FUSE reads by the mount's readahead, 128 KiB by
 * default whatever max_readahead we negotiate; 1 MiB requests cost the
 * daemon an eighth of the round trips. Raise it through sysfs (root only;
 * elsewhere reads simply stay at 128 KiB).
 */
static void tune_readahead(const char *mnt)
{
	char real[PATH_MAX], path[128];
	struct sprite_mount m;
	if (!realpath(mnt, real) || !mount_at(real, &m))
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", m.dev);
	FILE *f = fopen(path, "we");
	if (!f)
		return;
	fprintf(f, "%u\n", SFS_MAX_READ / 1024);
	fclose(f);
}

/*
 * The budget against the sheets and the epoch views' working set: fewer than
 * two sheets cannot serve a batch that straddles two (refused, naming the
 * smallest budget that works); below a split's working set its views read
 * sheets more than once (said, naming the budget that would do). Where a
 * split is windowed, the working set is said in any case: for the ranks this
 * node serves (-o ranks), one reader each, and for 4 and 8 readers of
 * batch files at once (a loader's threads, ranks); the mount then says so
 * again if more readers come than the budget holds (stream.c).
 */
static int check_budget(struct sfs *fs)
{
	char a[32], b[32], w[32], m4[32], m8[32];
	uint32_t readers = fs->o.nranks ? fs->o.rank_hi - fs->o.rank_lo + 1 : 1;
	uint64_t block = (fs->max_raw + 4095) & ~4095ull;
	if (fs->o.cache_bytes < 2 * block) {
		fprintf(stderr,
			"spritefs: -o cache=%s holds fewer than 2 sheets of %s: the smallest budget "
			"that works is %s\n",
			sprite_fmt_size(fs->o.cache_bytes, a, sizeof(a)),
			sprite_fmt_size(fs->max_raw, b, sizeof(b)),
			sprite_fmt_size(2 * block, w, sizeof(w)));
		return -1;
	}
	const struct sfs_split *big = NULL;
	uint64_t ws = 0;
	int windowed = 0;
	for (uint32_t k = 0; k < fs->info->nsplits; k++) {
		uint64_t x = sfs_working_set(fs, &fs->splits[k], readers);
		windowed |= fs->splits[k].window != 0;
		if (!big || x > ws) {
			big = &fs->splits[k];
			ws = x;
		}
	}
	if (windowed || ws > fs->o.cache_bytes) {
		if (big->window)
			snprintf(b, sizeof(b), "%llu windows of %u sheets",
				 (unsigned long long)((ws / block - 2) / big->window), big->window);
		else
			snprintf(b, sizeof(b), "all %u sheets: full order", big->nsheets);
		fprintf(stderr,
			"spritefs: %sworking set of split %s: %s (%s) for %u reader%s of %u-sample "
			"batch files (4 readers: %s, 8: %s), cache %s%s\n",
			ws > fs->o.cache_bytes ? "warning: " : "", big->name,
			sprite_fmt_size(ws, w, sizeof(w)), b, readers, readers > 1 ? "s" : "",
			fs->o.batch, sprite_fmt_size(sfs_working_set(fs, big, 4), m4, sizeof(m4)),
			sprite_fmt_size(sfs_working_set(fs, big, 8), m8, sizeof(m8)),
			sprite_fmt_size(fs->o.cache_bytes, a, sizeof(a)),
			ws > fs->o.cache_bytes
				? ": its epoch views will read sheets more than once; give -o cache= "
				  "at least the working set"
				: "");
	}
	return 0;
}

/*
 * The epoch views' orders against -o orders=: a store whose largest split
 * needs more than the budget for one order is refused, naming the budget
 * that would do and the samples this one serves; otherwise the number kept
 * at once is said. No sample count a store declares can then make the
 * daemon allocate past the budget (epoch.c).
 */
static int check_orders(struct sfs *fs)
{
	char a[32], b[32], w[32];
	const struct sfs_split *big = &fs->splits[0];
	for (uint32_t k = 1; k < fs->info->nsplits; k++)
		if (fs->splits[k].count > big->count)
			big = &fs->splits[k];
	uint64_t one = sfs_order_bytes(fs, big);
	uint32_t slots = sfs_order_slots(fs);
	if (slots == 0) {
		/* 12 bytes a sample, and the per-batch and per-sheet parts scale with it */
		uint64_t fit = big->count ? (uint64_t)((double)big->count *
						       ((double)fs->o.orders_bytes / (double)one))
					  : 0;
		unsigned long long mib = (one + (1u << 20) - 1) >> 20;
		fprintf(stderr,
			"spritefs: %s: split %s declares %" PRIu64 " samples: one epoch order "
			"of it needs %s (12 bytes a sample), more than -o orders=%s; ",
			fs->store_path, big->name, big->count, sprite_fmt_size(one, a, sizeof(a)),
			sprite_fmt_size(fs->o.orders_bytes, b, sizeof(b)));
		if (one > sfs_ram_bytes())
			fprintf(stderr, "that is more than this machine's memory (%s)",
				sprite_fmt_size(sfs_ram_bytes(), w, sizeof(w)));
		else
			fprintf(stderr, "mount with -o orders=%lluM or more", mib);
		fprintf(stderr, " (this budget serves splits of up to about %" PRIu64 " samples)\n",
			fit);
		return -1;
	}
	fprintf(stderr,
		"spritefs: epoch orders: %u kept at once, %s each (split %s), in -o orders=%s\n",
		slots, sprite_fmt_size(one, a, sizeof(a)), big->name,
		sprite_fmt_size(fs->o.orders_bytes, b, sizeof(b)));
	return 0;
}

/*
 * -o allow_other lets every user of the machine in, so the mount answers as
 * its source does: the owner, group and read bits of the store file (of the
 * image folder, for a first-use pack), which the kernel enforces
 * (default_permissions, added here). A source the user who mounts could not
 * read is refused: access() asks for the real uid, the user who ran us even
 * through a set-uid or capability wrapper; root mounting for others
 * (mount(8), systemd) passes, and the source's own bits then decide who
 * reads. Without allow_other only the user who mounts gets in: ours.
 */
static int source_perms(struct sfs *fs, const char *source, const struct stat *st)
{
	fs->owner = (uint32_t)getuid();
	fs->group = (uint32_t)getgid();
	fs->file_mode = 0444;
	fs->dir_mode = 0555;
	if (!fs->o.allow_other)
		return 0;
	int dir = S_ISDIR(st->st_mode);
	if (access(source, dir ? R_OK | X_OK : R_OK) < 0) {
		fprintf(stderr,
			"spritefs: %s: %s for uid %u: -o allow_other would serve it to every "
			"user; mount a %s you can read\n",
			source, strerror(errno), (unsigned)getuid(), dir ? "folder" : "store");
		return -1;
	}
	fs->owner = (uint32_t)st->st_uid;
	fs->group = (uint32_t)st->st_gid;
	fs->file_mode = (uint32_t)st->st_mode & 0444;
	fs->dir_mode = fs->file_mode | (fs->file_mode >> 2); /* r gives x */
	return 0;
}

/*
 * Whether every user may see the store's path: it is readable by others and
 * every folder above it searchable by them. Otherwise dataset.json and the
 * mount table name the store by its file name only.
 */
static int path_public(const char *path)
{
	char p[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof(p), "%s", path);
	if (stat(p, &st) < 0 || !(st.st_mode & S_IROTH))
		return 0;
	for (char *slash = strrchr(p, '/'); slash && slash > p; slash = strrchr(p, '/')) {
		*slash = 0;
		if (stat(p, &st) < 0 || !(st.st_mode & S_IXOTH))
			return 0;
	}
	return 1;
}

/*
 * What the store leaves out, said at mount: each class with no sample in a
 * split (a model never sees it there), and how many source files the pack
 * skipped, with where they are named.
 */
static void warn_store_gaps(const struct sfs *fs, const char *mnt)
{
	const struct sprite_store_info *in = fs->info;
	uint64_t *n = calloc(in->nclasses, sizeof(*n));
	for (uint32_t k = 0; n && k < in->nsplits; k++) {
		if (sprite_store_class_counts(fs->store, k, n) < 0)
			break;
		uint32_t empty = 0;
		for (uint32_t c = 0; c < in->nclasses; c++)
			empty += !n[c];
		if (!empty)
			continue;
		/* one line per split, naming the first few: a store of 65,535 classes
		 * and a small test split would otherwise print thousands of lines */
		fprintf(stderr,
			"spritefs: warning: %" PRIu32 " class%s no sample in split %s:", empty,
			empty == 1 ? " has" : "es have", in->splits[k].name);
		for (uint32_t c = 0, said = 0; c < in->nclasses && said < 8; c++)
			if (!n[c])
				fprintf(stderr, "%s %s", said++ ? "," : "", in->class_names[c]);
		fprintf(stderr, "%s\n",
			empty > 8 ? ", ... (dataset.json's class_counts has all)" : "");
	}
	free(n);
	uint64_t skipped = sprite_store_skipped_count(fs->store);
	if (skipped)
		fprintf(stderr,
			"spritefs: %s: %" PRIu64 " source file%s skipped at pack: %s/.spritefs/"
			"skipped.txt names %s\n",
			fs->store_path, skipped, skipped == 1 ? " was" : "s were", mnt,
			skipped == 1 ? "it" : "them");
}

/*
 * FUSE's options are only checked when the session is made, after SOURCE
 * is resolved (a first-use pack can take minutes): a throwaway session on
 * a copy of the arguments finds a mistyped one before any work is done.
 * Nothing is opened or mounted by fuse_session_new().
 */
static int check_fuse_args(const struct fuse_args *args)
{
	struct fuse_args copy = FUSE_ARGS_INIT(0, NULL);
	int r = 0;
	for (int i = 0; i < args->argc && r == 0; i++)
		r = fuse_opt_add_arg(&copy, args->argv[i]);
	if (r == 0) {
		struct fuse_session *se =
			fuse_session_new(&copy, &sfs_ll_ops, sizeof(sfs_ll_ops), NULL);
		if (se)
			fuse_session_destroy(se);
		else
			r = -1;
	}
	fuse_opt_free_args(&copy);
	if (r < 0)
		fprintf(stderr, "spritefs: bad FUSE options (see spritefs -h)\n");
	return r;
}

/* -o tile=, fit= and background=, for a first-use pack: 0, or -1 after saying why. */
static int parse_shape(const struct sfs_cli *c, struct sprite_pack_options *how)
{
	if (c->tile && sprite_parse_tile(c->tile, &how->tile_h, &how->tile_w, &how->tile_c) < 0) {
		fprintf(stderr,
			"spritefs: -o tile=%s: expected HxW or HxWxC (sides 1..%u, C 1, 3 or 4)\n",
			c->tile, SPRITE_MAX_TILE_SIDE);
		return -1;
	}
	if (c->fit && sprite_fit_parse(c->fit, &how->fit) < 0) {
		fprintf(stderr, "spritefs: -o fit=%s: expected crop, pad or stretch\n", c->fit);
		return -1;
	}
	if (c->background && sprite_bg_parse(c->background, &how->background) < 0) {
		fprintf(stderr,
			"spritefs: -o background=%s: expected none, black, white or R,G,B "
			"(each 0-255)\n",
			c->background);
		return -1;
	}
	return 0;
}

/*
 * libfuse and the pack's temp file handlers only take over signals left
 * at their default; a background job of a non-interactive shell starts
 * with SIGINT ignored, and we want both of these to stop a first-use pack
 * and to unmount cleanly wherever we were started from. Some job runners
 * start us with SIGINT blocked: let the signals that stop us in.
 */
static void let_stop_signals_in(void)
{
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGHUP);
	pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
}

/*
 * SOURCE to a store file, in out: a store as it is, an image folder packed
 * at first use, nothing (or "default", "fashion-mnist" where no such path
 * is) Fashion-MNIST. 0, or the exit status (1, 2 for a usage mistake)
 * after saying why.
 */
static int resolve_source(struct sfs *fs, const struct sfs_cli *c, const char *source,
			  const struct sprite_pack_options *how, char *out, size_t cap)
{
	struct stat st;
	if (!source || ((!strcmp(source, "default") || !strcmp(source, "fashion-mnist")) &&
			stat(source, &st) < 0))
		source = SPRITE_FMNIST_DIR;
	if (stat(source, &st) < 0) {
		fprintf(stderr, "spritefs: %s: %s\n", source, strerror(errno));
		return 1;
	}
	if (source_perms(fs, source, &st) < 0)
		return 1;
	if (S_ISDIR(st.st_mode)) {
		if (sfs_first_pack(source, c->cachedir, how, out, cap) < 0)
			return 1;
	} else if (S_ISREG(st.st_mode)) {
		/* A store's tiles are made: an option that would shape them is refused. */
		const char *shaping = c->tile	      ? "tile"
				      : c->fit	      ? "fit"
				      : c->background ? "background"
						      : NULL;
		if (shaping) {
			fprintf(stderr,
				"spritefs: -o %s applies to the first-use pack of an image folder, "
				"not to a store file (%s): its tiles were made by spritefs-pack\n",
				shaping, source);
			return 2;
		}
		if (!realpath(source, out))
			snprintf(out, cap, "%s", source);
	} else {
		fprintf(stderr, "spritefs: %s: not a store file or an image folder\n", source);
		return 1;
	}
	return 0;
}

/* Open and check the store at path; its file's time and identity. -1 after saying why. */
static int open_store(struct sfs *fs, const char *path, char *err)
{
	struct stat st;
	snprintf(fs->store_path, sizeof(fs->store_path), "%s", path);
	fs->path_private = fs->o.allow_other && !path_public(fs->store_path);
	int r = sprite_store_open(fs->store_path, &fs->store, err);
	if (r < 0) {
		fprintf(stderr, "spritefs: %s: %s\n", fs->store_path,
			err[0] ? err : sprite_strerror(-r));
		return -1;
	}
	fs->info = sprite_store_info(fs->store);
	if (stat(fs->store_path, &st) == 0) {
		fs->mtime = st.st_mtim;
		fs->store_dev = st.st_dev;
		fs->store_ino = st.st_ino;
	}
	return 0;
}

/* FUSE options: ours first (the user's fsname wins), read-only last (always wins). */
static int add_fuse_opts(struct sfs *fs, struct fuse_args *args, int debug)
{
	char *fsname = NULL;
	if (fuse_opt_add_opt_escaped(&fsname, sfs_store_shown(fs)) < 0)
		return -1;
	size_t n = strlen(fsname) + 64;
	char *o = malloc(n);
	if (!o) {
		free(fsname);
		return -1;
	}
	snprintf(o, n, "-osubtype=spritefs,fsname=%s", fsname);
	free(fsname);
	int r = fuse_opt_insert_arg(args, 1, o);
	free(o);
	if (r < 0 || fuse_opt_add_arg(args, "-oro") < 0 ||
	    (fs->o.allow_other && fuse_opt_add_arg(args, "-odefault_permissions") < 0) ||
	    (debug && fuse_opt_add_arg(args, "-d") < 0))
		return -1;
	return 0;
}

/*
 * Each FUSE worker holds its /dev/fuse clone and, for spliced replies, a
 * pipe: three descriptors, so SFS_MAX_THREADS workers need about 870, near
 * the 1,024 that a login session's soft limit often is. Past it libfuse goes
 * on without clone_fd or splice, slower; the soft limit is raised to the
 * hard one, which is typically far above.
 */
static void raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/*
 * The FUSE loop keeps its idle workers (libfuse's default, -1, so no
 * fuse_loop_cfg_set_idle_threads: 3.14 logs UINT_MAX as invalid): ending them
 * past 8 idle made an O_DIRECT reader of whole epoch views (hntrain, 60
 * requests of 1 MiB at once) start and end a thread every few requests,
 * each with its stack, its /dev/fuse clone and its reply buffers
 * (docs/ARCHITECTURE.md, "CPU floor"). At most max_threads stay.
 */
int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct sfs_cli c;
	struct sfs *fs = NULL;
	struct fuse_session *se = NULL;
	struct fuse_loop_config *cfg = NULL;
	char err[SPRITE_ERR_MAX] = "";
	char source_store[PATH_MAX], mnt_abs[PATH_MAX];
	const char *source, *mnt;
	int ret = 1, r;

	if (sfs_cli_parse(argc, argv, &args, &c) < 0) {
		ret = 2;
		goto out_args;
	}
	if (c.help) {
		sfs_usage(stdout);
		ret = 0;
		goto out_args;
	}
	if (c.version) {
		printf("spritefs " SPRITEFS_VERSION " (store format %u, FUSE %s)\n", SPRITE_VERSION,
		       fuse_pkgversion());
		ret = 0;
		goto out_args;
	}
	if (c.npos < 1) {
		fprintf(stderr, "spritefs: no mount point given (see spritefs -h)\n");
		ret = 2;
		goto out_args;
	}
	if (check_fuse_args(&args) < 0) {
		ret = 2;
		goto out_args;
	}
	mnt = c.pos[c.npos - 1];
	source = c.npos == 2 ? c.pos[0] : NULL;

	fs = calloc(1, sizeof(*fs));
	if (!fs)
		goto out_args;
	if (sfs_cli_apply(&c, &fs->o) < 0) {
		ret = 2;
		goto out_fs;
	}
	struct sprite_pack_options how = {.fit = SPRITE_FIT_CROP};
	if (parse_shape(&c, &how) < 0) {
		ret = 2;
		goto out_fs;
	}
	if (check_mountpoint(mnt, mnt_abs) < 0)
		goto out_fs;
	mnt = mnt_abs;
	/* opened here: the daemon's working folder becomes / when it detaches */
	if (c.log) {
		char why[SPRITE_ERR_MAX];
		if (sfs_log_open(c.log, why) < 0) {
			fprintf(stderr, "spritefs: -o log=%s: %s\n", c.log, why);
			goto out_fs;
		}
	}

	let_stop_signals_in();
	r = resolve_source(fs, &c, source, &how, source_store, sizeof(source_store));
	if (r) {
		ret = r;
		goto out_fs;
	}
	if (open_store(fs, source_store, err) < 0)
		goto out_fs;
	r = sfs_tree_init(fs, err);
	if (r < 0) {
		fprintf(stderr, "spritefs: %s: %s\n", fs->store_path,
			err[0] ? err : sprite_strerror(-r));
		goto out_tree;
	}
	if (check_budget(fs) < 0 || check_orders(fs) < 0) {
		ret = 2;
		goto out_tree;
	}
	warn_store_gaps(fs, mnt);
	fs->release_order = sfs_cache_release_stream; /* epoch.c's way up (sfs.h) */
	if (sfs_cache_create(fs) < 0 || sfs_epochs_create(fs) < 0) {
		fprintf(stderr, "spritefs: out of memory\n");
		goto out_cache;
	}

	if (add_fuse_opts(fs, &args, c.debug) < 0)
		goto out_cache;
	se = fuse_session_new(&args, &sfs_ll_ops, sizeof(sfs_ll_ops), fs);
	if (!se) {
		fprintf(stderr, "spritefs: bad FUSE options (see spritefs -h)\n");
		goto out_cache;
	}
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, mnt) != 0)
		goto out_signals;
	tune_readahead(mnt);
	if (fuse_daemonize(fs->o.foreground) != 0)
		goto out_unmount;
	sfs_log_to_syslog(!fs->o.foreground);
	fs->stats.started = sprite_now();

	r = sfs_prefetch_start(fs, err);
	if (r < 0) {
		sfs_log("spritefs: cannot start the reader: %s",
			err[0] ? err : sprite_strerror(-r));
		goto out_prefetch;
	}
	if (fs->store_ino)
		sfs_watch_start(fs);  /* the store replaced at its path: said, not missed */
	if (sfs_epochs_start(fs) < 0) /* then requests build their orders themselves */
		sfs_log("spritefs: no order builder thread: orders are built in the requests");
	cfg = fuse_loop_cfg_create();
	if (!cfg)
		goto out_prefetch;
	raise_nofile();
	fuse_loop_cfg_set_clone_fd(cfg, 1);
	fuse_loop_cfg_set_max_threads(cfg, SFS_MAX_THREADS);
	__atomic_store_n(&fs->se, se, __ATOMIC_RELEASE); /* decode workers may push now */
	r = fuse_session_loop_mt(se, cfg);
	/* a signal ends the loop with its number: that is the way to stop us */
	ret = (r == 0 || r == SIGTERM || r == SIGINT || r == SIGHUP) ? 0 : 1;
	fuse_loop_cfg_destroy(cfg);

out_prefetch:
	sfs_epochs_stop(fs);
	sfs_watch_stop(fs);
	sfs_prefetch_stop(fs);
out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_cache:
	sfs_epochs_destroy(fs);
	sfs_cache_destroy(fs);
out_tree:
	sfs_tree_free(fs);
	sprite_store_close(fs->store);
out_fs:
	free(fs);
out_args:
	sfs_cli_free(&c);
	sfs_log_close();
	fuse_opt_free_args(&args);
	return ret;
}
