/*
 * error.h - how common/ reports a failure: a negative errno or SPRITE_E*
 * code as the return value, and a message naming what is wrong in a
 * caller's buffer of SPRITE_ERR_MAX bytes.
 *
 * The SPRITE_E* codes extend errno for format problems; sprite_strerror
 * names them (and any errno value) for a failure whose err stayed empty.
 * sprite_fail is the one way library code fills err:
 *   return sprite_fail(err, -EINVAL, "%s: bad header", path);
 */
#ifndef SPRITE_ERROR_H
#define SPRITE_ERROR_H

#define SPRITE_ERR_MAX 256 /* bytes of an error message buffer */

/* Error codes beyond errno for format problems. */
#define SPRITE_EBADMAGIC 1000 /* not a store / not a batch file */
#define SPRITE_EVERSION	 1001 /* version newer than this reader */
#define SPRITE_ECORRUPT	 1002 /* a field is out of range / inconsistent */
#define SPRITE_ECHECKSUM 1003 /* a checksum does not match */
#define SPRITE_ETRUNC	 1004 /* file shorter than it claims */

/*
 * A short text for err (positive): the SPRITE_E* codes above by name, any
 * other code as strerror(err) gives it. For when a failure has no message of
 * its own (an empty err buffer).
 */
const char *sprite_strerror(int err);

/* Format a message into err (SPRITE_ERR_MAX bytes); NULL err: nothing. */
void sprite_seterr(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * The same, returning rc: `return sprite_fail(err, -EINVAL, "%s: bad header", path);`.
 * rc is a negative errno (or a negative SPRITE_E* code), passed through as is.
 */
int sprite_fail(char *err, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
