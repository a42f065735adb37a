/*
 * safe_open.c - the one place where files are created, appended to and opened
 * for reading by name on behalf of a user (contract in safe_open.h).
 *
 * O_TMPFILE plus linkat would avoid the temporary's name altogether, but
 * linkat cannot replace an existing file, so a rename is needed anyway, and
 * not every file system has O_TMPFILE; a name made with O_EXCL|O_NOFOLLOW and
 * a random fallback is as safe and works everywhere. The predictable first
 * name ("NAME.tmp.<pid>") is kept because people and scripts look for it
 * after an interrupted write.
 */
#include "common/safe_open.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

#define RANDOM_TRIES 16

/* path split into its folder (copied into dir, cap bytes) and its last name. */
static int split_path(const char *path, char *dir, size_t cap, const char **name)
{
	size_t n = strlen(path);
	if (n == 0 || n >= cap)
		return n ? -ENAMETOOLONG : -ENOENT;
	memcpy(dir, path, n + 1);
	char *slash = strrchr(dir, '/');
	if (!slash) {
		*name = path;
		strcpy(dir, ".");
	} else {
		*name = path + (slash - dir) + 1;
		if (slash == dir)
			dir[1] = 0;
		else
			*slash = 0;
	}
	if (!**name || !strcmp(*name, ".") || !strcmp(*name, ".."))
		return -EISDIR;
	return 0;
}

/* The folder fd (path dir) may hold files we write: not writable by all unless sticky. */
static int check_dirfd(int fd, const char *dir, char *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return sprite_fail(err, -errno, "folder %s: %s", dir, strerror(errno));
	if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
		return sprite_fail(err, -EPERM,
				   "folder %s is writable by every user and not sticky: anyone "
				   "could replace a file written there; write elsewhere, or make "
				   "it sticky (chmod +t)",
				   dir);
	return 0;
}

/* The pid in "NAME.tmp.<pid>" or "NAME.tmp.<pid>.<hex>" after the ".tmp." at t, or 0. */
static long tmp_pid(const char *t)
{
	long pid = 0;
	int digits = 0;
	for (; *t >= '0' && *t <= '9'; t++) {
		if (++digits > 9)
			return 0;
		pid = pid * 10 + (*t - '0');
	}
	if (!digits)
		return 0;
	if (*t == '.') {
		size_t hex = strspn(t + 1, "0123456789abcdef");
		if (hex != 16 || t[17])
			return 0;
	} else if (*t) {
		return 0;
	}
	return pid;
}

/*
 * The temporaries of name (NULL: of any name ending in suffix, "" for any)
 * in dfd whose writer no longer runs, removed; sprite_outfile_sweep and
 * sprite_outfile_sweep_suffix.
 */
static int sweep(int dfd, const char *name, const char *suffix)
{
	char pat[NAME_MAX + 8];
	if (!name && (size_t)snprintf(pat, sizeof pat, "%s.tmp.", suffix) >= sizeof pat)
		return -ENAMETOOLONG;
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return -e;
	}
	size_t nl = name ? strlen(name) : 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		const char *t;
		if (name)
			t = !strncmp(de->d_name, name, nl) && !strncmp(de->d_name + nl, ".tmp.", 5)
				    ? de->d_name + nl + 5
				    : NULL;
		else if ((t = strstr(de->d_name, pat)) && t != de->d_name)
			t += strlen(pat);
		else
			t = NULL;
		long pid = t ? tmp_pid(t) : 0;
		/*
		 * kill(pid, 0): EPERM means it runs as another user. A pid reused
		 * since then keeps the file until a later sweep. A writer in
		 * another pid namespace would look dead: only our own regular
		 * files go (not a link, not another user's in a shared /tmp), so
		 * at worst our own unfinished temporary.
		 */
		if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode) || st.st_uid != geteuid())
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) == 0)
			n++;
	}
	closedir(d);
	return n;
}

int sprite_outfile_sweep(int dfd, const char *name)
{
	return sweep(dfd, name, "");
}

int sprite_outfile_sweep_suffix(int dfd, const char *suffix)
{
	return sweep(dfd, NULL, suffix);
}

/* 64 random bits; getrandom, else the clock and a counter (names only need to differ). */
static uint64_t random64(void)
{
	static uint64_t counter;
	uint64_t v;
	if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v)
		return v;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	v = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec ^
	    __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) * 0xbf58476d1ce4e5b9ull;
	return v ^ ((uint64_t)getpid() << 32);
}

