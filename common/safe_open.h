/*
 * safe_open.h - how the project opens the files it writes, and the files it
 * is only told to read, on a machine it shares with users who may be
 * hostile. spritefs and spritefs-pack run as root; hntrain often does too.
 *
 * Writing (every store, cache store, checkpoint, exported file):
 *   - the target's folder is opened once and every later step is relative
 *     to that descriptor, so a folder swapped for a link afterwards changes
 *     nothing;
 *   - a folder that every user may write and that is not sticky is refused:
 *     anyone could replace the finished file there;
 *   - the data goes to a temporary "NAME.tmp.<pid>" beside NAME, created with
 *     O_CREAT|O_EXCL|O_NOFOLLOW: a link or file planted under that name is
 *     never opened; the writer then takes "NAME.tmp.<pid>.<16 random hex>"
 *     instead (O_EXCL again), so a planted name only costs another name;
 *   - the temporary is fsynced and renamed over NAME (a link planted at NAME
 *     is replaced, never followed), and the folder fsynced;
 *   - temporaries of NAME left by a writer that died (its pid no longer runs,
 *     kill -9, power loss) are removed first, if they are regular files of
 *     ours; other users' files and links are left alone.
 * Logs are appended to, so they are opened in place instead: without
 * following a link another user could have planted, and only when the file
 * is a regular file with one name (or a FIFO, a terminal: /dev/stderr).
 *
 * Reading a file named on a command line (--verify, --info, --resume, a
 * store to mount): opened without blocking and refused unless it is a
 * regular file, so that a FIFO fails at once instead of hanging.
 *
 * Functions return >= 0 or -errno, with a message naming the path in err
 * (SPRITE_ERR_MAX bytes; NULL: none).
 */
#ifndef SPRITE_SAFE_OPEN_H
#define SPRITE_SAFE_OPEN_H

#include <limits.h>
#include <sys/types.h>

#define SPRITE_OUT_NOSYNC  1u /* no fsync of file or folder (many small files: --export) */
#define SPRITE_OUT_NOSWEEP 2u /* leave stale temporaries alone (the caller sweeps once) */

/* A file being written: a temporary in the target's folder until commit. */
struct sprite_outfile {
	int dirfd;		 /* the target's folder */
	int fd;			 /* the temporary, open read-write; -1 when none */
	int own_dir;		 /* dirfd is closed with the outfile */
	unsigned flags;		 /* SPRITE_OUT_* */
	char name[NAME_MAX + 1]; /* the final name in the folder */
	char tmp[NAME_MAX + 1];	 /* the temporary's name in the folder */
	char tmp_path[PATH_MAX]; /* the folder's path + tmp: messages, signal handlers */
};

/*
 * Start writing path: its folder opened and checked, stale temporaries of
 * its name removed (unless SPRITE_OUT_NOSWEEP), the temporary created with
 * mode (umask applies). On success o->fd is open for reading and writing;
 * end with sprite_outfile_commit or sprite_outfile_abort. On failure
 * nothing is left open or created.
 */
int sprite_outfile_open(struct sprite_outfile *o, const char *path, mode_t mode, unsigned flags,
			char *err);
/*
 * The same for name inside the open folder dirfd (borrowed, not closed);
 * dir is its path, for messages and o->tmp_path.
 */
int sprite_outfile_openat(struct sprite_outfile *o, int dirfd, const char *dir, const char *name,
			  mode_t mode, unsigned flags, char *err);
/*
 * Finish: fsync, make sure the temporary is still the file we wrote (not
 * swapped), close it, rename it over the final name, fsync the folder.
 * o->fd may have been closed by the caller already (set it to -1). On
 * failure the temporary is removed. Either way o is released.
 */
int sprite_outfile_commit(struct sprite_outfile *o, char *err);
/* Give up: the temporary removed, o released. Safe on a released o. */
void sprite_outfile_abort(struct sprite_outfile *o);

/*
 * Remove the temporaries of name in dirfd ("NAME.tmp.<pid>" and
 * "NAME.tmp.<pid>.<hex>"; any name when name is NULL) whose writer no longer
 * runs, and that are regular files owned by our effective user. Returns how
 * many were removed, or -errno.
 */
int sprite_outfile_sweep(int dirfd, const char *name);
/*
 * The same for the temporaries of every name that ends in suffix
 * ("X.sprites.tmp.<pid>" for ".sprites"; X not empty): a cache folder's.
 */
int sprite_outfile_sweep_suffix(int dirfd, const char *suffix);

/*
 * The checks sprite_outfile_open makes on path's folder, made early (before
 * a long run): it exists, is a folder we may create files in, and is not
 * writable by every user unless sticky; path itself is not a folder.
 */
int sprite_outfile_check(const char *path, char *err);

/*
 * Open path for appending (a log), creating it with mode 0644 if missing, in a
 * folder sprite_outfile_check accepts: a regular file with one name (a hard
 * link to another file is refused), a FIFO someone reads, or a character
 * device (a terminal, /dev/null). Not through a symbolic link, except one in
 * a folder that only root or we may change (/dev/stderr) and that leads to no
 * regular file. Returns the descriptor (O_APPEND, close-on-exec).
 */
int sprite_open_append(const char *path, char *err);

/*
 * Open path read-only (close-on-exec) for a reader that needs a regular file:
 * without blocking on a FIFO or a device, refused with -EINVAL unless
 * regular. Links are followed: the caller named the file. Returns the
 * descriptor, in blocking mode.
 */
int sprite_open_regular(const char *path, char *err);

#endif
