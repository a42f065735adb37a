/*
 * log.c - the daemon's log: one line per event, from any thread.
 *
 * Log lines go to stderr, to syslog once the daemon has detached (stderr is
 * /dev/null then), and with -o log=FILE to that file too, each line with its
 * time, in one append write. Every part of the daemon logs and this file
 * calls none of them: it is the floor below the rest of fs/.
 */
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "common/safe_open.h"
#include "fs/sfs.h"

static int use_syslog;
static int log_fd = -1; /* -o log=FILE */

int sfs_log_open(const char *path, char *err)
{
	/* not through a link, only a regular file with one name (safe_open.h) */
	int fd = sprite_open_append(path, err);
	if (fd < 0)
		return fd;
	if (log_fd >= 0)
		close(log_fd);
	log_fd = fd;
	return 0;
}

void sfs_log_close(void)
{
	if (log_fd >= 0)
		close(log_fd);
	log_fd = -1;
}

void sfs_log_to_syslog(int on)
{
	if (on && !use_syslog)
		openlog("spritefs", LOG_PID, LOG_DAEMON);
	use_syslog = on;
}

void sfs_log(const char *fmt, ...)
{
	va_list ap;
	char line[1024];
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", line);
	if (use_syslog)
		syslog(LOG_ERR, "%s", line);
	if (log_fd >= 0) {
		/* 2026-11-25T02:41:07.123+0000 [pid] line */
		struct timespec ts;
		struct tm tm;
		char stamp[64], out[1200];
		clock_gettime(CLOCK_REALTIME, &ts);
		localtime_r(&ts.tv_sec, &tm);
		size_t k = strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
		char zone[8] = "";
		strftime(zone, sizeof zone, "%z", &tm);
		snprintf(stamp + k, sizeof stamp - k, ".%03ld%s", ts.tv_nsec / 1000000, zone);
		int n = snprintf(out, sizeof out, "%s [%d] %s\n", stamp, (int)getpid(), line);
		if (n > 0) {
			ssize_t w = write(log_fd, out,
					  (size_t)n < sizeof out ? (size_t)n : sizeof out - 1);
			(void)w; /* a full disk must not stop the daemon */
		}
	}
}
