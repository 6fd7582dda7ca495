/* SPDX-License-Identifier: MIT */
/* `blkstack info`: size, limits, capabilities and counters of a device. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/caps.h>
#include <blkstack/cmd.h>
#include <blkstack/zero.h>

#include "cmd/internal.h"

#define KEYW 32 /* width of the key column */

/* ---- human table ----------------------------------------------------------- */

static void row(FILE *f, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void row(FILE *f, const char *key, const char *fmt, ...)
{
	va_list ap;

	fprintf(f, "  %-*s ", KEYW, key);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
}

static void row_bytes(FILE *f, const char *key, uint64_t v)
{
	char h[32];

	if (v)
		row(f, key, "%llu (%s)", (unsigned long long)v,
		    bs_fmt_size(v, h, sizeof(h)));
	else
		row(f, key, "0");
}

static void kv_text(void *arg, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void kv_text(void *arg, const char *key, const char *fmt, ...)
{
	FILE *f = arg;
	va_list ap;

	fprintf(f, "  %-*s ", KEYW, key);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
}

static const char *yes_no(bool b)
{
	return b ? "yes" : "no";
}

static uint64_t sect_bytes(uint32_t sectors)
{
	return (uint64_t)sectors << BS_SECTOR_SHIFT;
}

static void print_text(FILE *f, struct bs_dev *dev)
{
	const struct bs_limits *l = &dev->limits;
	struct bs_dev_stats stats, *st = &stats;
	bool disabled = l->flags & BS_FLAG_WRITE_ZEROES_UNMAP_DISABLED;
	bool wzu = bs_dev_write_zeroes_unmap(dev);
	int64_t alloc = bs_dev_allocated(dev);
	struct bs_caps caps;
	char h[32];
	unsigned i;
	int op;

	bs_dev_stats_read(dev, &stats);	/* I/O threads count meanwhile */
	bs_dev_caps(dev, &caps);

	fprintf(f, "%s\n", dev->name);
	row(f, "type", "%s", dev->type->name);
	row(f, "state", "%s%s%s", bs_dev_state_name(dev->state),
	    *dev->state_reason ? ": " : "", dev->state_reason);
	row(f, "size", "%llu (%s)", (unsigned long long)dev->size,
	    bs_fmt_size(dev->size, h, sizeof(h)));
	if (alloc >= 0)
		row(f, "allocated", "%lld (%s)", (long long)alloc,
		    bs_fmt_size((uint64_t)alloc, h, sizeof(h)));
	row(f, "read-only", "%s", yes_no(dev->readonly));
	if (dev->ncomponents) {
		char list[512] = "";
		for (i = 0; i < dev->ncomponents; i++)
			snprintf(list + strlen(list), sizeof(list) - strlen(list),
				 "%s%s", i ? " " : "", dev->components[i]->name);
		row(f, "components", "%s", list);
	}
	/* who uses it, and how (claims: docs/core.md) */
	{
		const struct bs_claim *c = NULL;
		char list[512] = "";

		while ((c = bs_dev_claim_next(dev, c)))
			snprintf(list + strlen(list), sizeof(list) - strlen(list),
				 "%s%s (%s)", *list ? ", " : "",
				 bs_claim_holder(c),
				 bs_claim_mode_name(bs_claim_mode_of(c)));
		row(f, "in use by", "%s", *list ? list : "nobody");
	}

	fprintf(f, "limits\n");
	row(f, "logical_block_size", "%u", l->logical_block_size);
	row(f, "physical_block_size", "%u", l->physical_block_size);
	row(f, "io_min", "%u", l->io_min);
	row(f, "io_opt", "%u", l->io_opt);
	row_bytes(f, "max_hw_io (max_hw_sectors)", sect_bytes(l->max_hw_sectors));
	row_bytes(f, "max_user_io (max_sectors_kb)",
		  sect_bytes(l->max_user_sectors));
	row_bytes(f, "max_io (max_sectors)", sect_bytes(l->max_sectors));
	row_bytes(f, "max_write_zeroes",
		  sect_bytes(l->max_write_zeroes_sectors));
	row_bytes(f, "max_discard", sect_bytes(l->max_discard_sectors));
	row(f, "discard_granularity", "%u", l->discard_granularity);
	if (l->max_segments)
		row(f, "max_segments", "%u", l->max_segments);
	else
		row(f, "max_segments", "unlimited");

	fprintf(f, "features\n");
	row(f, "write_cache", "%s%s", yes_no(l->features & BS_FEAT_WRITE_CACHE),
	    (l->features & BS_FEAT_WRITE_CACHE) &&
			    (l->flags & BS_FLAG_WRITE_CACHE_DISABLED)
		    ? " (disabled by the user: write through)"
		    : "");
	row(f, "fua", "%s", yes_no(l->features & BS_FEAT_FUA));
	row(f, "rotational", "%s", yes_no(l->features & BS_FEAT_ROTATIONAL));
	row(f, "write_zeroes", "%s", yes_no(l->max_write_zeroes_sectors));
	row(f, "write_zeroes_unmap (feature)", "%s",
	    yes_no(l->features & BS_FEAT_WRITE_ZEROES_UNMAP));
	row(f, "queue/write_zeroes_unmap (knob)", "%s",
	    disabled ? "0 (disabled by the user)" : "1");
	row(f, "write_zeroes_unmap", "%s%s%s", yes_no(wzu),
	    *dev->wz_reason ? ": " : "", dev->wz_reason);
	if (!wzu)
		row(f, "fallocate WRITE_ZEROES", "not offered: %s",
		    caps.why_no_unmap);
	else
		row(f, "fallocate WRITE_ZEROES", "offered (unmap zeroing)");

	/* what a front end may advertise (bs_dev_caps) */
	fprintf(f, "capabilities\n");
	row(f, "zeroing", "%s%s%s", bs_cap_how_name(caps.zeroing),
	    *caps.why_emulated_zeroing ? ": " : "", caps.why_emulated_zeroing);
	row(f, "fast_zero", "%s", yes_no(caps.fast_zero));
	row(f, "discard", "%s%s%s", yes_no(caps.discard),
	    *caps.why_no_discard ? ": " : "", caps.why_no_discard);
	row(f, "discard reads zeroes", "%s", yes_no(caps.discard_zeroes));
	row(f, "fua", "%s", bs_cap_how_name(caps.fua));
	row(f, "generation", "%llu", (unsigned long long)caps.generation);

	if (dev->type->describe) {
		fprintf(f, "%s\n", dev->type->name);
		bs_dev_describe(dev, kv_text, f);
	}

	fprintf(f, "requests (ops / bytes)\n");
	for (op = 0; op < BS_OP__COUNT; op++)
		row(f, bs_op_name((enum bs_op)op), "%llu / %llu",
		    (unsigned long long)st->ops[op],
		    (unsigned long long)st->bytes[op]);
	row(f, "errors", "%llu", (unsigned long long)st->errors);
}

/* ---- JSON ------------------------------------------------------------------ */

static void kv_json(void *arg, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void kv_json(void *arg, const char *key, const char *fmt, ...)
{
	json_t *obj = arg;
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	json_object_set_new(obj, key, json_string(buf));
}

static json_t *to_json(struct bs_dev *dev)
{
	const struct bs_limits *l = &dev->limits;
	struct bs_dev_stats counts, *st = &counts;
	int64_t alloc = bs_dev_allocated(dev);
	json_t *o = json_object(), *lim = json_object(), *feat = json_object();
	json_t *stats = json_object(), *comps = json_array(), *desc, *capj;
	struct bs_caps caps;
	unsigned i;
	int op;

	bs_dev_stats_read(dev, &counts);	/* I/O threads count meanwhile */
	bs_dev_caps(dev, &caps);

	if (!o || !lim || !feat || !stats || !comps) {
		json_decref(o);
		json_decref(lim);
		json_decref(feat);
		json_decref(stats);
		json_decref(comps);
		return NULL;
	}
	json_object_set_new(o, "name", json_string(dev->name));
	json_object_set_new(o, "type", json_string(dev->type->name));
	json_object_set_new(o, "state",
			    json_string(bs_dev_state_name(dev->state)));
	if (*dev->state_reason)
		json_object_set_new(o, "state_reason",
				    json_string(dev->state_reason));
	json_object_set_new(o, "size", json_integer((json_int_t)dev->size));
	json_object_set_new(o, "allocated",
			    alloc >= 0 ? json_integer(alloc) : json_null());
	json_object_set_new(o, "readonly", json_boolean(dev->readonly));
	for (i = 0; i < dev->ncomponents; i++)
		json_array_append_new(comps,
				      json_string(dev->components[i]->name));
	json_object_set_new(o, "components", comps);
	{
		const struct bs_claim *c = NULL;
		json_t *claims = json_array(), *one;

		while (claims && (c = bs_dev_claim_next(dev, c))) {
			one = json_object();
			if (!one)
				break;
			json_object_set_new(one, "holder",
					    json_string(bs_claim_holder(c)));
			json_object_set_new(one, "mode", json_string(
				bs_claim_mode_name(bs_claim_mode_of(c))));
			json_array_append_new(claims, one);
		}
		json_object_set_new(o, "claims", claims ? claims : json_null());
	}

#define LIMIT(name, v) json_object_set_new(lim, name, json_integer((json_int_t)(v)))
	LIMIT("logical_block_size", l->logical_block_size);
	LIMIT("physical_block_size", l->physical_block_size);
	LIMIT("io_min", l->io_min);
	LIMIT("io_opt", l->io_opt);
	LIMIT("max_hw_sectors", l->max_hw_sectors);
	LIMIT("max_user_sectors", l->max_user_sectors);
	LIMIT("max_sectors", l->max_sectors);
	LIMIT("max_write_zeroes_sectors", l->max_write_zeroes_sectors);
	LIMIT("max_write_zeroes_bytes", sect_bytes(l->max_write_zeroes_sectors));
	LIMIT("max_discard_sectors", l->max_discard_sectors);
	LIMIT("discard_granularity", l->discard_granularity);
	LIMIT("max_segments", l->max_segments);
	LIMIT("features", l->features);
	LIMIT("flags", l->flags);
#undef LIMIT
	json_object_set_new(o, "limits", lim);

	json_object_set_new(feat, "write_cache",
			    json_boolean(l->features & BS_FEAT_WRITE_CACHE));
	json_object_set_new(feat, "write_cache_enabled",
			    json_boolean(bs_limits_write_cache(l)));
	json_object_set_new(feat, "fua",
			    json_boolean(l->features & BS_FEAT_FUA));
	json_object_set_new(feat, "rotational",
			    json_boolean(l->features & BS_FEAT_ROTATIONAL));
	json_object_set_new(feat, "write_zeroes",
			    json_boolean(l->max_write_zeroes_sectors));
	json_object_set_new(feat, "write_zeroes_unmap_feature",
			    json_boolean(l->features &
					 BS_FEAT_WRITE_ZEROES_UNMAP));
	json_object_set_new(o, "features", feat);

	/* the capability itself, at the top where scripts look first */
	json_object_set_new(o, "write_zeroes_unmap",
			    json_boolean(bs_dev_write_zeroes_unmap(dev)));
	json_object_set_new(o, "write_zeroes_unmap_knob",
			    json_integer(!(l->flags &
					   BS_FLAG_WRITE_ZEROES_UNMAP_DISABLED)));
	json_object_set_new(o, "write_zeroes_unmap_reason",
			    json_string(dev->wz_reason));
	json_object_set_new(o, "write_zeroes_unmap_why_not",
			    json_string(caps.why_no_unmap));
	capj = json_object();
	if (capj) {
		json_object_set_new(capj, "zeroing",
				    json_string(bs_cap_how_name(caps.zeroing)));
		json_object_set_new(capj, "zeroing_why_emulated",
				    json_string(caps.why_emulated_zeroing));
		json_object_set_new(capj, "write_zeroes_unmap",
				    json_boolean(caps.write_zeroes_unmap));
		json_object_set_new(capj, "fast_zero",
				    json_boolean(caps.fast_zero));
		json_object_set_new(capj, "discard", json_boolean(caps.discard));
		json_object_set_new(capj, "discard_why_not",
				    json_string(caps.why_no_discard));
		json_object_set_new(capj, "discard_zeroes",
				    json_boolean(caps.discard_zeroes));
		json_object_set_new(capj, "fua",
				    json_string(bs_cap_how_name(caps.fua)));
		json_object_set_new(capj, "max_transfer",
				    json_integer((json_int_t)caps.max_transfer));
		json_object_set_new(capj, "generation",
				    json_integer((json_int_t)caps.generation));
		json_object_set_new(o, "capabilities", capj);
	}

	desc = json_object();
	if (desc) {
		bs_dev_describe(dev, kv_json, desc);
		json_object_set_new(o, dev->type->name, desc);
	}

	for (op = 0; op < BS_OP__COUNT; op++) {
		json_t *c = json_object();
		if (!c)
			continue;
		json_object_set_new(c, "ops", json_integer((json_int_t)st->ops[op]));
		json_object_set_new(c, "bytes",
				    json_integer((json_int_t)st->bytes[op]));
		json_object_set_new(stats, bs_op_name((enum bs_op)op), c);
	}
	json_object_set_new(stats, "errors",
			    json_integer((json_int_t)st->errors));
	json_object_set_new(o, "requests", stats);
	return o;
}

/* ---- the command ----------------------------------------------------------- */

static int info_run(struct bs_cmd_env *env, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct bs_dev *dev;
	bool json = false;
	int c, err;

	while ((c = getopt_long(argc, argv, "+:j", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		default:
			return cmd_bad_option(env, "info", argv, c);
		}
	}
	if (optind != argc - 1)
		return cmd_usage(env, "info", "%s",
				 optind >= argc ? "DEV is missing"
						: "only one DEV, please");
	err = bs_cmd_find_dev(env, argv[optind], &dev);
	if (err)
		return bs_cmd_fail(env, argv[optind], "open", err);
	if (json) {
		json_t *o = to_json(dev);
		if (!o || json_dumpf(o, env->out, JSON_INDENT(2) |
						  JSON_PRESERVE_ORDER)) {
			json_decref(o);
			bs_error(-ENOMEM, "cannot format JSON");
			return bs_cmd_fail(env, dev->name, "info", -ENOMEM);
		}
		fputc('\n', env->out);
		json_decref(o);
	} else {
		print_text(env->out, dev);
	}
	return CMD_OK;
}

static const struct bs_cmd info_cmd = {
	.name = "info",
	.usage = "info [--json] DEV",
	.summary = "show a device's size, limits and zeroing capabilities",
	.run = info_run,
	.help =
	"DESCRIPTION\n"
	"  Prints what the block layer knows about DEV: its type and size, the\n"
	"  bytes of backing storage in use (for types that can tell), every\n"
	"  queue limit, the features, the write_zeroes_unmap capability with\n"
	"  the reason the driver or the stack gave for it, the type's own\n"
	"  facts (path, zeroing mode...) and the request counters.\n"
	"\n"
	"  write_zeroes_unmap is the feature (the device can zero by\n"
	"  deallocating, and reads of that range return zeroes) and the user's\n"
	"  knob queue/write_zeroes_unmap both on. Only then is fallocate\n"
	"  WRITE_ZEROES offered (see `blkstack help fallocate`).\n"
	"\n"
	"OPTIONS\n"
	"  --json    print one JSON object instead of the table. Keys: name,\n"
	"            type, size, allocated (null when unknown), readonly,\n"
	"            components, limits{...}, features{...},\n"
	"            write_zeroes_unmap (bool), write_zeroes_unmap_knob (0/1),\n"
	"            write_zeroes_unmap_reason, write_zeroes_unmap_why_not,\n"
	"            an object named after the type, requests{OP:{ops,bytes}}.\n"
	"  --help    show this text.\n"
	"\n"
	CMD_HELP_DEV
	CMD_HELP_EXIT
	"EXAMPLES\n"
	"  blkstack info mem:1G\n"
	"  blkstack info --json file:var/vol0.img,size=64G | jq .write_zeroes_unmap\n"
	"  blkstack -c blkstack.ini info vol0\n",
};

BS_CMD(info_cmd)
