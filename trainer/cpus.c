/*
 * cpus.c - CPU lists ("0-3,6", as taskset and /sys write them) and the
 * pinning of threads to a set of CPUs, for --affinity and
 * --loader-affinity.
 *
 * The maths threads of OpenBLAS exist before the backend is set up, so
 * pinning the calling thread is not enough: hn_cpus_pin_all pins every
 * thread of the process, found in /proc/self/task.
 */
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "trainer/cpus.h"

/* "0-3,6" into a CPU set; -EINVAL on a malformed list. */
int hn_cpus_parse(const char *s, cpu_set_t *set)
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
void hn_cpus_format(const cpu_set_t *set, char *buf, size_t cap)
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

/* Pin every thread that exists now (this one and the maths pool) to set. */
int hn_cpus_pin_all(const cpu_set_t *set)
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
