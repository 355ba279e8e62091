/*
 * dcache-check: checks every FSAL { Name = DCACHE; } block of a Ganesha
 * configuration offline, before ganesha.nfsd is started or reloaded with
 * it, and says of each block what the plugin would log when it refuses the
 * export:
 *
 *   /etc/ganesha/ganesha.conf:12: DCACHE: export 7 (/srv/data): IO_Cache_Read = "fast" is not valid; allowed: ...; export refused
 *
 * It runs the plugin's own code wherever there is one, so that the two
 * cannot disagree:
 *   - the file, its %include and %dir: Ganesha's parser, config_ParseFile
 *     of this Ganesha release's libganesha_nfsd (the program is built per
 *     release, like the module);
 *   - the blocks Ganesha hands to DCACHE: an FSAL block named DCACHE in a
 *     top-level EXPORT block (config_tree.c);
 *   - each block: dcache_block_settings (settings_block.c), the checks and
 *     the messages of the module's create_export, with Ganesha's loader
 *     (load_config_from_node) and the core's settings parser in them;
 *   - the export's Export_Id and Path: Ganesha's own items (CONF_MAND_UI16,
 *     CONF_MAND_PATH) and its trailing-'/' rule, as the line names them.
 * What it cannot know offline (whether VFS's module loads, whether the
 * export's Path exists, Ganesha's own checks of the EXPORT block) it does
 * not check.
 *
 * Exit status: 0 every DCACHE block would be served; 1 at least one would
 * be refused (each refusal one line on stderr); 2 usage, an unreadable
 * file, or a configuration Ganesha's parser fails on (ganesha.nfsd would
 * not start with it).  Man page: docs/man/dcache-check.8.md.
 */
#include "dcache_config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abstract_mem.h"
#include "conf_url.h"
#include "log.h"
#include "nfs_init.h"

static const char usage[] =
	"usage: dcache-check [-v] [FILE]\n"
	"       dcache-check [-v] - | --stdin\n"
	"Checks every FSAL { Name = DCACHE; } block of a Ganesha configuration\n"
	"(default FILE: %s) with the plugin's own rules.\n"
	"  -v, --verbose  also print each DCACHE export that would be served,\n"
	"                 with the settings it would run, on standard output\n"
	"  -, --stdin     read the configuration from standard input (a\n"
	"                 relative %%include is resolved against the current\n"
	"                 directory)\n"
	"Exit status: 0 every DCACHE export would be served, 1 at least one\n"
	"would be refused (one line each on standard error), 2 usage error or\n"
	"a configuration that cannot be read or parsed.\n";

/* ---- output -------------------------------------------------------------- */

/* The names the parser gives standard input's copy (in its nodes, and the
 * path as given in a message about the whole file), shown as "(stdin)". */
static char *stdin_names[2];

/* One line: newlines inside a message become blanks, standard input's
 * copy is named as such. */
static void print_line(FILE *out, const char *line)
{
	while (*line != '\0') {
		size_t n = 0;

		for (size_t i = 0; i < 2 && n == 0; ++i)
			if (stdin_names[i] != NULL &&
			    strncmp(line, stdin_names[i],
				    strlen(stdin_names[i])) == 0)
				n = strlen(stdin_names[i]);
		if (n > 0) {
			fputs("(stdin)", out);
			line += n;
			continue;
		}
		if (*line == '\n') {
			if (line[1] != '\0')
				fputc(' ', out);
		} else {
			fputc(*line, out);
		}
		++line;
	}
	fputc('\n', out);
}

/* Ganesha's own messages about the configuration ("Config File
 * (FILE:LINE): ..."), one line each, as ganesha.nfsd logs them. */
static void print_ganesha_error(char *msg, void *dest,
				struct config_error_type *err_type)
{
	print_line(stderr, msg);
}

static void drop_ganesha_error(char *msg, void *dest,
			       struct config_error_type *err_type)
{
}

/*
 * The parse of the whole file: as above, noting whether Ganesha's parser
 * gave up before the end of the file.  config_ParseFile says so with one
 * of these two messages and sets no error flag, but the tree it returns
 * then holds none of the file's blocks (the grammar hangs them on the root
 * only once the whole file is read): for dcache-check the file cannot be
 * parsed.  Also noted: where the lexer met a character it has no rule for
 * ("Unexpected character (+)"), a fatal error of the whole file.
 */
struct parse_notes {
	bool abandoned;
	char **unexpected; /* "FILE:LINE" then the character, in pairs */
	size_t count;	   /* pairs */
};

