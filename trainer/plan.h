/*
 * plan.h - --plan (plan.c, private to trainer/): the memory a run needs,
 * printed before any data is read past its header.
 */
#ifndef HN_PLAN_H
#define HN_PLAN_H

#include <stdint.h>
#include <stdio.h>

#include "trainer/backend.h"
#include "trainer/data.h"
#include "trainer/model.h"

struct hn_plan_input {
	const struct hn_model *model;
	const struct hn_source_info *data;
	const struct hn_optim *optim;
	int batch;
	const char *device;
	uint64_t backend_bytes; /* what the backend allocates (cpu), else 0 */
};
/* Print the memory plan; returns 0, or 1 when the data set does not fit in RAM. */
int hn_plan_print(FILE *f, const struct hn_plan_input *in);
/* MemAvailable from /proc/meminfo, bytes; -errno if unknown. */
int64_t hn_mem_available(void);

#endif
