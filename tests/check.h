/*
 * check.h - the assertion shared by the C unit tests.
 *
 * CHECK(cond, fmt, ...) prints the file, line, the failed condition and a
 * message, and counts the failure; the test keeps going so that one run shows
 * every failing case, and main() exits 1 when `failures` is non-zero.
 * FAIL(fmt, ...) is the same for a failure found without one condition.
 */
#ifndef SPRITE_TEST_CHECK_H
#define SPRITE_TEST_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "FAIL: " __VA_ARGS__);                                             \
		fputc('\n', stderr);                                                               \
		failures++;                                                                        \
	} while (0)

#endif
