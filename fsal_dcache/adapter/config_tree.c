/*
 * The DCACHE settings exactly as the operator wrote them, read from
 * Ganesha's parse tree: the one file that includes the parser's internal
 * header (config_parsing/analyse.h, from the same source package).
 *
 * Why not Ganesha's own items: a CONF_ITEM_STR hands over a number without
 * its sign ("IO_Queue_Depth = -4096" arrives as "4096": the lexer makes the
 * '-' an operator of the number term), lets a setting given twice win
 * silently, skips a statement its grammar dropped ("2k", "1e3", a missing
 * ';', "= ;": only "Syntax error in statement" is logged, with no export
 * named) and a block of the setting's name, and knows nothing of DCACHE
 * settings written outside DCACHE's FSAL block.  The parse tree keeps all
 * of that: each statement with its terms, each term with its type, its
 * operator and its text, and the file and line it came from.
 */
#include "dcache_config.h"

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "abstract_mem.h"
#include "config_parsing/analyse.h"
#include "gsh_list.h"

/* Ganesha's parser (config_parsing/analyse.h) keeps the layout below;
 * libganesha_nfsd.so's own code reads these fields at these offsets. */

_Static_assert(sizeof(struct config_node) == 88, "config_node size");
#define DCACHE_CONFIG_NODE_AT(member, offset)                            \
	_Static_assert(offsetof(struct config_node, member) == (offset), \
		       "config_node." #member);
DCACHE_CONFIG_NODE_AT(filename, 32)
DCACHE_CONFIG_NODE_AT(linenumber, 40)
DCACHE_CONFIG_NODE_AT(type, 48)
/* The parse tree's layout on this release (compat/X/dcache_compat.h). */
DCACHE_CONFIG_NODE_LAYOUT(DCACHE_CONFIG_NODE_AT)
_Static_assert(TYPE_ROOT == 1 && TYPE_BLOCK == 2 && TYPE_STMT == 3 &&
		       TYPE_TERM == 4,
	       "node types");

static const char *where(const struct config_node *n, char *buf, size_t len)
{
	snprintf(buf, len, "%s:%d", n->filename ? n->filename : "?",
		 n->linenumber);
	return buf;
}

/* -1 when name is not one of the settings. */
static int setting_index(const char *name, const char *const names[],
			 size_t count)
{
	for (size_t i = 0; i < count; ++i)
		if (name != NULL && strcasecmp(name, names[i]) == 0)
			return (int)i;
	return -1;
}

/*
 * What stands after "name =" on the statement's line of its file, up to
 * ';' (at most len - 1 bytes): the text the parser dropped.  Empty when the
 * file cannot be read (a configuration from a URL) or the line does not
 * hold the setting.
 */
static void text_on_line(const struct config_node *stmt, char *out, size_t len)
{
	char line[1024];
	FILE *f;
	int n = 0;

	out[0] = '\0';
	if (stmt->filename == NULL || (f = fopen(stmt->filename, "re")) == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL)
		if (++n == stmt->linenumber)
			break;
	fclose(f);
	if (n != stmt->linenumber)
		return;
	for (char *p = line; (p = strcasestr(p, stmt->u.nterm.name)) != NULL;
	     ++p) {
		char *v = p + strlen(stmt->u.nterm.name);

		while (*v == ' ' || *v == '\t')
			++v;
		if (*v != '=')
			continue;
		++v;
		while (*v == ' ' || *v == '\t')
			++v;
		size_t k = strcspn(v, ";\n");

		while (k > 0 && (v[k - 1] == ' ' || v[k - 1] == '\t'))
			--k;
		if (k >= len)
			k = len - 1;
		memcpy(out, v, k);
		out[k] = '\0';
		return;
	}
}

/* The statement's one term as written: its sign, if any, and its text
 * (quoted text without the quotes). */
static char *raw_value(const struct config_node *stmt)
{
	const struct config_node *term = glist_first_entry(
		&stmt->u.nterm.sub_nodes, struct config_node, node);
	const char *op = term->u.term.op_code ? term->u.term.op_code : "";
	const char *val = term->u.term.varvalue ? term->u.term.varvalue : "";
	const size_t len = strlen(op) + strlen(val) + 1;
	char *out = gsh_malloc(len);

	snprintf(out, len, "%s%s", op, val);
	return out;
}

/* One line through refuse (at most sizeof line bytes, as the log takes it). */
#define DCACHE_REFUSE(refuse, ctx, ...)                      \
	do {                                                 \
		char line_[1024];                            \
                                                             \
		snprintf(line_, sizeof(line_), __VA_ARGS__); \
		(refuse)((ctx), line_);                      \
	} while (0)

/* Where the first statement of blk named name is, before stop. */
static void first_at(const struct config_node *blk,
		     const struct config_node *stop, const char *name,
		     char *buf, size_t len)
{
	struct glist_head *ps;

	buf[0] = '\0';
	glist_for_each(ps, &blk->u.nterm.sub_nodes)
	{
		const struct config_node *p =
			glist_entry(ps, struct config_node, node);

		if (p == stop)
			break;
		if (strcasecmp(p->u.nterm.name, name) == 0) {
			where(p, buf, len);
			return;
		}
	}
}

size_t dcache_conf_read(void *block, const char *const names[], size_t count,
			char *values[], size_t *several,
			dcache_settings_bad_fn refuse, void *ctx)
{
	struct config_node *blk = block;
	struct glist_head *ns;
	char at[300], at_first[300], shown[160], shown2[160], dropped[160];
	/* a setting already reported: one line per setting */
	bool *reported = gsh_calloc(count ? count : 1, sizeof(bool));
	size_t problems = 0;

	*several = 0;
	for (size_t i = 0; i < count; ++i)
		values[i] = NULL;
	if (blk == NULL || blk->type != TYPE_BLOCK) {
		gsh_free(reported);
		return 0;
	}
	glist_for_each(ns, &blk->u.nterm.sub_nodes)
	{
		struct config_node *n =
			glist_entry(ns, struct config_node, node);
		const int i = setting_index(n->u.nterm.name, names, count);
		size_t terms;

		if (i < 0 || reported[i])
			continue;
		where(n, at, sizeof(at));
		terms = n->type == TYPE_BLOCK
				? 0
				: glist_length(&n->u.nterm.sub_nodes);
		if (n->type == TYPE_BLOCK) {
			DCACHE_REFUSE(
				refuse, ctx,
				"%s { ... } (%s) is a block; a setting takes one value: %s = VALUE; (allowed: %s)",
				names[i], at, names[i],
				dcache_settings_allowed(names[i]));
		} else if (terms == 0) {
			text_on_line(n, dropped, sizeof(dropped));
			dcache_settings_quote(dropped, shown, sizeof(shown));
			DCACHE_REFUSE(
				refuse, ctx,
				"%s = %s (%s) has no value Ganesha's parser could read (see its syntax error above: a unit such as 64k, an exponent such as 1e3, a missing ';' or nothing before ';' is not a value); allowed: %s",
				names[i],
				dropped[0] != '\0' ? shown : "(nothing)", at,
				dcache_settings_allowed(names[i]));
		} else if (terms > 1) {
			++*several;
			DCACHE_REFUSE(
				refuse, ctx,
				"%s (%s) is given %zu values; it takes one (allowed: %s)",
				names[i], at, terms,
				dcache_settings_allowed(names[i]));
		} else if (values[i] != NULL) {
			char *again = raw_value(n);

			first_at(blk, n, names[i], at_first, sizeof(at_first));
			dcache_settings_quote(values[i], shown, sizeof(shown));
			dcache_settings_quote(again, shown2, sizeof(shown2));
			DCACHE_REFUSE(
				refuse, ctx,
				"%s is set more than once (%s at %s, then %s at %s); set it once",
				names[i], shown, at_first, shown2, at);
			gsh_free(again);
		} else {
			values[i] = raw_value(n);
			continue;
		}
		/* reported: its value (if one was read) is not checked again */
		reported[i] = true;
		++problems;
		gsh_free(values[i]);
		values[i] = NULL;
	}
	gsh_free(reported);
	return problems;
}

size_t dcache_conf_dropped(void *block, const char *const names[], size_t count,
			   dcache_conf_dropped_fn each, void *ctx)
{
	struct config_node *blk = block;
	struct glist_head *ns;
	char at[300], text[160];
	size_t dropped = 0;

	if (blk == NULL || blk->type != TYPE_BLOCK)
		return 0;
	glist_for_each(ns, &blk->u.nterm.sub_nodes)
	{
		struct config_node *n =
			glist_entry(ns, struct config_node, node);
		const int i = setting_index(n->u.nterm.name, names, count);

		if (i < 0 || n->type != TYPE_STMT ||
		    !glist_empty(&n->u.nterm.sub_nodes))
			continue;
		text_on_line(n, text, sizeof(text));
		each(ctx, names[i], where(n, at, sizeof(at)), text);
		++dropped;
	}
	return dropped;
}

/* Every DCACHE setting among the statements of blk, one line each;
 * returns how many. */
static size_t strays_in(const struct config_node *blk, const char *what,
			const char *const names[], size_t count,
			dcache_settings_bad_fn refuse, void *ctx)
{
	struct glist_head *ns;
	char at[300];
	size_t strays = 0;

	glist_for_each(ns, &blk->u.nterm.sub_nodes)
	{
		const struct config_node *n =
			glist_entry(ns, struct config_node, node);
		const int i = setting_index(n->u.nterm.name, names, count);

		if (n->type == TYPE_TERM || i < 0)
			continue;
		DCACHE_REFUSE(
			refuse, ctx,
			"%s (%s) is in %s; DCACHE settings belong in the export's FSAL { Name = DCACHE; ... } block",
			names[i], where(n, at, sizeof(at)), what);
		++strays;
	}
	return strays;
}

static void refuse_nothing(void *ctx, const char *why)
{
	(void)ctx;
	(void)why;
}

size_t dcache_conf_in_export_block(void *block, const char *const names[],
				   size_t count)
{
	struct config_node *blk = block, *exp;

	if (blk == NULL || blk->type != TYPE_BLOCK)
		return 0;
	exp = DCACHE_NODE_PARENT(blk);
	if (exp == NULL || exp->type != TYPE_BLOCK)
		return 0;
	return strays_in(exp, "the EXPORT block", names, count, refuse_nothing,
			 NULL);
}

size_t dcache_conf_misplaced(void *block, const char *const names[],
			     size_t count, dcache_settings_bad_fn refuse,
			     void *ctx)
{
	struct config_node *blk = block, *exp, *root;
	struct glist_head *ns;
	size_t strays = 0;

	if (blk == NULL || blk->type != TYPE_BLOCK)
		return 0;
	/* the nested FSAL block (the sub-FSAL's own) */
	glist_for_each(ns, &blk->u.nterm.sub_nodes)
	{
		const struct config_node *n =
			glist_entry(ns, struct config_node, node);

		if (n->type == TYPE_BLOCK &&
		    strcasecmp(n->u.nterm.name, "FSAL") == 0)
			strays += strays_in(
				n, "the nested FSAL block (the sub-FSAL's own)",
				names, count, refuse, ctx);
	}
	/* the EXPORT block around it */
	exp = DCACHE_NODE_PARENT(blk);
	if (exp != NULL && exp->type == TYPE_BLOCK)
		strays += strays_in(exp, "the EXPORT block", names, count,
				    refuse, ctx);
	/* EXPORT_DEFAULTS, and its FSAL blocks */
	for (root = exp; root != NULL && root->type != TYPE_ROOT;
	     root = DCACHE_NODE_PARENT(root))
		;
	if (root == NULL)
		return strays;
	glist_for_each(ns, &root->u.nterm.sub_nodes)
	{
		const struct config_node *d =
			glist_entry(ns, struct config_node, node);
		struct glist_head *fs;

		if (d->type != TYPE_BLOCK ||
		    strcasecmp(d->u.nterm.name, "EXPORT_DEFAULTS") != 0)
			continue;
		strays += strays_in(d, "the EXPORT_DEFAULTS block", names,
				    count, refuse, ctx);
		glist_for_each(fs, &d->u.nterm.sub_nodes)
		{
			const struct config_node *f =
				glist_entry(fs, struct config_node, node);

			if (f->type == TYPE_BLOCK)
				strays += strays_in(
					f, "a block of EXPORT_DEFAULTS", names,
					count, refuse, ctx);
		}
	}
	return strays;
}

const char *dcache_conf_where(const void *node, char *buf, size_t len)
{
	return where(node, buf, len);
}

/* The first block named name among blk's sub-nodes, or NULL. */
static struct config_node *sub_block(struct config_node *blk, const char *name)
{
	struct glist_head *ns;

	glist_for_each(ns, &blk->u.nterm.sub_nodes)
	{
		struct config_node *n =
			glist_entry(ns, struct config_node, node);

		if (n->type == TYPE_BLOCK &&
		    strcasecmp(n->u.nterm.name, name) == 0)
			return n;
	}
	return NULL;
}

/* The first statement named name among blk's sub-nodes, or NULL. */
static struct config_node *statement(struct config_node *blk, const char *name)
{
	struct glist_head *ns;

	glist_for_each(ns, &blk->u.nterm.sub_nodes)
	{
		struct config_node *n =
			glist_entry(ns, struct config_node, node);

		if (n->type == TYPE_STMT &&
		    strcasecmp(n->u.nterm.name, name) == 0)
			return n;
	}
	return NULL;
}

/* The text of a statement's only term (quoted text without its quotes),
 * or NULL when it has none or several. */
static const char *only_value(struct config_node *stmt)
{
	const struct config_node *term;

	if (stmt == NULL || glist_length(&stmt->u.nterm.sub_nodes) != 1)
		return NULL;
	term = glist_first_entry(&stmt->u.nterm.sub_nodes, struct config_node,
				 node);
	return term->u.term.varvalue;
}

enum dcache_nested
dcache_conf_nested_fsal(void *block, dcache_settings_bad_fn refuse, void *ctx)
{
	struct config_node *blk = block, *nested, *name;
	const char *value;
	char at[300], shown[160];

	if (blk == NULL || blk->type != TYPE_BLOCK)
		return DCACHE_NESTED_VFS;
	nested = sub_block(blk, "FSAL");
	if (nested == NULL) {
		refuse(ctx,
		       "missing the nested FSAL { Name = VFS; } block naming the FSAL to stack on");
		return DCACHE_NESTED_MISSING;
	}
	name = statement(nested, "Name");
	if (name == NULL) {
		DCACHE_REFUSE(
			refuse, ctx,
			"the nested FSAL block (%s) names no FSAL to stack on; DCACHE stacks on VFS: FSAL { Name = VFS; }",
			where(nested, at, sizeof(at)));
		return DCACHE_NESTED_OTHER;
	}
	/* Several values, or none: Ganesha's loader says what is wrong. */
	value = only_value(name);
	if (value == NULL || strcasecmp(value, "VFS") == 0)
		return DCACHE_NESTED_VFS;
	dcache_settings_quote(value, shown, sizeof(shown));
	DCACHE_REFUSE(refuse, ctx,
		      "DCACHE stacks only on FSAL VFS (got %s at %s)", shown,
		      where(name, at, sizeof(at)));
	return DCACHE_NESTED_OTHER;
}

/* An FSAL block of an EXPORT that Ganesha hands to DCACHE: its Name is
 * DCACHE (Ganesha matches FSAL names without regard to case). */
static bool is_dcache_block(struct config_node *n)
{
	const char *name;

	if (n->type != TYPE_BLOCK || strcasecmp(n->u.nterm.name, "FSAL") != 0)
		return false;
	name = only_value(statement(n, "Name"));
	return name != NULL && strcasecmp(name, DCACHE_FSAL_NAME) == 0;
}

/* The first DCACHE block among exp's sub-nodes from from on, or NULL. */
static struct config_node *dcache_block_from(struct config_node *exp,
					     struct glist_head *from)
{
	for (; from != &exp->u.nterm.sub_nodes; from = from->next) {
		struct config_node *f =
			glist_entry(from, struct config_node, node);

		if (is_dcache_block(f))
			return f;
	}
	return NULL;
}

void *dcache_conf_next_dcache_block(void *root, void *after)
{
	struct config_node *top = root, *prev = after, *exp, *found;
	struct glist_head *es;

	if (top == NULL || top->type != TYPE_ROOT)
		return NULL;
	/* on from where the last one was found: the rest of its EXPORT
	 * block, then the blocks after that */
	if (prev != NULL) {
		exp = DCACHE_NODE_PARENT(prev);
		found = dcache_block_from(exp, prev->node.next);
		if (found != NULL)
			return found;
		es = exp->node.next;
	} else {
		es = top->u.nterm.sub_nodes.next;
	}
	for (; es != &top->u.nterm.sub_nodes; es = es->next) {
		exp = glist_entry(es, struct config_node, node);
		if (exp->type != TYPE_BLOCK ||
		    strcasecmp(exp->u.nterm.name, "EXPORT") != 0)
			continue;
		found = dcache_block_from(exp, exp->u.nterm.sub_nodes.next);
		if (found != NULL)
			return found;
	}
	return NULL;
}

void *dcache_conf_export_of(void *block)
{
	struct config_node *blk = block;

	return blk != NULL && blk->type == TYPE_BLOCK ? DCACHE_NODE_PARENT(blk)
						      : NULL;
}
