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
 *
 * Beneath the rule lie the listing of one folder (sprite_list_dir) and the
 * depth-first walk of the files below one (sprite_walk_files), with the
 * checks that keep a symbolic link inside its tree.
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
 * fails: -errno with "PATH: cannot open: REASON" in err (SPRITE_ERR_MAX bytes).
 * Finding no split or no class is not an error here: the reader says what
 * it expected.
 */
int sprite_folder_list(const char *root, struct sprite_folder *f, char *err);

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
		       void *ctx, char *err);

void sprite_folder_free(struct sprite_folder *f);

/* ---- the folder listing and walk below the rule ------------------------ */

/* A visible entry of a folder, as sprite_list_dir gives it. */
struct sprite_dirent {
	char kind;	 /* 'd' a folder, 'f' a regular file (links followed), 0 neither */
	char link;	 /* 1: the entry is a symbolic link (kind is its target's) */
	const char *why; /* kind 0: what it is instead ("a dangling symbolic link", "a FIFO") */
	char name[];
};

/*
 * The entries of dir, names starting with '.' left out, sorted by name
 * bytewise: *out a malloc'd array of *n entries, for sprite_dirents_free.
 * Symbolic links are followed to tell a folder from a file; an entry that is
 * neither (a link to nothing, a FIFO, a socket, a device, or one that stat()
 * fails on) has kind 0 and why. Returns 0 or -errno (opendir's, -ENOMEM).
 */
int sprite_list_dir(const char *dir, struct sprite_dirent ***out, size_t *n);
void sprite_dirents_free(struct sprite_dirent **v, size_t n);

/*
 * Every visible regular file under dir, the way the packer and hntrain read
 * image folders: depth first, the entries of a folder in byte order of their
 * names (files and folders mixed), names starting with '.' left out, symbolic
 * links followed. file(ctx, path) gets each file's path (malloc'd, now the
 * callee's); a negative return stops the walk and is returned. Entries passed
 * over go to ignored(ctx, path, unreadable, why), when given, in the same
 * order: a folder that is already open further up (a symbolic link loop) is
 * not entered again (unreadable 0, why SPRITE_WALK_LOOP), and an entry that
 * is neither a file nor a folder (sprite_list_dir's kind 0) is left out
 * (unreadable 1); a negative return stops the walk and is returned. More
 * than 32 folders deep is an error. Returns 0, a callback's negative value,
 * or -errno with a message naming the folder (escaped) in err (SPRITE_ERR_MAX bytes).
 */
#define SPRITE_WALK_LOOP "a symbolic link back to a folder above it: not entered again"
/*
 * Symbolic links are followed only where they stay inside dir (the class
 * folder): one that leads elsewhere, even to another folder of the same tree
 * (a/zz -> .. would read class b again as class a), is passed over with
 * unreadable 0 and why SPRITE_WALK_OUTSIDE, so a tree cannot lend its
 * reader (root, for spritefs) a file the tree's owner may not read.
 */
#define SPRITE_WALK_OUTSIDE "a symbolic link out of its class folder: not followed"

/*
 * Whether path, resolved (realpath), lies inside the resolved folder top
 * (or is top itself): 1, 0, or -errno when path cannot be resolved.
 */
int sprite_path_inside(const char *path, const char *top_real);
/*
 * The same for the file open at fd, by its real path (/proc/self/fd): a
 * check on what was opened, so that a link swapped into the tree after it
 * was listed cannot lead out of it. 1, 0, or -errno (no /proc).
 */
int sprite_fd_inside(int fd, const char *top_real);
int sprite_walk_files(const char *dir, int (*file)(void *ctx, char *path),
		      int (*ignored)(void *ctx, const char *path, int unreadable, const char *why),
		      void *ctx, char *err);

#endif
