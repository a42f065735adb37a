/*
 * log.c - the JSON-lines log (--log FILE): one object per epoch and a final
 * object with "final": true and the weights hash.
 *
 * One line per record, flushed at once, so that `tail -f`, jq and a plot
 * script can read a run while it goes. Numbers that are not finite are
 * written as null (JSON has no NaN). docs/HNTRAIN.md lists the fields.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "common/json.h"
#include "trainer/log.h"

void hn_log_num(FILE *f, const char *key, double v, int last)
{
	if (isfinite(v))
		fprintf(f, "\"%s\": %.6g%s", key, v, last ? "" : ", ");
	else
		fprintf(f, "\"%s\": null%s", key, last ? "" : ", ");
}

double hn_log_ratio(double a, double b)
{
	return b > 0 ? a / b : NAN;
}

/* Each rank's compute, data wait and comm, when there is more than one. */
static void rank_times(FILE *f, int n, const struct hn_rank_times *r)
{
	if (n <= 1 || !r)
		return;
	fputs("\"ranks\": [", f);
	for (int i = 0; i < n; i++) {
		fputs("{", f);
		hn_log_num(f, "compute_s", r[i].compute_s, 0);
		hn_log_num(f, "data_wait_s", r[i].data_wait_s, 0);
		hn_log_num(f, "comm_s", r[i].comm_s, 0);
		hn_log_num(f, "loader_cpu_s", r[i].loader_cpu_s, 1);
		fputs(i + 1 < n ? "}, " : "}], ", f);
	}
}

/* The split of a wall time that an epoch's record and the final one both give. */
static void time_split(FILE *f, double wall, double compute, double wait, double augment,
		       double lcpu, double comm, int nranks)
{
	hn_log_num(f, "wall_s", wall, 0);
	hn_log_num(f, "compute_s", compute, 0);
	hn_log_num(f, "data_wait_s", wait, 0);
	hn_log_num(f, "data_wait_share", hn_log_ratio(wait, wall), 0);
	hn_log_num(f, "augment_s", augment, 0);
	hn_log_num(f, "augment_share", hn_log_ratio(augment, wall), 0);
	hn_log_num(f, "loader_cpu_s", lcpu, 0);
	hn_log_num(f, "loader_cpu_share", hn_log_ratio(lcpu, wall), 0);
	hn_log_num(f, "comm_s", comm, 0);
	hn_log_num(f, "comm_share", hn_log_ratio(comm, wall), 0);
	fprintf(f, "\"nranks\": %d, ", nranks > 0 ? nranks : 1);
}

int hn_log_epoch(FILE *f, const struct hn_epoch_stats *s)
{
	double sps = hn_log_ratio((double)s->samples, s->wall_s);
	fprintf(f, "{\"epoch\": %" PRIu64 ", \"samples\": %" PRIu64 ", \"steps\": %" PRIu64 ", ",
		s->epoch, s->samples, s->steps);
	time_split(f, s->wall_s, s->compute_s, s->data_wait_s, s->augment_s, s->loader_cpu_s,
		   s->comm_s, s->nranks);
	rank_times(f, s->nranks, s->rank);
	hn_log_num(f, "samples_per_s", sps, 0);
	hn_log_num(f, "train_loss", s->train_loss, 0);
	hn_log_num(f, "train_acc", s->train_acc, 0);
	if (s->test_acc >= 0) {
		hn_log_num(f, "test_loss", s->test_loss, 0);
		hn_log_num(f, "test_acc", s->test_acc, 0);
	} else {
		fputs("\"test_loss\": null, \"test_acc\": null, ", f);
	}
	hn_log_num(f, "eval_s", s->eval_s, 0);
	hn_log_num(f, "lr", s->lr, 1);
	fputs("}\n", f);
	return fflush(f) == 0 ? 0 : -1;
}

int hn_log_final(FILE *f, const struct hn_final_stats *s)
{
	fprintf(f,
		"{\"final\": true, \"weights_xxh3\": \"%016" PRIx64 "\", \"epochs\": %" PRIu64
		", \"steps\": %" PRIu64 ", \"samples\": %" PRIu64 ", \"run_epochs\": %" PRIu64
		", \"run_steps\": %" PRIu64 ", ",
		s->weights_xxh3, s->epochs, s->steps, s->samples, s->run_epochs, s->run_steps);
	time_split(f, s->wall_s, s->compute_s, s->data_wait_s, s->augment_s, s->loader_cpu_s,
		   s->comm_s, s->nranks);
	hn_log_num(f, "samples_per_s", hn_log_ratio((double)s->samples, s->wall_s), 0);
	hn_log_num(f, "flops_per_sample", s->flops_per_sample, 0);
	hn_log_num(f, "compute_gflops",
		   hn_log_ratio(s->flops_per_sample * (double)s->samples / 1e9, s->compute_s), 0);
	if (s->test_acc >= 0)
		hn_log_num(f, "test_acc", s->test_acc, 0);
	else
		fputs("\"test_acc\": null, ", f);
	fputs("\"source\": ", f);
	sprite_json_fputs(f, s->source);
	fputs(", \"device\": ", f);
	sprite_json_fputs(f, s->device);
	fputs(", \"model\": ", f);
	sprite_json_fputs(f, s->model);
	fputs(", \"reached\": {", f);
	for (int k = 0; k < HN_NREACH; k++) {
		fprintf(f, "%s\"%.2f\": ", k ? ", " : "", hn_reach_acc[k]);
		if (s->reach_epoch && s->reach_epoch[k])
			fprintf(f, "{\"epoch\": %" PRIu64 ", \"wall_s\": %.3f}", s->reach_epoch[k],
				s->reach_s[k]);
		else
			fputs("null", f);
	}
	fputc('}', f);
	fprintf(f,
		", \"params\": %" PRIu64 ", \"skipped_files\": %" PRIu64
		", \"skipped_sheets\": %" PRIu64 ", \"skipped_sheet_samples\": %" PRIu64
		", \"ignored_entries\": %" PRIu64 "}\n",
		s->nparams, s->skipped_files, s->bad_sheets, s->bad_sheet_samples,
		s->ignored_entries);
	return fflush(f) == 0 ? 0 : -1;
}