int sprite_outfile_openat(struct sprite_outfile *o, int dirfd, const char *dir, const char *name,
			  mode_t mode, unsigned flags, char *err)
{
	memset(o, 0, sizeof *o);
	o->fd = -1;
	o->dirfd = dirfd;
	o->flags = flags;
	size_t nl = strlen(name);
	/* ".tmp." + 10 digits + "." + 16 hex */
	if (nl + 32 > NAME_MAX || strchr(name, '/'))
		return sprite_fail(err, -ENAMETOOLONG,
				   "%s/%s: name too long for a temporary beside it", dir, name);
	memcpy(o->name, name, nl + 1);
	int r = check_dirfd(dirfd, dir, err);
	if (r < 0)
		return r;
	if (!(flags & SPRITE_OUT_NOSWEEP))
		sprite_outfile_sweep(dirfd, name);
	int e = 0;
	for (int i = 0; i <= RANDOM_TRIES; i++) {
		if (i == 0)
			snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%ld", name, (long)getpid());
		else
			snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%ld.%016llx", name, (long)getpid(),
				 (unsigned long long)random64());
		o->fd = openat(dirfd, o->tmp,
			       O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode);
		e = errno;
		if (o->fd >= 0 || e != EEXIST)
			break;
	}
	if (o->fd < 0) {
		r = sprite_fail(err, -e, "creating %s/%s: %s", dir, o->tmp, strerror(e));
		o->tmp[0] = 0; /* not ours: an abort must not remove it */
		return r;
	}
	if ((size_t)snprintf(o->tmp_path, sizeof o->tmp_path, "%s/%s", dir, o->tmp) >=
	    sizeof o->tmp_path) {
		sprite_outfile_abort(o);
		return sprite_fail(err, -ENAMETOOLONG, "%s/%s: path too long", dir, name);
	}
	return 0;
}

int sprite_outfile_open(struct sprite_outfile *o, const char *path, mode_t mode, unsigned flags,
			char *err)
{
	char dir[PATH_MAX];
	const char *name;
	memset(o, 0, sizeof *o);
	o->fd = o->dirfd = -1;
	int r = split_path(path, dir, sizeof dir, &name);
	if (r == -EISDIR)
		return sprite_fail(err, r, "%s: not a file name", path);
	if (r < 0)
		return sprite_fail(err, r, "%s: %s", path, strerror(-r));
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sprite_fail(err, -errno, "folder %s: %s", dir, strerror(errno));
	r = sprite_outfile_openat(o, dfd, dir, name, mode, flags, err);
	if (r < 0) {
		close(dfd);
		o->dirfd = -1;
		return r;
	}
	o->own_dir = 1;
	return 0;
}

static void release(struct sprite_outfile *o)
{
	if (o->fd >= 0)
		close(o->fd);
	if (o->own_dir && o->dirfd >= 0)
		close(o->dirfd);
	o->fd = o->dirfd = -1;
	o->own_dir = 0;
	o->tmp[0] = 0;
}

