/*
 * strerror.c - names for the error codes spritefs adds to errno's
 * (SPRITE_E*, store.h), so that a message built from a bare code reads as
 * well as one built from an errno value.
 *
 * Library functions return these negated like -errno; a caller that has no
 * message of the library's (err empty) prints sprite_strerror(-r), which
 * falls back to strerror for every other code.
 */
#include "common/store.h"

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
