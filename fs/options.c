/*
 * options.c - spritefs's command line: -o options through fuse_opt, the
 * usage text, and each value checked and turned into struct sfs_opts.
 *
 * Every option is a string until sfs_cli_apply() checks it against its
 * bounds and says, on a mistake, which option, what was given and what is
 * expected (exit status 2, nothing mounted). Options FUSE knows go on to
 * FUSE untouched; ours without "=VALUE" are refused here, where FUSE would
 * call them unknown.
 */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <fuse_opt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/pack.h"
#include "common/util.h"
#include "fs/options.h"
#include "fs/sfs.h"

#define DEFAULT_PREFETCH  8u
#define DEFAULT_EPOCHS	  100u
#define DEFAULT_BATCH	  64u
#define MAX_DEFAULT_CACHE (16ull << 30)
#define DEFAULT_PREALLOC  (1ull << 30)
#define DEFAULT_ORDERS	  (256ull << 20)
#define KEY_ALLOW_OTHER	  1

#define OPT(t, f)                                                                                  \
	{                                                                                          \
		t, offsetof(struct sfs_cli, f), 0                                                  \
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
	OPT("splice=%s", splice),
	OPT("tile=%s", tile),
	OPT("fit=%s", fit),
	OPT("background=%s", background),
	OPT("log=%s", log),
	OPT("orders=%s", orders),
	FUSE_OPT_KEY("allow_other", KEY_ALLOW_OTHER),
	{"-f", offsetof(struct sfs_cli, foreground), 1},
	{"-d", offsetof(struct sfs_cli, debug), 1},
	{"debug", offsetof(struct sfs_cli, debug), 1},
	{"-h", offsetof(struct sfs_cli, help), 1},
	{"--help", offsetof(struct sfs_cli, help), 1},
	{"-V", offsetof(struct sfs_cli, version), 1},
	{"--version", offsetof(struct sfs_cli, version), 1},
	FUSE_OPT_END,
};

/* ours, when given without "=VALUE" (FUSE would call them unknown) */
static const char *const cli_valued[] = {
	"cache", "prealloc", "prefetch", "epochs",   "seed",	    "window", "batch",
	"ranks", "workers",  "direct",	 "cachedir", "kernel_open", "push",   "splice",
	"tile",	 "fit",	     "log",	 "orders",   "background"};

static int cli_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct sfs_cli *c = data;
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

void sfs_usage(FILE *f)
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
		"                     and 1G; 0 = off)\n"
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
		"  -o splice=0|1      answer reads through a pipe (vmsplice + splice) where the\n"
		"                     kernel and the pipe size limit allow (default 1)\n"
		"  -o cachedir=DIR    where packed stores of image folders go (default\n"
		"                     $XDG_CACHE_HOME/spritefs, or /var/cache/spritefs as root)\n"
		"  -o tile=HxW[xC]    image folder: the tile its images are packed to (default:\n"
		"                     their size when they all have one; images of several\n"
		"                     sizes need it), as spritefs-pack --tile\n"
		"  -o fit=MODE        image folder: crop (default), pad or stretch, as\n"
		"                     spritefs-pack --fit\n"
		"  -o background=C    image folder: what transparent pixels become: none\n"
		"                     (default: the colours as stored), black, white or\n"
		"                     R,G,B, as spritefs-pack --background\n"
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

uint64_t sfs_ram_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : (4ull << 30);
}

static uint64_t default_cache(void)
{
	uint64_t c = sfs_ram_bytes() / 4;
	return c > MAX_DEFAULT_CACHE ? MAX_DEFAULT_CACHE : c;
}

int sfs_cli_apply(struct sfs_cli *c, struct sfs_opts *o)
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
	o->splice = 1;
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
		if (v > sfs_ram_bytes()) {
			/* a budget the machine cannot hold bounds nothing: refused, not warned */
			char a[32], b[32];
			fprintf(stderr,
				"spritefs: -o cache=%s is more than this machine's memory (%s): "
				"give at most that\n",
				sprite_fmt_size(v, a, sizeof(a)),
				sprite_fmt_size(sfs_ram_bytes(), b, sizeof(b)));
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
			  o->orders_bytes < (1u << 20) || o->orders_bytes > sfs_ram_bytes())) {
		char m[32];
		fprintf(stderr,
			"spritefs: -o orders=%s: expected a size from 1M to this machine's memory "
			"(%s), e.g. 64M, 1G\n",
			c->orders, sprite_fmt_size(sfs_ram_bytes(), m, sizeof(m)));
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
	if (c->splice) {
		uint32_t d;
		if (parse_u32("splice", c->splice, 0, 1, &d))
			return -1;
		o->splice = (int)d;
	}
	o->foreground = c->foreground || c->debug;
	o->debug = c->debug;
	return 0;
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
				: !strncmp(argv[i], "-o", 2)	       ? argv[i] + 2
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

int sfs_cli_parse(int argc, char *argv[], struct fuse_args *args, struct sfs_cli *c)
{
	memset(c, 0, sizeof(*c));
	if (check_tile_commas(argc, argv) < 0)
		return -1;
	return fuse_opt_parse(args, c, cli_spec, cli_proc) == -1 ? -1 : 0;
}

void sfs_cli_free(struct sfs_cli *c)
{
	for (int k = 0; k < c->npos; k++)
		free(c->pos[k]);
	free(c->cache);
	free(c->prefetch);
	free(c->prealloc);
	free(c->epochs);
	free(c->seed);
	free(c->window);
	free(c->batch);
	free(c->ranks);
	free(c->workers);
	free(c->direct);
	free(c->cachedir);
	free(c->kopen);
	free(c->push);
	free(c->splice);
	free(c->tile);
	free(c->fit);
	free(c->background);
	free(c->log);
	free(c->orders);
}
