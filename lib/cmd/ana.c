/* SPDX-License-Identifier: MIT */
/*
 * `blkstack ana-state EXPORT [PORT STATE [GROUP]]`: show or set the
 * states of an export's ports (an nvmf export: each listener's
 * Asymmetric Namespace Access state, per ANA group) in blkstackd. The export type does the work through its
 * optional set_port_state op (bs_export_port_state()).
 */
#include <stdarg.h>
#include <stdio.h>

#include <blkstack/bdev.h>
#include <blkstack/cmd.h>
#include <blkstack/export.h>

#include "cmd/internal.h"

static void port_line(void *arg, const char *key, const char *fmt, ...)
{
	struct bs_cmd_env *env = arg;
	va_list ap;

	fprintf(env->out, "%s ", key);
	va_start(ap, fmt);
	vfprintf(env->out, fmt, ap);
	va_end(ap);
	fputc('\n', env->out);
}

static int ana_run(struct bs_cmd_env *env, int argc, char **argv)
{
	struct bs_export *exp;
	int err;

	if ((argc != 2 && argc != 4 && argc != 5) || argv[1][0] == '-')
		return cmd_usage(env, "ana-state", "%s",
				 argc < 2 ? "EXPORT is missing"
				 : argc == 3 ? "a PORT needs a STATE"
				 : argc > 5 ? "EXPORT [PORT STATE [GROUP]], "
					      "please"
					    : "no options but --help");
	if (!env->exports) {
		fprintf(env->err, "blkstack: ana-state: exports live in "
			"blkstackd: give its control socket (-s SOCKET)\n");
		return CMD_FAILED;
	}
	exp = bs_export_find(env->exports, argv[1]);
	if (!exp) {
		fprintf(env->err, "blkstack: ana-state: no export '%s'\n",
			argv[1]);
		return CMD_FAILED;
	}
	err = bs_export_port_state(exp, argc >= 4 ? argv[2] : NULL,
				   argc >= 4 ? argv[3] : NULL,
				   argc == 5 ? argv[4] : NULL, port_line, env);
	if (err)
		return bs_cmd_fail(env, argv[1], "ana-state", err);
	return CMD_OK;
}

static const struct bs_cmd ana_cmd = {
	.name = "ana-state",
	.usage = "ana-state EXPORT [PORT STATE [GROUP]]",
	.summary = "show or set the ANA state of an nvmf export's ports (-s)",
	.run = ana_run,
	.help =
	"DESCRIPTION\n"
	"  In blkstackd (-s SOCKET): prints every port of EXPORT, one a\n"
	"  line, with its address and Asymmetric Namespace Access state:\n"
	"\n"
	"    port.1 127.0.0.1:4420 optimized\n"
	"    port.2 127.0.0.1:4421 inaccessible\n"
	"\n"
	"  When the namespaces sit in several ANA groups (ana_group.NSID),\n"
	"  one line a port and group, port.N.G:\n"
	"\n"
	"    port.1.1 127.0.0.1:4420 optimized\n"
	"    port.1.2 127.0.0.1:4420 non-optimized\n"
	"\n"
	"  With PORT and STATE it first sets that port's state, of every\n"
	"  group or of group GROUP only; the hosts connected through the\n"
	"  port get an ANA change event, and their I/O on it for a\n"
	"  namespace of a changed group the path status of the state\n"
	"  (docs/nvmf.md). PORT is the port's number (1 = listen, N =\n"
	"  listen.N) or its address; GROUP an ANA group ID a namespace is\n"
	"  in. The state lasts until the daemon stops (ana_state.N and\n"
	"  ana_state.N.G in the config are the ones at start).\n"
	"\n"
	"STATES\n"
	"  optimized        the preferred path\n"
	"  non-optimized    serves I/O, used when no optimized path is up\n"
	"  inaccessible     I/O fails with ANA Inaccessible (try another path)\n"
	"  persistent-loss  I/O fails with ANA Persistent Loss\n"
	"  change           I/O fails with ANA Transition (a state is coming)\n"
	"\n"
	"  Only export types with port states have this (nvmf, with ANA on:\n"
	"  several listeners, an ana_state.N line or ana = 1).\n"
	"\n"
	"OPTIONS\n"
	"  --help    show this text.\n"
	"\n"
	"EXIT STATUS\n"
	"  0  success\n"
	"  1  no such export, no port states, unknown port, state or group\n"
	"  2  usage error\n"
	"\n"
	"EXAMPLES\n"
	"  blkstack -s /run/blkstack/control.sock ana-state s0\n"
	"  blkstack -s /run/blkstack/control.sock ana-state s0 2 inaccessible\n"
	"  blkstack -s /run/blkstack/control.sock ana-state s0 1 non-optimized 2\n",
};

BS_CMD(ana_cmd)
