/*
 * npy.h - the header of a NumPy .npy file, as a spritefs mount serves
 * <split>/images.npy and labels.npy (private to trainer/).
 *
 * Only what hntrain reads is accepted: versions 1-3, a C-ordered array of a
 * little-endian (or byte-sized) integer type of 1, 2, 4 or 8 bytes, of 1 to
 * 4 dimensions. The file is hostile input: every length is checked against
 * the file's size before it is used, so a header that passes promises that
 * data_off + items * itemsize bytes are in the file.
 */
#ifndef HN_NPY_H
#define HN_NPY_H

#include <stdint.h>

struct hn_npy {
	uint64_t shape[4];
	int ndim;	   /* 1-4 */
	int itemsize;	   /* 1, 2, 4 or 8 */
	int is_signed;	   /* 'i' rather than 'u' */
	uint64_t data_off; /* where the array begins */
};

/*
 * Read and check the header of the .npy file open at fd (path for
 * messages). 0, or -errno with "PATH: what" in err (HN_ERR_MAX bytes): an
 * I/O error as "PATH: strerror", anything malformed -EINVAL.
 */
int hn_npy_read_header(int fd, const char *path, struct hn_npy *h, char *err);

#endif
