/*
 * cpus.h - CPU lists and pinning (cpus.c, private to trainer/): --affinity
 * and --loader-affinity.
 */
#ifndef HN_CPUS_H
#define HN_CPUS_H

#include <sched.h>
#include <stddef.h>

/* "0-3,6" into a CPU set: 0, or -EINVAL on a malformed or empty list. */
int hn_cpus_parse(const char *s, cpu_set_t *set);
/* A CPU set as a list, "0-3,6", cut at cap bytes. */
void hn_cpus_format(const cpu_set_t *set, char *buf, size_t cap);
/* Pin every thread that exists now (this one and the maths pool) to set: 0 or -errno. */
int hn_cpus_pin_all(const cpu_set_t *set);

#endif
