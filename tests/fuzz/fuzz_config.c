/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the parsers of what users type, dispatched on the
 * first byte (its value mod 3), the rest being the text:
 *
 *   0 ('c')  a config file: bs_config_load_string(), then the checks the
 *            daemon runs before creating anything (devices, exports);
 *   1 ('s')  a device spec: bs_opts_parse_spec(), the known-key check of
 *            its type, and the typed getters;
 *   2 ('z')  a size: bs_parse_size(), compared with a second, independent
 *            reading of the documented grammar.
 *
 * Nothing is opened or created: file specs would write to the disk.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/config.h>
#include <blkstack/export.h>
#include <blkstack/opts.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_config(const char *text)
{
	struct bs_config *cfg = NULL;
	struct bs_config_section *s;
	unsigned n = 0;

	if (bs_config_load_string(text, "fuzz.ini", &cfg))
		return;
	for (s = bs_config_next(cfg, "device", NULL); s;
	     s = bs_config_next(cfg, "device", s))
		n++;
	for (s = bs_config_next(cfg, "export", NULL); s;
	     s = bs_config_next(cfg, "export", s))
		n++;
	for (s = bs_config_next(cfg, "daemon", NULL); s;
	     s = bs_config_next(cfg, "daemon", s))
		n++;
	if (n != cfg->nsections)
		abort();	/* every section has a known kind */
	for (unsigned i = 0; i < cfg->nsections; i++) {
		const char *k, *v;

		s = &cfg->sections[i];
		if (s->line < 1)
			abort();
		for (unsigned j = 0; bs_opts_at(s->opts, j, &k, &v); j++) {
			size_t kl = strlen(k), vl = strlen(v);

			/* keys and values come trimmed, comments cut */
			if (!kl || strchr(k, '=') || strchr(k, '\n'))
				abort();
			if (k[0] == ' ' || k[kl - 1] == ' ' ||
			    (vl && (v[0] == ' ' || v[vl - 1] == ' ')))
				abort();
			if (strstr(v, " #") || strstr(v, " ;") ||
			    v[0] == '#' || v[0] == ';')
				abort();
		}
	}
	if (!bs_config_check_devices(cfg, NULL))
		bs_config_check_exports(cfg);
	bs_config_free(cfg);
}

static void fuzz_spec(const char *text)
{
	static const char *const core[] = { "type", "readonly",
					    "write_zeroes_unmap", "claim",
					    "devices", NULL };
	static const char *const choices[] = { "unmap", "write", "none", NULL };
	const struct bs_dev_type *t;
	struct bs_opts *o = NULL;
	char *type = NULL;
	uint64_t v64;
	uint32_t v32;
	bool b;
	int e;

	if (bs_opts_parse_spec(text, &type, &o))
		return;
	t = bs_dev_type_find(type);
	bs_opts_set_label(o, type);
	if (t && t->options)
		bs_opts_check_known(o, core, t->options);
	bs_opts_get_size(o, "size", &v64);
	bs_opts_get_size(o, "chunk", &v64);
	bs_opts_get_u32(o, "logical_block_size", &v32);
	bs_opts_get_bool(o, "readonly", &b);
	bs_opts_get_enum(o, "zeroes", choices, &e);
	bs_opts_get(o, "path");
	bs_opts_check_unused(o);
	bs_opts_free(o);
	free(type);
}

/* The grammar of docs/core.md, read a second way: digits [unit ["iB"]]. */
static int size_model(const char *s, uint64_t *out)
{
	static const char units[] = "kmgtpe";
	unsigned __int128 v = 0;
	unsigned shift = 0;
	size_t i = 0, nd = 0;
	bool big = false;

	while (s[i] >= '0' && s[i] <= '9') {
		v = v * 10 + (unsigned)(s[i++] - '0');
		nd++;
		if (v > UINT64_MAX)
			big = true, v = (unsigned __int128)UINT64_MAX + 1;
	}
	if (!nd)
		return -EINVAL;
	if (s[i]) {
		/* ASCII: only 'K' and 'k' (...) fold to "k" (...) with | 0x20 */
		const char *u = strchr(units, s[i] | 0x20);

		if (!u)
			return -EINVAL;
		shift = 10 * (unsigned)(u - units + 1);
		i++;
		if (!strcmp(s + i, "iB"))
			i += 2;
		if (s[i])
			return -EINVAL;
	}
	if (big || (v << shift) > UINT64_MAX)
		return -ERANGE;
	*out = (uint64_t)(v << shift);
	return 0;
}

static void fuzz_size(const char *text)
{
	uint64_t a = 7, b = 7;
	int ea = bs_parse_size(text, &a), eb = size_model(text, &b);
	char buf[32];

	if (ea != eb || a != b)
		abort();
	if (ea && !*bs_size_strerror(ea))
		abort();
	bs_fmt_size(a, buf, sizeof(buf));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text;

	if (size < 1 || size > 256 * 1024)
		return 0;
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	switch (data[0] % 3) {
	case 0: fuzz_config(text); break;
	case 1: fuzz_spec(text); break;
	default: fuzz_size(text); break;
	}
	free(text);
	return 0;
}
