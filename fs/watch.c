/*
 * watch.c - notice, while mounted, that the store file was replaced at its
 * path (a new pack renamed over it, the file removed) or written to in place.
 *
 * The daemon keeps serving the store it opened: that file stays whole under
 * its open descriptor however its name moves, and its sheets were checked
 * against the index read at mount. A replacement therefore changes nothing
 * served, but whoever replaced it expects the mount to show the new data set
 * and it will not: the daemon says so once, naming the path and the remedy
 * (unmount and mount again). A write into the same file is worse (its sheets
 * then fail their checksums, EIO): said the same way.
 *
 * One thread sleeps in poll() on an inotify watch of the store's folder, so
 * nothing runs on the FUSE request path; a failure to watch (no inotify, the
 * watch limit reached) is logged and the mount goes on without it.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/sfs.h"

struct sfs_watch {
	int ifd, efd; /* inotify; eventfd that stops the thread */
	pthread_t tid;
	const char *path;	 /* fs->store_path */
	char name[NAME_MAX + 1]; /* its last part, as inotify names it */
	uint64_t dev, ino;	 /* the store as opened */
	struct timespec mtime;
	int said_replaced, said_written;
};

/* One look at the path after an event that named it. */
static void look(struct sfs_watch *w, uint32_t mask)
{
	struct stat st;
	int gone = stat(w->path, &st) < 0;
	if ((gone || st.st_dev != w->dev || st.st_ino != w->ino) && !w->said_replaced) {
		w->said_replaced = 1;
		sfs_log("spritefs: %s was %s since the mount; this mount goes on serving the "
			"store it opened: unmount it (fusermount3 -u) and mount again to serve "
			"the new one",
			w->path, gone ? "removed or renamed" : "replaced by another file");
	} else if (!gone && st.st_ino == w->ino && (mask & (IN_MODIFY | IN_CLOSE_WRITE)) &&
		   !w->said_written) {
		w->said_written = 1;
		sfs_log("spritefs: %s was written to in place since the mount; sheets that no "
			"longer match their checksums give EIO: unmount it (fusermount3 -u) and "
			"mount again",
			w->path);
	}
}

static void *watch_main(void *arg)
{
	struct sfs_watch *w = arg;
	/* events are at most sizeof(struct inotify_event) + NAME_MAX + 1 each */
	char buf[16 * (sizeof(struct inotify_event) + NAME_MAX + 1)]
		__attribute__((aligned(__alignof__(struct inotify_event))));
	struct pollfd p[2] = {{w->ifd, POLLIN, 0}, {w->efd, POLLIN, 0}};
	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		ssize_t n = read(w->ifd, buf, sizeof buf);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			break;
		}
		for (char *q = buf; q < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)q;
			if ((ev->len && !strcmp(ev->name, w->name)) ||
			    (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)))
				look(w, ev->mask);
			q += sizeof *ev + ev->len;
		}
		if (w->said_replaced && w->said_written)
			break; /* nothing left to say */
	}
	return NULL;
}

static void watch_free(struct sfs_watch *w)
{
	if (w->ifd >= 0)
		close(w->ifd);
	if (w->efd >= 0)
		close(w->efd);
	free(w);
}

void sfs_watch_start(struct sfs *fs)
{
	struct sfs_watch *w = calloc(1, sizeof *w);
	if (!w)
		return;
	w->ifd = w->efd = -1;
	w->path = fs->store_path;
	w->dev = fs->store_dev;
	w->ino = fs->store_ino;
	w->mtime = fs->mtime;
	char dir[sizeof fs->store_path];
	snprintf(dir, sizeof dir, "%s", fs->store_path);
	char *slash = strrchr(dir, '/');
	const char *name = slash ? slash + 1 : dir;
	size_t nl = strnlen(name, NAME_MAX);
	memcpy(w->name, name, nl);
	w->name[nl] = 0;
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else if (slash == dir)
		dir[1] = 0;
	else
		*slash = 0;
	w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	w->efd = eventfd(0, EFD_CLOEXEC);
	const uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY |
			      IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
	if (w->ifd < 0 || w->efd < 0 || inotify_add_watch(w->ifd, dir, mask) < 0)
		goto fail;
	/*
	 * The mount was visible (and fuse_daemonize let the caller go) before
	 * this watch existed: a change made in that gap sent no event, so the
	 * path is looked at once, now that later changes are queued, against
	 * what was opened.
	 */
	struct stat st;
	if (stat(w->path, &st) < 0 || st.st_ino != w->ino || st.st_dev != w->dev)
		look(w, 0);
	else if (st.st_mtim.tv_sec != w->mtime.tv_sec || st.st_mtim.tv_nsec != w->mtime.tv_nsec)
		look(w, IN_MODIFY);
	if ((errno = pthread_create(&w->tid, NULL, watch_main, w)) != 0)
		goto fail;
	fs->watch = w;
	return;
fail:
	sfs_log("spritefs: %s: not watched for replacement: %s", fs->store_path, strerror(errno));
	watch_free(w);
}

void sfs_watch_stop(struct sfs *fs)
{
	struct sfs_watch *w = fs->watch;
	if (!w)
		return;
	uint64_t one = 1;
	if (write(w->efd, &one, sizeof one) != (ssize_t)sizeof one)
		pthread_cancel(w->tid); /* cannot happen with an eventfd; never hang on exit */
	pthread_join(w->tid, NULL);
	watch_free(w);
	fs->watch = NULL;
}
