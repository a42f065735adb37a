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
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "common/cachestore.h"
#include "common/image.h"
#include "common/pack.h"
#include "common/util.h"
#include "fs/sfs.h"

#define DEFAULT_PREFETCH  8u
#define DEFAULT_EPOCHS	  100u
#define DEFAULT_BATCH	  64u
#define MAX_DEFAULT_CACHE (16ull << 30)
#define DEFAULT_PREALLOC  (256ull << 20)
#define DEFAULT_ORDERS	  (256ull << 20)
#define KEY_ALLOW_OTHER	  1

struct cli {
	char *cache, *prealloc, *prefetch, *epochs, *seed, *window, *batch, *workers, *direct;
	char *cachedir, *kopen, *push, *tile, *fit;
	char *ranks, *log, *orders;
	int allow_other;
	int foreground, debug, help, version;
	char *pos[3];
	int npos;
};

#define OPT(t, f)                                                                                  \
	{                                                                                          \
		t, offsetof(struct cli, f), 0                                                      \
	}
static const struct fuse_opt cli_spec[] = {
	OPT("cache=%s", cache),
	OPT("prealloc=%s", prealloc),
	OPT("prefetch=%s", prefetch),
	OPT("epochs=%s", epochs),
	OPT("seed=%s", seed),
	OPT("window=%s", window),
	OPT("batch=%s", batch),
	OPT("ranks=%s", ranks),
	OPT("workers=%s", workers),
	OPT("direct=%s", direct),
	OPT("cachedir=%s", cachedir),
	OPT("kernel_open=%s", kopen),
	OPT("push=%s", push),
	OPT("tile=%s", tile),
	OPT("fit=%s", fit),
	OPT("log=%s", log),
	OPT("orders=%s", orders),
	FUSE_OPT_KEY("allow_other", KEY_ALLOW_OTHER),
	{"-f", offsetof(struct cli, foreground), 1},
	{"-d", offsetof(struct cli, debug), 1},
	{"debug", offsetof(struct cli, debug), 1},
	{"-h", offsetof(struct cli, help), 1},
	{"--help", offsetof(struct cli, help), 1},
	{"-V", offsetof(struct cli, version), 1},
	{"--version", offsetof(struct cli, version), 1},
	FUSE_OPT_END,
};

/* ours, when given without "=VALUE" (FUSE would call them unknown) */
static const char *const cli_valued[] = {"cache",    "prealloc",    "prefetch", "epochs",  "seed",
					 "window",   "batch",	    "ranks",	"workers", "direct",
					 "cachedir", "kernel_open", "push",	"tile",	   "fit",
					 "log",	     "orders"};

