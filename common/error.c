/*
 * error.c - the messages of common/'s failures (contract in error.h): names
 * for the error codes spritefs adds to errno's (SPRITE_E*), so that a
 * message built from a bare code reads as well as one built from an errno
 * value, and sprite_fail, which fills a caller's err buffer.
 *
 * Library functions return these codes negated like -errno; a caller that
 * has no message of the library's (err empty) prints sprite_strerror(-r),
 * which falls back to strerror for every other code.
 */
#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *sprite_strerror(int err)
{
	switch (err) {
	case SPRITE_EBADMAGIC:
		return "not a sprite store or batch file (bad magic)";
	case SPRITE_EVERSION:
		return "format version newer than this program reads";
	case SPRITE_ECORRUPT:
		return "corrupt data (a field out of range or inconsistent)";
	case SPRITE_ECHECKSUM:
		return "checksum mismatch";
	case SPRITE_ETRUNC:
		return "file shorter than it claims (truncated)";
	default:
		return strerror(err);
	}
}

void sprite_seterr(char *err, const char *fmt, ...)
{
	if (!err)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, SPRITE_ERR_MAX, fmt, ap);
	va_end(ap);
}

int sprite_fail(char *err, int rc, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, SPRITE_ERR_MAX, fmt, ap);
		va_end(ap);
	}
	return rc;
}
