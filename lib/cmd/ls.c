/* SPDX-License-Identifier: MIT */
/*
 * `blkstack ls`: the devices of the config file (or of the daemon) as
 * trees, with sizes and capabilities. The view is the explain library's.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/cmd.h>
#include <blkstack/export.h>
#include <blkstack/explain.h>

#include "cmd/internal.h"

/* The facts of an export's describe() that the table shows. */
struct exp_facts {
	char listen[256];
	char clients[32];
	char state[32];
};

static void exp_kv(void *arg, const char *key, const char *fmt, ...)
{
	struct exp_facts *f = arg;
	char *dst = NULL, val[256];
	size_t size = 0, used;
	va_list ap;

	if (!strcmp(key, "listen") || !strcmp(key, "socket")) {
		dst = f->listen;
		size = sizeof(f->listen);
	} else if (!strcmp(key, "clients")) {
		dst = f->clients;
		size = sizeof(f->clients);
	} else if (!strcmp(key, "state")) {
		dst = f->state;
		size = sizeof(f->state);
	}
	if (!dst)
		return;
	va_start(ap, fmt);
	vsnprintf(val, sizeof(val), fmt, ap);
	va_end(ap);
	/* several listeners: one comma-separated cell */
	used = strlen(dst);
	snprintf(dst + used, size - used, "%s%s", used ? "," : "", val);
}

/*
 * The daemon's exports under the devices: which device each unit serves,
 * how many clients are connected, where it listens.
 */
static void print_exports(struct bs_cmd_env *env)
{
	struct bs_export *e;
	bool first = true;

	for (e = bs_export_next(env->exports, NULL); e;
	     e = bs_export_next(env->exports, e)) {
		struct exp_facts f = { .clients = "" };
		char units[512] = "";
		size_t used = 0;
		unsigned i;

		if (e->type->describe)
			e->type->describe(e, exp_kv, &f);
		for (i = 0; i < e->nunits && used < sizeof(units) - 1; i++) {
			const struct bs_export_unit *u = &e->units[i];
			bool same = e->nunits == 1 && !strcmp(u->name, e->name);

			snprintf(units + used, sizeof(units) - used, "%s%s%s%s%s",
				 i ? "," : "", same ? "" : u->name,
				 same ? "" : "=", u->dev ? u->dev->name : "?",
				 u->readonly ? "(ro)" : "");
			used = strlen(units);
		}
		if (first) {
			fprintf(env->out, "\n%-16s %-6s %7s  %-24s %s\n", "EXPORT",
				"TYPE", "CLIENTS", "LISTEN", "UNITS");
			first = false;
		}
		fprintf(env->out, "%-16s %-6s %7s  %-24s %s%s%s\n", e->name,
			e->type->name, f.clients[0] ? f.clients : "-",
			f.listen[0] ? f.listen : "-", units,
			f.state[0] ? "  " : "", f.state);
	}
}

static int ls_run(struct bs_cmd_env *env, int argc, char **argv)
{
	if (argc > 1)
		return cmd_usage(env, "ls", "%s", argv[1][0] == '-'
				 ? "no options but --help" : "no arguments");
	bs_ls_print(env->ctx, env->out);
	if (env->exports)
		print_exports(env);
	return CMD_OK;
}

static const struct bs_cmd ls_cmd = {
	.name = "ls",
	.usage = "ls",
	.summary = "list the devices (and the daemon's exports), as trees",
	.run = ls_run,
	.help =
	"DESCRIPTION\n"
	"  Lists the devices defined by -c FILE (or, with -s SOCKET, served by\n"
	"  the daemon) in creation order. Devices that no other device uses are\n"
	"  roots; the components of a stacked device are indented under it.\n"
	"  Columns:\n"
	"    NAME      the device (with its place in the tree)\n"
	"    TYPE      its type (mem, file, hostbdev, linear, striped, ...)\n"
	"    SIZE      its size; `opening` while its open goes on (a remote\n"
	"              device connecting, a mapper waiting for one), `failed`\n"
	"              when it could not open (`blkstack info DEV` says why)\n"
	"    WZ-UNMAP  yes when it zeroes by unmapping (queue/write_zeroes_unmap\n"
	"              reads 1); `blkstack explain DEV` says why not\n"
	"    WZ-MAX    largest write-zeroes command (queue/write_zeroes_max_bytes),\n"
	"              - when it has none\n"
	"    DISCARD   largest discard (queue/discard_max_bytes), - when none\n"
	"  With -s, the daemon's exports follow, one line each:\n"
	"    EXPORT    the [export] section's name\n"
	"    TYPE      nbd, iscsi, ...\n"
	"    CLIENTS   connections now\n"
	"    LISTEN    its addresses and sockets (comma-separated)\n"
	"    UNITS     the device served (DEV), or UNIT=DEV for each unit of a\n"
	"              target (NBD export names, iSCSI LUNs); (ro) = read-only;\n"
	"              `stopping` follows while the export drains\n"
	"  Without -c or -s the list is empty.\n"
	"\n"
	"OPTIONS\n"
	"  --help    show this text.\n"
	"\n"
	CMD_HELP_EXIT
	"EXAMPLES\n"
	"  blkstack -c blkstack.ini ls\n"
	"  blkstack -s /run/blkstack/control.sock ls\n",
};

BS_CMD(ls_cmd)