static int cli_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct cli *c = data;
	if (key == FUSE_OPT_KEY_NONOPT) {
		if (c->npos >= 2) {
			fprintf(stderr, "spritefs: unexpected argument '%s'\n", arg);
			return -1;
		}
		c->pos[c->npos++] = strdup(arg);
		return 0;
	}
	if (key == KEY_ALLOW_OTHER) {
		c->allow_other = 1;
		return 1; /* FUSE's too */
	}
	for (size_t k = 0; key == FUSE_OPT_KEY_OPT && k < sizeof(cli_valued) / sizeof(*cli_valued);
	     k++)
		if (!strcmp(arg, cli_valued[k])) {
			fprintf(stderr,
				"spritefs: -o %s needs a value (-o %s=...; see spritefs -h)\n", arg,
				arg);
			return -1;
		}
	return 1; /* everything else goes to FUSE */
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: spritefs [-f] [-d] [-o OPTIONS] [SOURCE] MOUNTPOINT\n"
		"\n"
		"Serve a sprite store as read-only files (see docs/FORMAT.md, \"The mount\").\n"
		"SOURCE: a store file (*.sprites); an image folder (packed once into a cache\n"
		"store, reused while the folder is unchanged); omitted or \"default\": "
		"Fashion-MNIST\n"
		"from %s.\n"
		"\n"
		"  -f                 stay in the foreground\n"
		"  -d                 FUSE debug output (implies -f)\n"
		"  -o cache=SIZE      sheet cache budget, e.g. 512M (default: 1/4 of RAM, at most "
		"16G)\n"
		"  -o prealloc=SIZE   sheet memory faulted in at mount, so that first reads do "
		"not\n"
		"                     page-fault (default: the decoded store, at most the cache\n"
		"                     and 256M; 0 = off)\n"
		"  -o prefetch=N      sheets read ahead of a reader (default %u, 0 = off)\n"
		"  -o epochs=N        epoch views listed per seed (default %u)\n"
		"  -o seed=S          seed listed under <split>/epochs/ (default 0; any seed can "
		"be\n"
		"                     looked up by name)\n"
		"  -o batch=N         samples per epoch-view batch file (default %u)\n"
		"  -o ranks=R[-R2]/N  this node serves data-parallel ranks R..R2 of N (mpirun\n"
		"                     hntrain): prefetch only their epoch-view files b, those\n"
		"                     with b %% N in R..R2 (default: every file)\n"
		"  -o window=N|full   epoch views in another order than the data set's: N sheets\n"
		"                     per window, or the full shuffle (default: the data set's\n"
		"                     order, recorded by spritefs-pack --window; dataset.json)\n"
		"  -o workers=N       decode threads (default: number of CPUs)\n"
		"  -o direct=0|1      O_DIRECT store reads when the filesystem allows (default 1)\n"
		"  -o kernel_open=0|1 let the kernel open files without asking the daemon (FUSE\n"
		"                     no_open), where it can: no round trip per open (default 1)\n"
		"  -o push=0|1        store sheets loaded ahead of a batches/ reader into the\n"
		"                     kernel's page cache as they are decoded (default 1)\n"
		"  -o cachedir=DIR    where packed stores of image folders go (default\n"
		"                     $XDG_CACHE_HOME/spritefs, or /var/cache/spritefs as root)\n"
		"  -o tile=HxW[xC]    image folder: the tile its images are packed to (default:\n"
		"                     their size when they all have one; images of several\n"
		"                     sizes need it), as spritefs-pack --tile\n"
		"  -o fit=MODE        image folder: crop (default), pad or stretch, as\n"
		"                     spritefs-pack --fit\n"
		"  -o orders=SIZE     memory for the epoch views' orders and plans, about 12\n"
		"                     bytes a sample each (default 256M): as many orders are\n"
		"                     kept as fit (at most %u), and a store whose largest\n"
		"                     split needs more than the whole is refused\n"
		"  -o allow_other     (FUSE) let every user in: the files then take the store's\n"
		"                     owner, group and read bits (default_permissions), and a\n"
		"                     store the user who mounts cannot read is refused\n"
		"  -o log=FILE        append the daemon's messages (a bad sheet, a failed read)\n"
		"                     to FILE, each with its time; they also go to stderr in\n"
		"                     the foreground, and to syslog (daemon facility) once\n"
		"                     detached\n"
		"  other -o options go to FUSE (allow_other, default_permissions, ...);\n"
		"  -o auto_unmount removes the mount if the daemon is killed (SIGKILL, OOM)\n"
		"\n"
		"exit status: 0 unmounted (SIGTERM, SIGINT, fusermount3 -u), 1 error (a bad\n"
		"store or mount point, a failed mount), 2 usage (a missing or bad argument\n"
		"or option)\n",
		SPRITE_FMNIST_DIR, DEFAULT_PREFETCH, DEFAULT_EPOCHS, DEFAULT_BATCH, SFS_MAX_ORDERS);
}

