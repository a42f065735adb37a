/*
 * folder.h - how an ImageFolder tree is read: its splits, its classes, the
 * order of its files, and what in it is not a sample.
 *
 * spritefs-pack (common/pack.c) and hntrain's image folder source
 * (trainer/source_folder.c) both list trees through this file, so that
 * sample i of a split read from the folder is sample i of the store packed
 * from it, and the same seed gives the same weights from either. The rule:
 *
 *   - names starting with '.' are left out everywhere, and the entries of
 *     every folder are taken in byte order of their names;
 *   - when a top folder named train, test, val, valid or validation holds
 *     folders, every top folder that holds folders is a split (named after
 *     it; "train" first, then the others in byte order) and the top folders
 *     that hold none are passed over; otherwise the class folders lie
 *     directly under the root and form the split "train";
 *   - the classes are the sorted union of the class folders of every split,
 *     a file's label the index of its class folder among them;
 *   - the files of a class folder are every visible regular file below it,
 *     depth first, files and folders merged by name (sprite_walk_files);
 *     whether a file decodes is for the reader to find out;
 *   - an entry beside the class folders (at the top, or in a split folder)
 *     is not in a class folder; one that is neither a file nor a folder (a
 *     dangling link, a FIFO) is "unreadable", for a strict reader to refuse;
 *   - symbolic links are followed only where they stay inside the tree (a
 *     split or class folder: inside the root; anything below a class folder:
 *     inside that class folder); the others are passed over and named
 *     (SPRITE_FOLDER_LINK_OUT, SPRITE_WALK_OUTSIDE), so that a tree packed by
 *     root cannot bring in a file its owner may not read.
 *
 * The listing is done in two steps so that each reader can tell what it
 * passes over in its own order: sprite_folder_list() reads the folders
 * above the class folders, sprite_folder_walk() the files of one split.
 * Functions return >= 0 or -errno with a message in err (paths escaped).
 */
#ifndef SPRITE_FOLDER_H
#define SPRITE_FOLDER_H

#include <stddef.h>
#include <stdint.h>

#define SPRITE_FOLDER_OUTSIDE	 "not in a class folder"
#define SPRITE_FOLDER_NO_CLASSES "no class folders in it"
#define SPRITE_FOLDER_LINK_OUT	 "a symbolic link out of the source tree: not followed"

/* An entry of the tree that is not a sample, and why. */
struct sprite_folder_entry {
	char *path;
	char *why;
	int unreadable; /* neither a file nor a folder */
};

struct sprite_folder_entries {
	struct sprite_folder_entry *v;
	size_t n, cap;
};

/* Append a copy of (path, unreadable, why); 0 or -ENOMEM. */
int sprite_folder_entries_push(struct sprite_folder_entries *l, const char *path, int unreadable,
			       const char *why);
void sprite_folder_entries_free(struct sprite_folder_entries *l);

struct sprite_folder_split {
	char *name;	/* the split folder's name; "train" for the root itself */
	char *dir;	/* its path */
	char **classes; /* its class folders, byte order */
	size_t nclasses;
	/* Its entries that are not folders (split layout only: the root's are in outside). */
	struct sprite_folder_entries outside;
};

struct sprite_folder {
	int split_layout;		    /* split folders, or class folders under the root */
	struct sprite_folder_split *splits; /* "train" first, then byte order */
	size_t nsplits;
	char **classes; /* sorted union of the class folders of every split */
	size_t nclasses;
	/* Entries at the top that are not folders, in name order. */
	struct sprite_folder_entries outside;
	/* Split layout: paths of the top folders that hold no folders, in split order. */
	char **bare;
	size_t nbare;
};

/*
 * List root down to the class folders into *f (zeroed first; free it with
 * sprite_folder_free, also after an error). A folder that cannot be read
 * fails: -errno with "PATH: cannot open: REASON" in err (errcap bytes).
 * Finding no split or no class is not an error here: the reader says what
 * it expected.
 */
int sprite_folder_list(const char *root, struct sprite_folder *f, char *err, size_t errcap);

/*
 * Every file of split k (index into f->splits), class folder by class
 * folder in byte order: file(ctx, path, label) gets each path (malloc'd,
 * now the callee's) and its label, index into f->classes; ignored(ctx, path,
 * unreadable, why), when given, what sprite_walk_files passes over (link
 * loops, entries that are neither file nor folder). A negative return of
 * either stops the walk and is returned; else 0, or -errno with err set.
 * -E2BIG when f has more classes than a label holds.
 */
int sprite_folder_walk(const struct sprite_folder *f, size_t k,
		       int (*file)(void *ctx, char *path, uint16_t label),
		       int (*ignored)(void *ctx, const char *path, int unreadable, const char *why),
		       void *ctx, char *err, size_t errcap);

void sprite_folder_free(struct sprite_folder *f);

#endif
