/*
 * vec4.h - four floats as one gcc/clang vector, and their unaligned loads
 * and stores, for the CPU kernels vectorised by hand (norm.c, wino4.c).
 * Private to trainer/.
 */
#ifndef HN_VEC4_H
#define HN_VEC4_H

#include <string.h>

typedef float v4f __attribute__((vector_size(16)));
typedef int v4si __attribute__((vector_size(16)));

static inline v4f ld4(const float *p)
{
	v4f v;
	memcpy(&v, p, sizeof v);
	return v;
}

static inline void st4(float *p, v4f v)
{
	memcpy(p, &v, sizeof v);
}

#endif
