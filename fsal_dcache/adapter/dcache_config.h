/*
 * Reading an EXPORT's FSAL { Name = DCACHE; ... } block from Ganesha's
 * parse tree: what the module does when Ganesha creates or updates an
 * export (export.c), and what dcache-check does offline (dcache_check.c).
 * One code for both, so that the validator and the plugin cannot disagree
 * on a block: config_tree.c reads the tree, settings_block.c runs the
 * checks in the plugin's order and words the verdict.
 *
 * Adapter code only: it includes Ganesha's headers.
 */
#ifndef DCACHE_CONFIG_H
#define DCACHE_CONFIG_H

#include "config.h"

#include <stdbool.h>
#include <stddef.h>

#include "config_parsing.h"
#include "fsal.h"

#include <dcache/core.h>

/*
 * The Ganesha releases the adapter builds for (ci/release.sh): 4.3 (FSAL API
 * 11, Debian 12), 6.5 (API 13, Debian 13) and 9.14 (API 14, Debian 13
 * backports).  Every difference between them the adapter meets is one knob
 * of compat/<release>/dcache_compat.h, the directory the build picks by
 * Ganesha_VERSION; the ABI each build must match is asserted in
 * compat/<release>/dcache_abi.h (through abi.h).
 */
#include "dcache_compat.h"
#if FSAL_MAJOR_VERSION != DCACHE_FSAL_API_MAJOR
#error "compat/ of another Ganesha release than the headers: check Ganesha_VERSION"
#endif

/* The module name as written in EXPORT { FSAL { Name = DCACHE; } }. */
#define DCACHE_FSAL_NAME "DCACHE"

/* The settings of the FSAL block as written (gsh_malloc'd, NULL when not
 * set), and the nested FSAL block naming the FSAL to stack on. */
#define DCACHE_ARG_FIELD(name, member) char *member;
struct dcache_export_args {
	struct subfsal_args subfsal;
	/* The reference on the sub-FSAL's module that loading the nested
	 * block took (Ganesha's subfsal_commit keeps it): the export that
	 * stacks on it owns it from then on; otherwise (a refusal, an
	 * update) dcache_export_args_free puts it back. */
	struct fsal_module *subfsal_ref;
	DCACHE_SETTINGS(DCACHE_ARG_FIELD)
};
#undef DCACHE_ARG_FIELD

/* What becomes of the nested FSAL { Name = VFS; } block: ganesha.nfsd
 * loads the named FSAL's module (Ganesha's subfsal_commit), dcache-check
 * takes its name only (it loads no module). */
enum dcache_subfsal {
	DCACHE_SUBFSAL_LOAD,
	DCACHE_SUBFSAL_NAME_ONLY,
};

/*
 * settings_block.c: reads and validates the DCACHE block (a parse-tree
 * node) into *args and *settings.  false when the export must be refused,
 * after one call of refuse(ctx, why) for each thing wrong with it (every
 * bad setting, not only the first): why is the one-line reason
 * ganesha.nfsd logs after "DCACHE: export ID (PATH): " and before
 * "; export refused" (e.g. 'IO_Cache_Read = "fast" is not valid; allowed:
 * ...').  Ganesha's own configuration errors (an unknown parameter, say)
 * go to err_type's diagnostics, as when it loads any block.  *args is set
 * either way: free it with dcache_export_args_free (which also puts back
 * the module reference the nested block's loading took, unless the caller
 * took args->subfsal_ref over).
 */
/*
 * settings_block.c: whether a DCACHE setting stands in the EXPORT block
 * around the DCACHE block. Ganesha itself refuses an EXPORT block holding
 * a parameter it does not know, so a reload removes such an export
 * whatever DCACHE decides (and a start does not create it).
 */
bool dcache_block_in_export_block(void *block);

bool dcache_block_settings(void *block, struct config_error_type *err_type,
			   enum dcache_subfsal subfsal,
			   struct dcache_export_args *args,
			   struct dcache_settings *settings,
			   dcache_settings_bad_fn refuse, void *ctx);
void dcache_export_args_free(struct dcache_export_args *args);

/*
 * config_tree.c: the settings of an FSAL block (a parse-tree node) as
 * written; each problem is one call of refuse(ctx, why).
 * dcache_conf_read sets values[i] (gsh_malloc'd, or NULL when absent or
 * reported) for names[i], and reports each setting written as a block,
 * with no value the parser could read, with several values (counted in
 * *several too: Ganesha's loader would complain of those itself) or set
 * twice; it returns how many it reported (one per setting at most).
 * dcache_conf_misplaced reports every one of names set in the EXPORT block
 * around it, in its nested FSAL block or in EXPORT_DEFAULTS, and returns
 * how many.  dcache_conf_nested_fsal: what the nested FSAL block names
 * (a block naming no FSAL, one other than VFS, or no block at all are
 * reported; several names are left to Ganesha's loader).
 */
enum dcache_nested {
	DCACHE_NESTED_VFS,     /* VFS (or several names: the loader's) */
	DCACHE_NESTED_MISSING, /* no nested FSAL block: reported */
	DCACHE_NESTED_OTHER,   /* no FSAL or another than VFS: reported */
};
size_t dcache_conf_read(void *block, const char *const names[], size_t count,
			char *values[], size_t *several,
			dcache_settings_bad_fn refuse, void *ctx);
size_t dcache_conf_misplaced(void *block, const char *const names[],
			     size_t count, dcache_settings_bad_fn refuse,
			     void *ctx);
enum dcache_nested
dcache_conf_nested_fsal(void *block, dcache_settings_bad_fn refuse, void *ctx);
/* How many of names are set in the EXPORT block around block (the FSAL
 * block), without reporting them. */
size_t dcache_conf_in_export_block(void *block, const char *const names[],
				   size_t count);

/*
 * config_tree.c, for dcache-check: each of names set in block whose value
 * Ganesha's parser dropped (a statement it kept without a value), with
 * where it is ("FILE:LINE") and the text after its '=' on that line;
 * returns how many.
 */
typedef void (*dcache_conf_dropped_fn)(void *ctx, const char *name,
				       const char *at, const char *text);
size_t dcache_conf_dropped(void *block, const char *const names[], size_t count,
			   dcache_conf_dropped_fn each, void *ctx);

/*
 * config_tree.c, for dcache-check: the FSAL blocks Ganesha hands to DCACHE
 * (an FSAL block whose Name is DCACHE, in a top-level EXPORT block), in
 * the order of the file, the EXPORT block around one, and where a node
 * was written ("FILE:LINE").
 */
void *dcache_conf_next_dcache_block(void *root, void *after);
void *dcache_conf_export_of(void *block);
const char *dcache_conf_where(const void *node, char *buf, size_t len);

#endif /* DCACHE_CONFIG_H */
