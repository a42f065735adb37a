/*
 * options.h - spritefs's command line (options.c), for main.c.
 *
 * The options as given (strings, checked later) and the four calls main
 * makes with them: parse argv, print the usage, turn the strings into
 * struct sfs_opts (every value checked, with the message to fix it), and
 * free them.
 */
#ifndef SFS_OPTIONS_H
#define SFS_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

struct fuse_args;
struct sfs_opts;

/* The command line as given: -o values as strings, the positional arguments. */
struct sfs_cli {
	char *cache, *prealloc, *prefetch, *epochs, *seed, *window, *batch, *workers, *direct;
	char *cachedir, *kopen, *push, *splice, *tile, *fit, *background;
	char *ranks, *log, *orders;
	int allow_other;
	int foreground, debug, help, version;
	char *pos[3];
	int npos;
};

/*
 * Parse argv into c (zeroed first) and args (what FUSE gets): 0, or -1 after
 * saying why on stderr (exit status 2). Free c with sfs_cli_free() in any case.
 */
int sfs_cli_parse(int argc, char *argv[], struct fuse_args *args, struct sfs_cli *c);
void sfs_cli_free(struct sfs_cli *c);
/* spritefs -h */
void sfs_usage(FILE *f);
/* The options in o, defaults for those not given: 0, or -1 after saying why. */
int sfs_cli_apply(struct sfs_cli *c, struct sfs_opts *o);
/* Physical memory (4 GiB when it cannot be read). */
uint64_t sfs_ram_bytes(void);

#endif
