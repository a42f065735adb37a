/*
 * gemm_peak.h - --gemm-peak's measure (gemm_peak.c, private to trainer/): the
 * SGEMM rate that bounds the training GFLOP/s the log reports.
 */
#ifndef HN_GEMM_PEAK_H
#define HN_GEMM_PEAK_H

#include "trainer/backend.h"

/*
 * gemm_peak.c, --gemm-peak: SGEMM GFLOP/s of `threads` threads (1..64),
 * each multiplying its own 2048 x 2048 matrices at once, as the cpu
 * backend's team does. 0, or -errno with err set.
 */
int hn_gemm_peak(int threads, double *gflops, char *err);

#endif