/* Whether the temporary's name still leads to the file (dev, ino) we created. */
static int still_ours(const struct sprite_outfile *o, const struct stat *mine)
{
	struct stat st;
	return fstatat(o->dirfd, o->tmp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       st.st_dev == mine->st_dev && st.st_ino == mine->st_ino;
}

void sprite_outfile_abort(struct sprite_outfile *o)
{
	if (!o || o->dirfd < 0)
		return;
	struct stat mine;
	if (o->tmp[0] && o->fd >= 0 && fstat(o->fd, &mine) == 0 && still_ours(o, &mine))
		unlinkat(o->dirfd, o->tmp, 0);
	else if (o->tmp[0] && o->fd < 0)
		unlinkat(o->dirfd, o->tmp, 0); /* closed by the caller: the name is ours */
	release(o);
}

int sprite_outfile_commit(struct sprite_outfile *o, char *err)
{
	struct stat mine;
	int r = 0;
	if (o->dirfd < 0 || !o->tmp[0])
		return sprite_fail(err, -EBADF, "no file being written");
	if (o->fd >= 0) {
		if (!(o->flags & SPRITE_OUT_NOSYNC) && fsync(o->fd) < 0)
			r = sprite_fail(err, -errno, "%s: fsync: %s", o->tmp_path, strerror(errno));
		if (r == 0 && fstat(o->fd, &mine) < 0)
			r = sprite_fail(err, -errno, "%s: %s", o->tmp_path, strerror(errno));
		if (r == 0 && !still_ours(o, &mine))
			r = sprite_fail(err, -EEXIST,
					"%s was replaced while it was written: not renamed",
					o->tmp_path);
		if (r < 0) {
			sprite_outfile_abort(o);
			return r;
		}
		int c = close(o->fd);
		o->fd = -1;
		if (c < 0) {
			r = sprite_fail(err, -errno, "%s: %s", o->tmp_path, strerror(errno));
			sprite_outfile_abort(o);
			return r;
		}
	}
	if (renameat(o->dirfd, o->tmp, o->dirfd, o->name) < 0) {
		r = sprite_fail(err, -errno, "renaming %s: %s", o->tmp_path, strerror(errno));
		sprite_outfile_abort(o);
		return r;
	}
	/* The file is in place; a failed folder fsync only weakens durability. */
	if (!(o->flags & SPRITE_OUT_NOSYNC))
		fsync(o->dirfd);
	o->tmp[0] = 0;
	release(o);
	return 0;
}

int sprite_outfile_check(const char *path, char *err)
{
	char dir[PATH_MAX];
	const char *name;
	int r = split_path(path, dir, sizeof dir, &name);
	struct stat st;
	if (r == -EISDIR || (r == 0 && stat(path, &st) == 0 && S_ISDIR(st.st_mode)))
		return sprite_fail(err, -EISDIR, "%s is a folder; give a file name", path);
	if (r < 0)
		return sprite_fail(err, r, "%s: %s", path, strerror(-r));
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return sprite_fail(err, -errno, "folder %s: %s", dir, strerror(errno));
	r = check_dirfd(fd, dir, err);
	close(fd);
	if (r == 0 && access(dir, W_OK | X_OK) < 0)
		r = sprite_fail(err, -errno, "folder %s: cannot create files there: %s", dir,
				strerror(errno));
	return r;
}

/* A folder only its owner, root or we, may change: a link in it was not planted by another user. */
static int trusted_dirfd(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && (st.st_uid == 0 || st.st_uid == geteuid()) &&
	       !(st.st_mode & (S_IWGRP | S_IWOTH));
}

int sprite_open_append(const char *path, char *err)
{
	char dir[PATH_MAX];
	const char *name;
	int r = split_path(path, dir, sizeof dir, &name);
	if (r < 0)
		return sprite_fail(err, r, "%s: %s", path,
				   r == -EISDIR ? "not a file name" : strerror(-r));
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sprite_fail(err, -errno, "folder %s: %s", dir, strerror(errno));
	const int flags = O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
	r = check_dirfd(dfd, dir, err);
	int fd = r < 0 ? -1 : openat(dfd, name, flags | O_CREAT | O_NOFOLLOW, 0644);
	int e = errno, linked = 0;
	if (fd < 0 && r == 0 && e == ELOOP && trusted_dirfd(dfd)) {
		/* /dev/stderr and the like: a link nobody else could plant, to no regular file */
		fd = openat(dfd, name, flags);
		e = errno;
		linked = 1;
	}
	close(dfd);
	if (r < 0)
		return r;
	if (fd < 0)
		return sprite_fail(err, -e, "%s: %s", path,
				   e == ELOOP ? "a symbolic link: a log is not written through one"
				   : e == ENXIO ? "a FIFO nobody reads"
						: strerror(e));
	struct stat st;
	const char *bad = fstat(fd, &st) < 0 ? strerror(errno)
			  : S_ISREG(st.st_mode) && linked
				  ? "a symbolic link: a log is not written through one"
			  : S_ISREG(st.st_mode) && st.st_nlink != 1
				  ? "has other names (hard links): not appended to"
			  : !S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode)
				  ? "not a file, a FIFO or a terminal"
				  : NULL;
	if (bad) {
		close(fd);
		return sprite_fail(err, -EINVAL, "%s: %s", path, bad);
	}
	if (fcntl(fd, F_SETFL, O_APPEND) < 0) {
		e = errno;
		close(fd);
		return sprite_fail(err, -e, "%s: %s", path, strerror(e));
	}
	return fd;
}

int sprite_open_regular(const char *path, char *err)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return sprite_fail(err, -errno, "%s: %s", path, strerror(errno));
	struct stat st;
	int ok = fstat(fd, &st) == 0;
	if (!ok || !S_ISREG(st.st_mode)) {
		int fifo = ok && S_ISFIFO(st.st_mode);
		close(fd);
		return sprite_fail(err, -EINVAL, "%s: not a regular file%s", path,
				   fifo ? " (a FIFO)" : "");
	}
	if (fcntl(fd, F_SETFL, 0) < 0) {
		int e = errno;
		close(fd);
		return sprite_fail(err, -e, "%s: %s", path, strerror(e));
	}
	return fd;
}