static char *copy_of(const char *s, size_t n)
{
	char *p = gsh_malloc(n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

static void note_unexpected(struct parse_notes *notes, const char *msg)
{
	static const char head[] = "Config File (";
	static const char what[] = "): Unexpected character (";
	const char *at = strstr(msg, what);
	const size_t m = strlen(msg);

	if (strncmp(msg, head, sizeof(head) - 1) != 0 || at == NULL ||
	    msg[m - 1] != ')')
		return;
	notes->unexpected = gsh_realloc(
		notes->unexpected, (notes->count + 1) * 2 * sizeof(char *));
	notes->unexpected[2 * notes->count] =
		copy_of(msg + sizeof(head) - 1,
			(size_t)(at - msg) - (sizeof(head) - 1));
	at += sizeof(what) - 1;
	notes->unexpected[2 * notes->count + 1] =
		copy_of(at, (size_t)(msg + m - 1 - at));
	++notes->count;
}

static void print_parse_error(char *msg, void *dest,
			      struct config_error_type *err_type)
{
	static const char *const gave_up[] = {
		"): Configuration syntax errors found",
		"): Configuration parse ran out of memory",
	};
	struct parse_notes *notes = dest;

	for (size_t i = 0; i < sizeof(gave_up) / sizeof(gave_up[0]); ++i) {
		const size_t m = strlen(msg), g = strlen(gave_up[i]);

		if (m >= g && strcmp(msg + m - g, gave_up[i]) == 0)
			notes->abandoned = true;
	}
	note_unexpected(notes, msg);
	print_line(stderr, msg);
}

/* ---- Ganesha in a program ------------------------------------------------ */

/*
 * libganesha_nfsd logs through facilities that exist only once
 * init_logging has run (a log call before it walks an uninitialised list),
 * and the parser logs on some paths (the URL code, the grammar's error
 * hook).  nfs_prereq_init, the library's own start-up of logging, sets
 * them up; every component is held to MAJ first, so that only what would
 * stop the program reaches stderr with Ganesha's headers: configuration
 * errors come from the parser's diagnostics instead (above), one line
 * each.
 */
static void ganesha_logging_init(void)
{
	for (int c = 0; c < COMPONENT_COUNT; ++c)
		component_log_level[c] = NIV_MAJ;
	DCACHE_PREREQ_INIT("dcache-check", "localhost", -1, "STDERR", false);
}

/*
 * %url: Ganesha's parser fetches a rados:// URL through a provider, which
 * config_url_init registers when Ganesha's RADOS URL backend
 * (libganesha_rados_urls.so, nfs-ganesha-ceph) is installed; it then reads
 * the object as ganesha.nfsd would.  Without the backend ganesha.nfsd
 * cannot read it either; this provider stands in for it and reads the
 * URL as empty text, saying that it was not checked.  The lexer needs
 * config_url_init in any case (it matches every %url against a regex
 * compiled there).
 */
static bool urls_not_checked;

static void url_nothing(void) {}

static int url_not_checked(const char *url, FILE **f, char **fbuf)
{
	fprintf(stderr,
		"dcache-check: %%url rados://%s: not checked (no RADOS URL backend here, libganesha_rados_urls.so of nfs-ganesha-ceph); check the object's text with: rados ... get OBJECT - | dcache-check -\n",
		url);
	urls_not_checked = true;
	*fbuf = NULL;
	*f = fopen("/dev/null", "re");
	return *f == NULL ? errno : 0;
}

static struct gsh_url_provider offline_rados = {
	.name = "rados",
	.url_init = url_nothing,
	.url_shutdown = url_nothing,
	.url_fetch = url_not_checked,
};

/* ---- the configuration's path -------------------------------------------- */

/*
 * Ganesha resolves a relative %include against the directory of the main
 * file when its path is absolute, against the current directory when it
 * is relative (new_file in conf_lex.l).  A FILE is made absolute, as
 * ganesha.nfsd is given one; standard input is copied into a memfd and
 * named by a relative path to it (../ up to / then proc/self/fd/N), so
 * that its relative %includes are resolved against the current directory.
 * The memfd leaves nothing behind and can be read again (the plugin's
 * reader reopens a file to quote a value the parser dropped).
 */
static char *stdin_copy(void)
{
	char cwd[PATH_MAX], buf[65536], *path;
	int fd = memfd_create("dcache-check-stdin", MFD_CLOEXEC);
	size_t len = 0;
	ssize_t n;

	if (fd < 0) {
		fprintf(stderr,
			"dcache-check: cannot copy standard input: %s\n",
			strerror(errno));
		return NULL;
	}
	while ((n = read(STDIN_FILENO, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || write(fd, buf, (size_t)n) != n) {
			fprintf(stderr,
				"dcache-check: cannot read standard input: %s\n",
				strerror(errno));
			close(fd);
			return NULL;
		}
	}
	path = gsh_malloc(2 * sizeof(cwd) + 32);
	if (getcwd(cwd, sizeof(cwd)) == NULL) {
		/* absolute, then: its %includes against /proc/self/fd */
		snprintf(path, 2 * sizeof(cwd) + 32, "/proc/self/fd/%d", fd);
	} else {
		for (const char *p = cwd; *p != '\0'; ++p)
			if (*p == '/' && p[1] != '\0')
				len += (size_t)sprintf(path + len, "../");
		sprintf(path + len, "proc/self/fd/%d", fd);
	}
	/* how Ganesha names it in its nodes (conf_dir "." + '/' + path),
	 * then as given */
	stdin_names[0] = gsh_malloc(strlen(path) + 3);
	sprintf(stdin_names[0], "%s%s", path[0] == '/' ? "" : "./", path);
	stdin_names[1] = path;
	return path;
}

static char *file_path(const char *arg)
{
	char cwd[PATH_MAX], *path;
	struct stat st;
	FILE *f;

	if (stat(arg, &st) == 0 && S_ISDIR(st.st_mode)) {
		fprintf(stderr, "dcache-check: cannot read %s: %s\n", arg,
			strerror(EISDIR));
		return NULL;
	}
	f = fopen(arg, "re");
	if (f == NULL) {
		fprintf(stderr, "dcache-check: cannot read %s: %s\n", arg,
			strerror(errno));
		return NULL;
	}
	fclose(f);
	if (arg[0] == '/' || getcwd(cwd, sizeof(cwd)) == NULL)
		return gsh_strdup(arg);
	path = gsh_malloc(strlen(cwd) + strlen(arg) + 2);
	sprintf(path, "%s/%s", strcmp(cwd, "/") == 0 ? "" : cwd, arg);
	return path;
}

/* ---- one DCACHE block ---------------------------------------------------- */

/* The EXPORT block's Export_Id and Path, read by Ganesha's own items (the
 * rest of the block is not looked at: its messages are dropped). */
struct export_ident {
	uint16_t export_id;
	char *path;
};

static struct config_item ident_params[] = {
	CONF_MAND_UI16("Export_id", 0, UINT16_MAX, 1, export_ident, export_id),
	CONF_MAND_PATH("Path", 1, MAXPATHLEN, NULL, export_ident, path),
	CONFIG_EOL};

static struct config_block ident_block = {
	.dbus_interface_name = "org.ganesha.nfsd.config.dcache-check%d",
	.blk_desc.name = "EXPORT",
	.blk_desc.type = CONFIG_BLOCK,
	.blk_desc.u.blk.init = noop_conf_init,
	.blk_desc.u.blk.params = ident_params,
	.blk_desc.u.blk.commit = noop_conf_commit,
};

static void read_ident(void *export_node, struct export_ident *ident)
{
	struct config_error_type err;
	size_t len;

	memset(ident, 0, sizeof(*ident));
	if (!init_error_type(&err))
		return;
	(void)load_config_from_node(export_node, &ident_block, ident, false,
				    &err);
	report_config_errors(&err, NULL, drop_ganesha_error);
	/* Ganesha's clean_export_paths: an absolute Path loses its trailing
	 * '/'s before the FSAL sees it. */
	if (ident->path != NULL && ident->path[0] == '/') {
		len = strlen(ident->path);
		while (len > 1 && ident->path[len - 1] == '/')
			ident->path[--len] = '\0';
	}
}

/* One line about the export around block, after "FILE:LINE: ". */
static void print_about(FILE *out, const char *at,
			const struct export_ident *ident, const char *what,
			const char *text, const char *after)
{
	char *line;

	if (asprintf(&line, "%s: DCACHE: export %u (%s): %s%s%s", at,
		     ident->export_id, ident->path ? ident->path : "?", what,
		     text, after) < 0) {
		fprintf(stderr, "dcache-check: out of memory\n");
		exit(2);
	}
	print_line(out, line);
	free(line);
}

/* The block's refusal lines, kept until Ganesha's own lines for the block
 * are out (the refusals refer to them as above). */
struct refusals {
	char **lines;
	size_t count;
};

static void keep_refusal(void *ctx, const char *why)
{
	struct refusals *r = ctx;

	r->lines = gsh_realloc(r->lines, (r->count + 1) * sizeof(*r->lines));
	r->lines[r->count++] = gsh_strdup(why);
}

/* true when the block would be served. */
static bool check_block(void *block, bool verbose)
{
	struct dcache_export_args args;
	struct dcache_settings settings;
	struct export_ident ident;
	struct config_error_type err;
	struct refusals refusals = {NULL, 0};
	char at[PATH_MAX + 16];
	bool served;

	read_ident(dcache_conf_export_of(block), &ident);
	dcache_conf_where(block, at, sizeof(at));
	if (!init_error_type(&err)) {
		fprintf(stderr, "dcache-check: out of memory\n");
		exit(2);
	}
	served = dcache_block_settings(block, &err, DCACHE_SUBFSAL_NAME_ONLY,
				       &args, &settings, keep_refusal,
				       &refusals);
	/* Ganesha's own lines for the block first ("Unknown parameter
	 * (IO_Cache_Wrte)"): the refusal refers to them as above it. */
	report_config_errors(&err, NULL, print_ganesha_error);
	/* as export.c logs them on creating the export, one per problem */
	for (size_t i = 0; i < refusals.count; ++i) {
		print_about(stderr, at, &ident, "", refusals.lines[i],
			    "; export refused");
		gsh_free(refusals.lines[i]);
	}
	gsh_free(refusals.lines);
	if (served && verbose) {
		char shown[1024];

		(void)dcache_settings_format(&settings, shown, sizeof(shown));
		print_about(stdout, at, &ident, "would be served: ", shown, "");
	}
	dcache_export_args_free(&args);
	gsh_free(ident.path);
	return served;
}

/* ---- what stops ganesha.nfsd ------------------------------------------- */

/*
 * A character Ganesha's lexer has no rule for ('+', '$', '%', '(', a byte
 * outside ASCII such as a non-breaking space, ...) is a fatal error of the
 * whole file, found before any module is loaded: ganesha.nfsd does not
 * start, and a reload rereads none of the file.  The statement it stood in
 * is kept without a value; each DCACHE setting so dropped on a line where
 * the lexer met one is named, with its export, so that the operator knows
 * which value to write otherwise.
 */
struct unscannable {
	const struct parse_notes *notes;
	const char *at; /* the block's FILE:LINE */
	const struct export_ident *ident;
	unsigned int named;
};

/* text in double quotes, every byte outside printable ASCII as \xNN (a
 * non-breaking space shows as "\xc2\xa0", not as a blank). */
static void quote_bytes(const char *text, char *out, size_t len)
{
	size_t n = 0;

	out[n++] = '"';
	for (const unsigned char *p = (const unsigned char *)text;
	     *p != '\0' && n + 8 < len; ++p) {
		if (*p < 0x20 || *p >= 0x7f)
			n += (size_t)snprintf(out + n, len - n, "\\x%02x", *p);
		else if (*p == '"' || *p == '\\')
			n += (size_t)snprintf(out + n, len - n, "\\%c", *p);
		else
			out[n++] = (char)*p;
	}
	out[n++] = '"';
	out[n] = '\0';
}

static void name_unscannable(void *ctx, const char *name, const char *at,
			     const char *text)
{
	struct unscannable *u = ctx;
	char shown[200], what[200], one[40], *line;
	size_t n = 0;

	/* every character the lexer stopped at on the statement's line */
	what[0] = '\0';
	for (size_t i = 0; i < u->notes->count; ++i) {
		if (strcmp(u->notes->unexpected[2 * i], at) != 0)
			continue;
		quote_bytes(u->notes->unexpected[2 * i + 1], one, sizeof(one));
		if (n + strlen(one) + 3 < sizeof(what))
			n += (size_t)snprintf(what + n, sizeof(what) - n,
					      "%s%s", n > 0 ? ", " : "", one);
	}
	if (n == 0)
		return;
	quote_bytes(text, shown, sizeof(shown));
	if (asprintf(
		    &line,
		    "%s = %s (%s) holds %s, which Ganesha's parser takes only inside quotes: ganesha.nfsd does not start with this file, and a reload (SIGHUP) rereads none of it; allowed: %s",
		    name, shown, at, what, dcache_settings_allowed(name)) < 0) {
		fprintf(stderr, "dcache-check: out of memory\n");
		exit(2);
	}
	print_about(stderr, u->at, u->ident, "", line, "");
	free(line);
	++u->named;
}

/* Names the DCACHE settings the lexer's fatal errors dropped; how many. */
static unsigned int name_unscannables(void *root,
				      const struct parse_notes *notes)
{
#define DCACHE_LISTED(name, member) name,
	static const char *const names[] = {DCACHE_SETTINGS(DCACHE_LISTED)};
#undef DCACHE_LISTED
	struct unscannable u = {.notes = notes};
	struct export_ident ident;
	char at[PATH_MAX + 16];
	void *block = NULL;

	if (notes->count == 0)
		return 0;
	while ((block = dcache_conf_next_dcache_block(root, block)) != NULL) {
		read_ident(dcache_conf_export_of(block), &ident);
		u.at = dcache_conf_where(block, at, sizeof(at));
		u.ident = &ident;
		(void)dcache_conf_dropped(block, names,
					  sizeof(names) / sizeof(names[0]),
					  name_unscannable, &u);
		gsh_free(ident.path);
	}
	return u.named;
}

/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{"help", no_argument, NULL, 'h'},
		{"verbose", no_argument, NULL, 'v'},
		{"stdin", no_argument, NULL, 's'},
		{NULL, 0, NULL, 0},
	};
	const char *default_path = nfs_config_path;
	bool verbose = false, from_stdin = false;
	struct parse_notes notes = {false, NULL, 0};
	struct config_error_type err;
	config_file_t root;
	char *path;
	void *block = NULL;
	unsigned int blocks = 0, refused = 0;
	int opt;

	while ((opt = getopt_long(argc, argv, "hv", options, NULL)) != -1) {
		switch (opt) {
		case 'h': printf(usage, default_path); return 0;
		case 'v': verbose = true; break;
		case 's': from_stdin = true; break;
		default: fprintf(stderr, usage, default_path); return 2;
		}
	}
	if (optind < argc && strcmp(argv[optind], "-") == 0 && !from_stdin) {
		from_stdin = true;
		++optind;
	}
	if (optind < argc - (from_stdin ? 0 : 1)) {
		fprintf(stderr, "dcache-check: one configuration at a time\n");
		fprintf(stderr, usage, default_path);
		return 2;
	}

	ganesha_logging_init();
	path = from_stdin
		       ? stdin_copy()
		       : file_path(optind < argc ? argv[optind] : default_path);
	if (path == NULL)
		return 2;
	config_url_init();
	/* EEXIST: Ganesha's backend came first and serves every rados://
	 * URL, this one is never asked. */
	(void)register_url_provider(&offline_rados);

	if (!init_error_type(&err)) {
		fprintf(stderr, "dcache-check: out of memory\n");
		return 2;
	}
	root = config_ParseFile(path, &err);
	report_config_errors(&err, &notes, print_parse_error);
	if (root == NULL || !config_error_is_harmless(&err)) {
		char *kinds = err_type_str(&err);

		if (root != NULL && !notes.abandoned)
			(void)name_unscannables(root, &notes);

		fprintf(stderr,
			"dcache-check: %s: Ganesha's parser fails on it %s: ganesha.nfsd would not start with it\n",
			from_stdin ? "(stdin)" : path, kinds ? kinds : "");
		gsh_free(kinds);
		config_Free(root);
		return 2;
	}
	if (notes.abandoned) {
		fprintf(stderr,
			"dcache-check: %s: Ganesha's parser gave up on it (above): ganesha.nfsd would read none of its blocks, DCACHE exports included\n",
			from_stdin ? "(stdin)" : path);
		config_Free(root);
		return 2;
	}

	while ((block = dcache_conf_next_dcache_block(root, block)) != NULL) {
		++blocks;
		refused += !check_block(block, verbose);
	}
	if (blocks == 0)
		fprintf(stderr,
			"dcache-check: %s: no EXPORT has an FSAL { Name = DCACHE; } block%s\n",
			from_stdin ? "(stdin)" : path,
			urls_not_checked ? " (apart from the %url not checked)"
					 : "");
	else if (verbose)
		printf("dcache-check: %u DCACHE export%s, %u refused\n", blocks,
		       blocks == 1 ? "" : "s", refused);
	config_Free(root);
	gsh_free(path);
	return refused > 0 ? 1 : 0;
}