static int parse_u64(const char *name, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
		fprintf(stderr,
			"spritefs: -o %s=%s: expected a whole number in %" PRIu64 "..%" PRIu64 "\n",
			name, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_u32(const char *name, const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	uint64_t v;
	if (parse_u64(name, s, lo, hi, &v))
		return -1;
	*out = (uint32_t)v;
	return 0;
}

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

static uint64_t ram_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : (4ull << 30);
}

static uint64_t default_cache(void)
{
	uint64_t c = ram_bytes() / 4;
	return c > MAX_DEFAULT_CACHE ? MAX_DEFAULT_CACHE : c;
}

/*
 * The budget against the sheets and the epoch views' working set: fewer than
 * two sheets cannot serve a batch that straddles two (refused, naming the
 * smallest budget that works); below a split's working set its views read
 * sheets more than once (said, naming the budget that would do). Where a
 * split is windowed, the working set is said in any case: for the ranks this
 * node serves (-o ranks), one reader each, and for 4 and 8 readers of
 * batch files at once (a loader's threads, ranks); the mount then says so
 * again if more readers come than the budget holds (cache.c).
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
		if (one > ram_bytes())
			fprintf(stderr, "that is more than this machine's memory (%s)",
				sprite_fmt_size(ram_bytes(), w, sizeof(w)));
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
		fprintf(stderr, "spritefs: warning: %" PRIu32 " class%s no sample in split %s:", empty,
			empty == 1 ? " has" : "es have", in->splits[k].name);
		for (uint32_t c = 0, said = 0; c < in->nclasses && said < 8; c++)
			if (!n[c])
				fprintf(stderr, "%s %s", said++ ? "," : "", in->class_names[c]);
		fprintf(stderr, "%s\n", empty > 8 ? ", ... (dataset.json's class_counts has all)" : "");
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

static int apply_options(struct cli *c, struct sfs_opts *o)
{
	o->cache_bytes = default_cache();
	o->prealloc_bytes = DEFAULT_PREALLOC;
	o->prefetch = DEFAULT_PREFETCH;
	o->epochs = DEFAULT_EPOCHS;
	o->seed = 0;
	o->window = 0;
	o->batch = DEFAULT_BATCH;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	o->workers = ncpu < 1 ? 1 : ncpu > 16 ? 16 : (uint32_t)ncpu;
	o->direct = 1;
	o->kernel_open = 1;
	o->push = 1;
	if (c->cache) {
		uint64_t v;
		if (sprite_parse_size(c->cache, &v) < 0 || v < (1u << 20)) {
			fprintf(stderr,
				"spritefs: -o cache=%s: expected a size of at least 1M "
				"(e.g. 512M, 2G)\n",
				c->cache);
			return -1;
		}
		o->cache_bytes = v;
		if (v > ram_bytes()) {
			/* a budget the machine cannot hold bounds nothing: refused, not warned */
			char a[32], b[32];
			fprintf(stderr,
				"spritefs: -o cache=%s is more than this machine's memory (%s): "
				"give at most that\n",
				sprite_fmt_size(v, a, sizeof(a)),
				sprite_fmt_size(ram_bytes(), b, sizeof(b)));
			return -1;
		}
	}
	if (c->prealloc) {
		if (sprite_parse_size(c->prealloc, &o->prealloc_bytes) < 0) {
			fprintf(stderr,
				"spritefs: -o prealloc=%s: expected a size (e.g. 0, 64M, 1G)\n",
				c->prealloc);
			return -1;
		}
	}
	o->orders_bytes = DEFAULT_ORDERS;
	if (c->orders && (sprite_parse_size(c->orders, &o->orders_bytes) < 0 ||
			  o->orders_bytes < (1u << 20) || o->orders_bytes > ram_bytes())) {
		char m[32];
		fprintf(stderr,
			"spritefs: -o orders=%s: expected a size from 1M to this machine's memory "
			"(%s), e.g. 64M, 1G\n",
			c->orders, sprite_fmt_size(ram_bytes(), m, sizeof(m)));
		return -1;
	}
	o->allow_other = c->allow_other;
	if (c->prefetch && parse_u32("prefetch", c->prefetch, 0, 256, &o->prefetch))
		return -1;
	if (c->epochs && parse_u32("epochs", c->epochs, 1, SFS_MAX_EPOCHS, &o->epochs))
		return -1;
	if (c->seed && parse_u64("seed", c->seed, 0, UINT64_MAX, &o->seed))
		return -1;
	if (c->window && !strcmp(c->window, "full"))
		o->window = SFS_WINDOW_FULL;
	else if (c->window && parse_u32("window", c->window, 0, UINT32_MAX - 1, &o->window))
		return -1;
	if (c->batch && parse_u32("batch", c->batch, 1, SFS_MAX_BATCH, &o->batch))
		return -1;
	if (c->ranks) {
		unsigned lo, hi, n;
		int used = 0;
		if (sscanf(c->ranks, "%u-%u/%u%n", &lo, &hi, &n, &used) == 3 && !c->ranks[used]) {
		} else if (used = 0,
			   sscanf(c->ranks, "%u/%u%n", &lo, &n, &used) == 2 && !c->ranks[used]) {
			hi = lo;
		} else {
			used = -1;
		}
		if (used < 0 || n < 1 || n > 65536 || lo > hi || hi >= n) {
			fprintf(stderr,
				"spritefs: -o ranks=%s: expected R/N or R-R2/N with R <= R2 < N <= "
				"65536 (ranks R..R2 of N)\n",
				c->ranks);
			return -1;
		}
		o->rank_lo = lo;
		o->rank_hi = hi;
		o->nranks = n;
	}
	if (c->workers && parse_u32("workers", c->workers, 1, 64, &o->workers))
		return -1;
	if (c->direct) {
		uint32_t d;
		if (parse_u32("direct", c->direct, 0, 1, &d))
			return -1;
		o->direct = (int)d;
	}
	if (c->kopen) {
		uint32_t d;
		if (parse_u32("kernel_open", c->kopen, 0, 1, &d))
			return -1;
		o->kernel_open = (int)d;
	}
	if (c->push) {
		uint32_t d;
		if (parse_u32("push", c->push, 0, 1, &d))
			return -1;
		o->push = (int)d;
	}
	o->foreground = c->foreground || c->debug;
	o->debug = c->debug;
	return 0;
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

/*
 * -o tile=64,64,3: FUSE splits -o at commas, so the tile would reach us as
 * tile=64 and two unknown options. Said before FUSE parses, with the form
 * to give; -1 when found.
 */
static int check_tile_commas(int argc, char *argv[])
{
	for (int i = 1; i < argc; i++) {
		const char *o = !strcmp(argv[i], "-o") && i + 1 < argc ? argv[i + 1]
				: !strncmp(argv[i], "-o", 2)		 ? argv[i] + 2
									 : NULL;
		const char *t = o ? strstr(o, "tile=") : NULL;
		if (!t || (t != o && t[-1] != ','))
			continue;
		t += 5;
		size_t n = strspn(t, "0123456789");
		if (n && t[n] == ',' && t[n + 1] >= '0' && t[n + 1] <= '9') {
			size_t len = n + 1 + strspn(t + n + 1, "0123456789,");
			if (t[len - 1] == ',')
				len--;
			fprintf(stderr,
				"spritefs: -o tile=%.*s: a tile is HxW or HxWxC with 'x' (e.g. -o "
				"tile=64x64x3); commas separate -o options\n",
				(int)len, t);
			return -1;
		}
	}
	return 0;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct cli c;
	struct sfs *fs = NULL;
	struct fuse_session *se = NULL;
	struct fuse_loop_config *cfg = NULL;
	char err[SPRITE_ERR_MAX] = "";
	char source_store[PATH_MAX], mnt_abs[PATH_MAX];
	const char *source, *mnt;
	int ret = 1, r;

	memset(&c, 0, sizeof(c));
	if (check_tile_commas(argc, argv) < 0) {
		ret = 2;
		goto out_args;
	}
	if (fuse_opt_parse(&args, &c, cli_spec, cli_proc) == -1) {
		ret = 2;
		goto out_args;
	}
	if (c.help) {
		usage(stdout);
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
	if (apply_options(&c, &fs->o) < 0) {
		ret = 2;
		goto out_fs;
	}
	struct sprite_pack_options how = {.fit = SPRITE_FIT_CROP};
	if (c.tile && sprite_parse_tile(c.tile, &how.tile_h, &how.tile_w, &how.tile_c) < 0) {
		fprintf(stderr,
			"spritefs: -o tile=%s: expected HxW or HxWxC (sides 1..%u, C 1, 3 or 4)\n",
			c.tile, SPRITE_MAX_TILE_SIDE);
		ret = 2;
		goto out_fs;
	}
	if (c.fit && sprite_fit_parse(c.fit, &how.fit) < 0) {
		fprintf(stderr, "spritefs: -o fit=%s: expected crop, pad or stretch\n", c.fit);
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

	/*
	 * libfuse and the pack's temp file handlers only take over signals left
	 * at their default; a background job of a non-interactive shell starts
	 * with SIGINT ignored, and we want both of these to stop a first-use pack
	 * and to unmount cleanly wherever we were started from. Some job runners
	 * start us with SIGINT blocked: let the signals that stop us in.
	 */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGHUP);
	pthread_sigmask(SIG_UNBLOCK, &stop, NULL);

	/* resolve SOURCE to a store file */
	struct stat st;
	if (!source || ((!strcmp(source, "default") || !strcmp(source, "fashion-mnist")) &&
			stat(source, &st) < 0))
		source = SPRITE_FMNIST_DIR;
	if (stat(source, &st) < 0) {
		fprintf(stderr, "spritefs: %s: %s\n", source, strerror(errno));
		goto out_fs;
	}
	if (source_perms(fs, source, &st) < 0)
		goto out_fs;
	if (S_ISDIR(st.st_mode)) {
		if (sfs_first_pack(source, c.cachedir, &how, source_store, sizeof(source_store)) < 0)
			goto out_fs;
	} else if (S_ISREG(st.st_mode)) {
		/* A store's tiles are made: an option that would shape them is refused. */
		const char *shaping = c.tile ? "tile" : c.fit ? "fit" : NULL;
		if (shaping) {
			fprintf(stderr,
				"spritefs: -o %s applies to the first-use pack of an image folder, "
				"not to a store file (%s): its tiles were made by spritefs-pack\n",
				shaping, source);
			ret = 2;
			goto out_fs;
		}
		if (!realpath(source, source_store))
			snprintf(source_store, sizeof(source_store), "%s", source);
	} else {
		fprintf(stderr, "spritefs: %s: not a store file or an image folder\n", source);
		goto out_fs;
	}
	snprintf(fs->store_path, sizeof(fs->store_path), "%s", source_store);
	fs->path_private = fs->o.allow_other && !path_public(fs->store_path);

	r = sprite_store_open(fs->store_path, &fs->store, err);
	if (r < 0) {
		fprintf(stderr, "spritefs: %s: %s\n", fs->store_path,
			err[0] ? err : sprite_strerror(-r));
		goto out_fs;
	}
	fs->info = sprite_store_info(fs->store);
	if (stat(fs->store_path, &st) == 0) {
		fs->mtime = st.st_mtim;
		fs->store_dev = st.st_dev;
		fs->store_ino = st.st_ino;
	}
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

	/* FUSE options: ours first (the user's fsname wins), read-only last (always wins) */
	{
		char *fsname = NULL;
		if (fuse_opt_add_opt_escaped(&fsname, sfs_store_shown(fs)) < 0)
			goto out_cache;
		size_t n = strlen(fsname) + 64;
		char *o = malloc(n);
		if (!o) {
			free(fsname);
			goto out_cache;
		}
		snprintf(o, n, "-osubtype=spritefs,fsname=%s", fsname);
		free(fsname);
		r = fuse_opt_insert_arg(&args, 1, o);
		free(o);
		if (r < 0 || fuse_opt_add_arg(&args, "-oro") < 0 ||
		    (fs->o.allow_other && fuse_opt_add_arg(&args, "-odefault_permissions") < 0) ||
		    (c.debug && fuse_opt_add_arg(&args, "-d") < 0))
			goto out_cache;
	}
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
		sfs_watch_start(fs); /* the store replaced at its path: said, not missed */
	if (sfs_epochs_start(fs) < 0) /* then requests build their orders themselves */
		sfs_log("spritefs: no order builder thread: orders are built in the requests");
	cfg = fuse_loop_cfg_create();
	if (!cfg)
		goto out_prefetch;
	fuse_loop_cfg_set_clone_fd(cfg, 1);
	fuse_loop_cfg_set_idle_threads(cfg, 8);
	fuse_loop_cfg_set_max_threads(cfg, 32);
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
	for (int k = 0; k < c.npos; k++)
		free(c.pos[k]);
	free(c.cache);
	free(c.prefetch);
	free(c.prealloc);
	free(c.epochs);
	free(c.seed);
	free(c.window);
	free(c.batch);
	free(c.ranks);
	free(c.workers);
	free(c.direct);
	free(c.cachedir);
	free(c.kopen);
	free(c.push);
	free(c.tile);
	free(c.fit);
	free(c.log);
	free(c.orders);
	sfs_log_close();
	fuse_opt_free_args(&args);
	return ret;
}
