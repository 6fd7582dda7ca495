/* SPDX-License-Identifier: MIT */
/*
 * blkstackd: serve the devices of a config (or the embedded default) to
 * network clients, with a control socket for `blkstack -s`.
 *
 * Start-up errors (bad config, busy address) are one line on stderr and
 * exit status 1, also when going to the background: the parent waits for
 * the daemon to say it is ready. SIGTERM/SIGINT stop gracefully: no new
 * clients, requests in flight finish and are answered, devices are
 * flushed; a second signal closes clients at once.
 */
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/budget.h>
#include <blkstack/cmd.h>
#include <blkstack/threads.h>
#include <blkstack/config.h>
#include <blkstack/export.h>
#include <blkstack/loop.h>
#include <blkstack/opts.h>

#include "daemon.h"

#ifndef BLKSTACK_VERSION
#define BLKSTACK_VERSION "0.1.0"
#endif

#define DEFAULT_STATE_DIR "./var"
/* Clients get this long to finish after a stop signal. */
#define DRAIN_MS 30000
#define DRAIN_TICK_MS 50

static int log_fd = STDERR_FILENO;

void bsd_log(const char *fmt, ...)
{
	char line[1400];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n, m;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = (int)strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
	n += snprintf(line + n, sizeof(line) - (size_t)n, ".%03ldZ blkstackd: ",
		      ts.tv_nsec / 1000000);
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* one write per line: lines of concurrent writers never mix */
	if (write(log_fd, line, (size_t)n) < 0) {
		/* nowhere left to report it */
	}
}

static void export_log(void *arg, const char *msg)
{
	(void)arg;
	bsd_log("%s", msg);
}

static const char usage_text[] =
"Usage: blkstackd [-c CONFIG] [-d STATE_DIR] [-f]\n"
"\n"
"Serve blkstack devices to network clients (NBD, iSCSI, NVMe/TCP, NFS\n"
"v4.2), with a control socket for `blkstack -s SOCKET COMMAND ...`.\n"
"\n"
"Options:\n"
"  -c, --config=FILE     the INI config: [device NAME], [export NAME] and\n"
"                        [daemon] sections (see docs/daemon.md). Without\n"
"                        it, the embedded default below is served.\n"
"  -d, --state-dir=DIR   where the default volume, the sockets, the pid\n"
"                        file and (in the background) the log live;\n"
"                        overrides [daemon] state_dir (default ./var)\n"
"  -f, --foreground      stay in the foreground and log to stderr\n"
"                        (otherwise: detach, log to STATE_DIR/blkstackd.log)\n"
"  -h, --help            this text\n"
"  -V, --version         the version\n"
"\n"
"The embedded default: a thin 64 GiB `file` device vol0 at\n"
"STATE_DIR/vol0.img (created sparse if missing), exported over NBD as\n"
"vol0 on 127.0.0.1:10809 and on the UNIX socket STATE_DIR/nbd.sock:\n"
"\n"
"  nbdinfo nbd://127.0.0.1/vol0\n"
"  qemu-io -f raw nbd://127.0.0.1:10809/vol0\n"
"  blkstack -s STATE_DIR/blkstackd.sock ls\n"
"\n"
"[daemon] keys: state_dir = DIR, control = PATH (the control socket,\n"
"default STATE_DIR/blkstackd.sock), max_inflight = SIZE (payload held in\n"
"flight by all clients together, default the lesser of 1G and RAM/8, at\n"
"least 64M; above it new requests wait), stall_timeout = SECONDS (a client\n"
"that holds part of that budget and makes no progress this long while\n"
"others wait is closed; default 30, 0 = never), threads = N (I/O threads\n"
"serving the clients, 1 to 64; default one per CPU), poll_us = US (an I/O\n"
"thread whose clients keep answering within US microseconds spins that\n"
"long before it sleeps: lower latency at queue depth 1 for some CPU;\n"
"default 50, 0 = never spin), event_loop = epoll|io_uring (how an I/O\n"
"thread waits; io_uring also receives and sends through its ring: half\n"
"the syscalls per request, not yet faster here; default epoll).\n"
"\n"
"Signals: SIGTERM or SIGINT stop: no new clients, requests in flight are\n"
"finished and answered (up to 30 s), every device is flushed. A second\n"
"signal closes the clients at once.\n"
"\n"
"Exit status: 0 after a clean stop, 1 when start-up failed or a device\n"
"could not be flushed, 2 on a usage error.\n"
"\n"
"[device NAME] sections take the device types of `blkstack help`.\n"
"[export NAME] sections: type = TYPE, device = DEV (or unit lines, see\n"
"docs/daemon.md), readonly = 0|1, and the keys of their type:\n";

/* The text, then the export types as this build registered them. */
static void usage(FILE *f)
{
	const struct bs_export_type *t;

	fputs(usage_text, f);
	for (t = bs_export_type_next(NULL); t; t = bs_export_type_next(t)) {
		fprintf(f, "  %s - %s\n", t->name, t->summary ? t->summary : "");
		if (t->options)
			bs_cmd_print_options(f, t->options);
	}
}

static const char default_config[] =
"[device vol0]\n"
"type = file\n"
"path = %s/vol0.img\n"
"size = 64G\n"
"\n"
"[export vol0]\n"
"type = nbd\n"
"device = vol0\n"
"description = blkstack default thin volume\n"
"listen = 127.0.0.1:10809\n"
"socket = %s/nbd.sock\n";

/* ---- what a start created ------------------------------------------------ */

/*
 * A failed start leaves the disk as it was: everything the start may
 * create is noted first (paths that do not exist yet: backing files, the
 * log; directories mkdir_p makes), and on failure exactly those are
 * removed again, files first, then directories (only if empty). Nothing
 * that existed before is touched.
 */
struct undo {
	char **files;		/* absent at the start */
	unsigned nfiles;
	char **dirs;		/* made by this start, outermost first */
	unsigned ndirs;
};

static struct undo undo;

static int undo_push(char ***v, unsigned *n, const char *path)
{
	char **nv = realloc(*v, (*n + 1) * sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	*v = nv;
	if (!(nv[*n] = strdup(path)))
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* Remember @path if nothing is there yet. */
static int undo_note_file(const char *path)
{
	struct stat st;

	if (lstat(path, &st) == 0 || errno != ENOENT)
		return 0;
	return undo_push(&undo.files, &undo.nfiles, path);
}

/* Forget everything: the start succeeded, what it made stays. */
static void undo_forget(void)
{
	unsigned i;

	for (i = 0; i < undo.nfiles; i++)
		free(undo.files[i]);
	for (i = 0; i < undo.ndirs; i++)
		free(undo.dirs[i]);
	free(undo.files);
	free(undo.dirs);
	memset(&undo, 0, sizeof(undo));
}

/* The start failed: remove what it created (after everything is closed). */
static void undo_run(void)
{
	unsigned i;

	for (i = undo.nfiles; i-- > 0;) {
		struct stat st;

		if (lstat(undo.files[i], &st) == 0 && S_ISREG(st.st_mode))
			unlink(undo.files[i]);
	}
	for (i = undo.ndirs; i-- > 0;)
		rmdir(undo.dirs[i]);
	undo_forget();
}

/* mkdir -p; the directories it makes are noted for undo_run(). */
static int mkdir_p(const char *path)
{
	char buf[PATH_MAX];
	size_t i, n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0755) == 0) {
			if (undo_push(&undo.dirs, &undo.ndirs, buf))
				return -ENOMEM;
		} else if (errno != EEXIST) {
			return -errno;
		}
		buf[i] = path[i];
	}
	return 0;
}

/* Every file a start may create, before it creates any. */
static int note_creations(struct bs_config *cfg, const char *state_dir,
			  bool fg)
{
	struct bs_config_section *s = NULL;
	int err = 0;

	/* a device "path" that does not exist yet may become a new image */
	while (!err && (s = bs_config_next(cfg, "device", s))) {
		const char *k, *v;
		unsigned i;

		for (i = 0; bs_opts_at(s->opts, i, &k, &v); i++)
			if (!strcmp(k, "path") && *v)
				err = undo_note_file(v);
	}
	if (!err && !fg) {
		char log[PATH_MAX + 32];

		snprintf(log, sizeof(log), "%s/blkstackd.log", state_dir);
		err = undo_note_file(log);
	}
	return err;
}

/*
 * Adaptive polling of the I/O threads by default: measured at queue depth
 * 1 (fio, 4 KiB reads over NBD, loopback) 22.3K -> 28.2K IOPS, ahead of
 * qemu-nbd (25.1K), which polls too; throughput rows unchanged, server
 * CPU per GiB +5-9 % in the 4 KiB rows (bench/results/latest.md).
 */
#define BSD_POLL_US 50

/* valgrind runs one thread at a time and keeps the others waiting while
 * one blocks in io_uring_enter: an io_uring loop would starve the rest */
static bool under_valgrind(void)
{
#if __has_include(<valgrind/valgrind.h>)
	return RUNNING_ON_VALGRIND;
#else
	return false;
#endif
}

/* [daemon] max_inflight = SIZE, stall_timeout = SECONDS, threads = N,
 * poll_us = US, event_loop = io_uring|epoll. */
static int read_budget_keys(struct bs_config_section *s, struct bsd *d)
{
	uint64_t max = 0;
	uint32_t stall = 0, n = 0;
	const char *v;
	int err;

	err = bs_opts_get_size(s->opts, "max_inflight", &max);
	if (err < 0)
		return err;
	if (!err && max < BS_BUDGET_MIN)
		return bs_error(-EINVAL, "%s: max_inflight: %llu bytes is below "
				"the minimum of %llu MiB",
				bs_opts_where(s->opts, "max_inflight"),
				(unsigned long long)max,
				(unsigned long long)(BS_BUDGET_MIN >> 20));
	d->max_inflight = max;
	err = bs_opts_get_u32(s->opts, "stall_timeout", &stall);
	if (err < 0)
		return err;
	if (!err && stall > 86400)
		return bs_error(-EINVAL, "%s: stall_timeout: %u s is more than "
				"a day (0 turns eviction off)",
				bs_opts_where(s->opts, "stall_timeout"), stall);
	d->stall_set = !err;
	d->stall_timeout = stall;
	err = bs_opts_get_u32(s->opts, "threads", &n);
	if (err < 0)
		return err;
	if (!err && (n < 1 || n > BS_THREADS_MAX))
		return bs_error(-EINVAL, "%s: threads: %u: give 1 to %u I/O "
				"threads", bs_opts_where(s->opts, "threads"), n,
				BS_THREADS_MAX);
	d->threads_set = !err;
	d->threads = n;
	n = BSD_POLL_US;
	err = bs_opts_get_u32(s->opts, "poll_us", &n);
	if (err < 0)
		return err;
	if (n > BS_POLL_US_MAX)
		return bs_error(-EINVAL, "%s: poll_us: %u: give 0 (off) to %u "
				"microseconds", bs_opts_where(s->opts, "poll_us"),
				n, BS_POLL_US_MAX);
	d->poll_us = n;
	v = bs_opts_get(s->opts, "event_loop");
	if (v && strcmp(v, "io_uring") && strcmp(v, "epoll"))
		return bs_error(-EINVAL, "%s%sevent_loop: %s: give epoll "
				"(the default) or io_uring",
				bs_opts_where(s->opts, "event_loop"),
				bs_sep(bs_opts_where(s->opts, "event_loop")), v);
	d->epoll = !v || !strcmp(v, "epoll");
	return 0;
}

/* [daemon] section: state_dir (unless -d), control, the budget. */
static int read_daemon_section(struct bs_config *cfg, struct bsd *d,
			       const char *dir_arg)
{
	struct bs_config_section *s = bs_config_next(cfg, "daemon", NULL);
	const char *dir = NULL, *ctl = NULL;
	int err;

	if (s) {
		if (bs_config_next(cfg, "daemon", s))
			return bs_error(-EINVAL, "%s:%d: [daemon] given twice",
					cfg->path, bs_config_next(cfg, "daemon",
								  s)->line);
		dir = bs_opts_get(s->opts, "state_dir");
		ctl = bs_opts_get(s->opts, "control");
		err = read_budget_keys(s, d);
		if (!err)
			err = bs_opts_check_unused(s->opts);
		if (err)
			return err;
	}
	if (dir_arg)
		dir = dir_arg;
	if (!dir || !*dir)
		dir = DEFAULT_STATE_DIR;
	if (strlen(dir) >= sizeof(d->state_dir))
		return bs_error(-ENAMETOOLONG, "state_dir: path too long");
	snprintf(d->state_dir, sizeof(d->state_dir), "%s", dir);
	if (ctl && *ctl) {
		if (strlen(ctl) >= sizeof(d->control))
			return bs_error(-ENAMETOOLONG, "control %s: path longer "
					"than %zu bytes", ctl,
					sizeof(d->control) - 1);
		snprintf(d->control, sizeof(d->control), "%s", ctl);
	} else if ((size_t)snprintf(d->control, sizeof(d->control),
				    "%s/blkstackd.sock", d->state_dir) >=
		   sizeof(d->control)) {
		return bs_error(-ENAMETOOLONG, "state_dir %s: too long for a "
				"socket path (give [daemon] control = PATH)",
				d->state_dir);
	}
	return 0;
}

static int apply_budget(struct bsd *d)
{
	struct bs_budget *b = bs_ctx_budget(d->ctx);
	uint64_t max;
	uint32_t ms;

	if (!b)
		return bs_error(-ENOMEM, "in-flight budget: out of memory");
	max = d->max_inflight ? d->max_inflight : bs_budget_limit(b);
	ms = d->stall_set ? d->stall_timeout * 1000 : BS_BUDGET_STALL_MS_DEFAULT;
	bs_budget_configure(b, max, ms);
	return 0;
}

static void log_budget(struct bsd *d)
{
	struct bs_budget *b = bs_ctx_budget(d->ctx);
	uint64_t max = bs_budget_limit(b);
	unsigned s = bs_budget_stall_ms(b) / 1000;

	bsd_log("%u I/O thread%s (threads = N in [daemon]), waiting in %s "
		"(event_loop)", bs_ctx_nthreads(d->ctx),
		bs_ctx_nthreads(d->ctx) == 1 ? "" : "s",
		d->epoll || bs_ctx_ring_error(d->ctx) ? "epoll" : "io_uring");
	if (s)
		bsd_log("in-flight payload budget %llu MiB; clients stalled "
			"%u s while others wait are closed",
			(unsigned long long)(max >> 20), s);
	else
		bsd_log("in-flight payload budget %llu MiB; stalled clients "
			"are never closed", (unsigned long long)(max >> 20));
}

/* ---- stopping ------------------------------------------------------------ */

static void drain_tick(void *arg)
{
	struct bsd *d = arg;
	unsigned n = bs_exports_clients(d->set);

	d->drain_timer = 0;
	/* control commands in progress finish and answer too */
	if ((!n && !ctl_pending(d->ctl)) || d->forced) {
		bs_loop_stop(d->loop);
		return;
	}
	if (++d->drain_ticks * DRAIN_TICK_MS >= DRAIN_MS) {
		bsd_log("stop: %u client%s still connected after %d s: "
			"closing them", n, n == 1 ? "" : "s", DRAIN_MS / 1000);
		bs_loop_stop(d->loop);
		return;
	}
	d->drain_timer = bs_loop_add_timer(d->loop, DRAIN_TICK_MS, drain_tick,
					   d);
}

static void on_signal(void *arg, uint32_t events)
{
	struct bsd *d = arg;
	struct signalfd_siginfo si;

	(void)events;
	while (read(d->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		const char *abbr = sigabbrev_np((int)si.ssi_signo);
		char name[24];

		snprintf(name, sizeof(name), "SIG%s", abbr ? abbr : "?");

		if (si.ssi_signo == SIGHUP) {
			bsd_log("SIGHUP: reloading the config is not supported; "
				"restart blkstackd to apply changes");
			continue;
		}
		if (d->stopping && !d->set) {
			/* the clients are gone; stop() flushes the devices
			 * and runs this loop meanwhile: nothing to hurry */
			bsd_log("%s again: already flushing the devices", name);
			continue;
		}
		if (d->stopping) {
			bsd_log("%s again: closing %u client%s now", name,
				bs_exports_clients(d->set),
				bs_exports_clients(d->set) == 1 ? "" : "s");
			d->forced = true;
			bs_loop_stop(d->loop);
			continue;
		}
		d->stopping = true;
		bsd_log("%s: stopping: no new clients; waiting for the "
			"requests of %u connected client%s", name,
			bs_exports_clients(d->set),
			bs_exports_clients(d->set) == 1 ? "" : "s");
		ctl_stop(d->ctl);
		bs_exports_shutdown(d->set);
		drain_tick(d);
	}
}

/* ---- starting ------------------------------------------------------------ */

/* In the background the log goes to STATE_DIR/blkstackd.log. */
static void open_log(const char *state_dir)
{
	char path[PATH_MAX + 32];
	int fd;

	snprintf(path, sizeof(path), "%s/blkstackd.log", state_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd >= 0)
		log_fd = fd;
}

/* The line that explains why start-up failed. */
static void start_error(char *buf, size_t size, const char *what, int err)
{
	const char *msg = bs_last_error();

	if (*msg)
		snprintf(buf, size, "%.*s", (int)strcspn(msg, "\n"), msg);
	else
		snprintf(buf, size, "%s: %s", what, strerror(-err));
}

static int write_pid_file(struct bsd *d)
{
	char buf[32];
	int fd, n;

	if ((size_t)snprintf(d->pid_file, sizeof(d->pid_file),
			     "%.*s/blkstackd.pid", PATH_MAX - 16, d->state_dir) >=
	    sizeof(d->pid_file)) {
		d->pid_file[0] = '\0';
		return -ENAMETOOLONG;
	}
	fd = open(d->pid_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		int err = -errno;
		d->pid_file[0] = '\0';
		return bs_error(err, "pid file %s/blkstackd.pid: %s",
				d->state_dir, strerror(-err));
	}
	n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	if (write(fd, buf, (size_t)n) != n) {
		/* a pid file is a convenience; the daemon still works */
	}
	close(fd);
	return 0;
}

/*
 * Everything up to "ready". First what can be checked without touching
 * the disk: the whole config (every [device], [export] and [daemon]
 * section). Then, with every creation noted for undo_run(): the state
 * directory, the log, the devices (backing files), the exports (every
 * address binds), the control socket, signals. On failure the reason is
 * in @why; the caller closes everything and calls undo_run().
 */
static int start(struct bsd *d, const char *config, const char *dir_arg,
		 bool fg, struct bs_config **cfgp, char *why, size_t whylen)
{
	struct bs_config *cfg = NULL;
	sigset_t mask;
	int err;

	bs_error_clear();
	if (config) {
		err = bs_config_load(config, &cfg);
		if (err) {
			start_error(why, whylen, config, err);
			return err;
		}
		err = read_daemon_section(cfg, d, dir_arg);
	} else {
		/* the default's paths depend on the state directory */
		struct bs_config probe = { .path = (char *)"(default)" };

		err = read_daemon_section(&probe, d, dir_arg);
		if (!err) {
			char text[2 * PATH_MAX + sizeof(default_config)];

			snprintf(text, sizeof(text), default_config,
				 d->state_dir, d->state_dir);
			err = bs_config_load_string(text, "(default config)",
						    &cfg);
		}
	}
	*cfgp = cfg;
	if (!err)
		err = bs_config_check_devices(cfg, NULL);
	if (!err)
		err = bs_config_check_exports(cfg);
	if (!err && !bs_config_next(cfg, "export", NULL))
		err = bs_error(-EINVAL, "%s: no [export NAME] section: nothing "
			       "to serve", cfg->path);
	if (err) {
		start_error(why, whylen, "config", err);
		return err;
	}

	/* from here on, whatever is created is removed again on failure */
	err = note_creations(cfg, d->state_dir, fg);
	if (!err) {
		err = mkdir_p(d->state_dir);
		if (err)
			bs_error(err, "state_dir %s: %s", d->state_dir,
				 strerror(-err));
		else if (!fg)
			open_log(d->state_dir);
	}
	if (!err)
		err = bs_ctx_new(&d->ctx);
	if (err) {
		start_error(why, whylen, "start", err);
		return err;
	}
	d->loop = bs_ctx_loop(d->ctx);
	bs_ctx_set_log(d->ctx, export_log, d);
	err = apply_budget(d);
	bs_ctx_set_poll(d->ctx, d->poll_us);
	if (!d->epoll && under_valgrind()) {
		bsd_log("running under valgrind: event_loop = epoll (valgrind "
			"holds every other thread while one waits in "
			"io_uring_enter)");
		d->epoll = true;
	}
	bs_ctx_set_ring(d->ctx, !d->epoll);
	if (!err)
		err = bs_ctx_start_threads(d->ctx, d->threads_set ? d->threads
								: bs_cpu_count());
	if (!err && bs_ctx_ring_error(d->ctx))
		bsd_log("event_loop = io_uring: not available here (%s): "
			"the I/O threads wait in epoll",
			strerror(-bs_ctx_ring_error(d->ctx)));
	if (!err)
		err = bs_config_create_devices(cfg, d->ctx);
	if (!err)
		err = bs_exports_new(d->ctx, &d->set);
	if (!err) {
		bs_exports_set_log(d->set, export_log, d);
		err = bs_config_create_exports(cfg, d->set);
	}
	if (!err)
		err = ctl_start(d, d->control);
	if (err) {
		start_error(why, whylen, "start", err);
		return err;
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	d->sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (d->sigfd < 0 || bs_loop_add_fd(d->loop, d->sigfd, EPOLLIN,
					   on_signal, d)) {
		err = d->sigfd < 0 ? -errno : -ENOMEM;
		snprintf(why, whylen, "signals: %s", strerror(-err));
		return err;
	}
	signal(SIGPIPE, SIG_IGN);
	write_pid_file(d);
	undo_forget();
	return 0;
}

static void summary(struct bsd *d)
{
	struct bs_export *e;
	struct bs_dev *dev;
	unsigned ndev = 0, nexp = 0;

	for (dev = bs_dev_next(d->ctx, NULL); dev; dev = bs_dev_next(d->ctx,
								      dev))
		ndev++;
	for (e = bs_export_next(d->set, NULL); e; e = bs_export_next(d->set,
								      e)) {
		char sz[32], label[2 * BS_EXPORT_NAME_MAX + 16];
		unsigned i;

		nexp++;
		/* one line per unit: "export t unit a (nbd): device ..." */
		for (i = 0; i < e->nunits; i++) {
			struct bs_export_unit *u = &e->units[i];

			bs_export_unit_label(u, label, sizeof(label));
			if (u->dev->state != BS_DEV_LIVE) {
				bsd_log("%s (%s): device %s %s (%s); served "
					"once it is live", label, e->type->name,
					u->dev->name,
					bs_dev_state_name(u->dev->state),
					u->dev->state_reason);
				continue;
			}
			bsd_log("%s (%s): device %s, %s%s, write_zeroes_unmap "
				"%s", label, e->type->name, u->dev->name,
				bs_fmt_size(u->dev->size, sz, sizeof(sz)),
				u->readonly ? ", read-only" : "",
				bs_dev_write_zeroes_unmap(u->dev) ? "yes" :
				"no");
		}
	}
	log_budget(d);
	bsd_log("ready: %u device%s, %u export%s, control socket %s "
		"(pid %ld)", ndev, ndev == 1 ? "" : "s", nexp,
		nexp == 1 ? "" : "s", d->control, (long)getpid());
}

static int stop(struct bsd *d, struct bs_config *cfg)
{
	struct bs_dev *dev;
	int rc = 0;

	if (d->drain_timer > 0)
		bs_loop_cancel_timer(d->loop, d->drain_timer);
	ctl_free(d->ctl);
	d->ctl = NULL;
	/* closes the clients left, waits for requests still in devices */
	bs_exports_free(d->set);
	d->set = NULL;
	if (d->ctx) {
		struct bs_budget *b = bs_ctx_budget(d->ctx);

		/* what the clients held at most, and how often they waited
		 * (not after a start that failed: its one line is the error) */
		if (b && d->served)
			bsd_log("in-flight payload budget: peak %llu bytes of "
				"%llu, %llu requests waited, %llu bytes taken "
				"above it",
				(unsigned long long)bs_budget_peak(b),
				(unsigned long long)bs_budget_limit(b),
				(unsigned long long)bs_budget_waits(b),
				(unsigned long long)bs_budget_over(b));
		for (dev = bs_dev_next(d->ctx, NULL); dev;
		     dev = bs_dev_next(d->ctx, dev)) {
			int err;

			/* nothing was written to one that never opened */
			if (dev->readonly || dev->state != BS_DEV_LIVE)
				continue;
			bs_error_clear();
			err = bs_flush_sync(dev);
			if (err) {
				const char *msg = bs_last_error();
				bsd_log("%s: flush failed: %s", dev->name,
					*msg ? msg : strerror(-err));
				rc = 1;
			}
		}
		bs_ctx_free(d->ctx);
		d->ctx = NULL;
	}
	bs_config_free(cfg);
	if (d->sigfd >= 0)
		close(d->sigfd);
	if (*d->pid_file)
		unlink(d->pid_file);
	return rc;
}

/* Detach; the parent exits with the child's start-up verdict. */
static int daemonize(int *ready_fd)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		char buf[1024];
		ssize_t n, got = 0;

		close(p[1]);
		while ((n = read(p[0], buf + got, sizeof(buf) - 1 -
				 (size_t)got)) > 0)
			got += n;
		buf[got > 0 ? got : 0] = '\0';
		if (got > 0 && !strncmp(buf, "ok", 2))
			_exit(0);
		fprintf(stderr, "blkstackd: %s\n", got > 0 ? buf :
			"the daemon died while starting");
		_exit(1);
	}
	close(p[0]);
	setsid();
	*ready_fd = p[1];
	return 0;
}

static void tell_parent(int fd, const char *msg)
{
	if (fd < 0)
		return;
	if (write(fd, msg, strlen(msg)) < 0) {
		/* the parent is gone: nobody to tell */
	}
	close(fd);
}

static void detach_stdio(void)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int fd = log_fd != STDERR_FILENO ? log_fd : -1;

	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(fd >= 0 ? fd : null, STDERR_FILENO);
		if (null > STDERR_FILENO)
			close(null);
	}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "state-dir", required_argument, NULL, 'd' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = NULL, *dir = NULL;
	struct bsd d = { .sigfd = -1 };
	struct bs_config *cfg = NULL;
	bool fg = false;
	char why[1024];
	int c, err, ready = -1, rc;

	/*
	 * Request buffers (up to 32 MiB each, many in flight) come and go at
	 * a high rate: keep them in the heap instead of an mmap/munmap and
	 * fresh zeroed pages per request. Memory stays bounded by the
	 * sessions' in-flight caps.
	 */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":c:d:fhV", longopts, NULL)) !=
	       -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'd':
			dir = optarg;
			break;
		case 'f':
			fg = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("blkstackd %s\n", BLKSTACK_VERSION);
			return 0;
		case ':':
			fprintf(stderr, "blkstackd: option '%s' needs a value\n"
				"Try 'blkstackd --help'.\n", argv[optind - 1]);
			return 2;
		default:
			fprintf(stderr, "blkstackd: unknown option '%s'\n"
				"Try 'blkstackd --help'.\n", argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "blkstackd: unexpected argument '%s'\n"
			"Try 'blkstackd --help'.\n", argv[optind]);
		return 2;
	}
	if (!fg) {
		err = daemonize(&ready);
		if (err) {
			fprintf(stderr, "blkstackd: cannot go to the "
				"background: %s\n", strerror(-err));
			return 1;
		}
	}
	err = start(&d, config, dir, fg, &cfg, why, sizeof(why));
	if (err) {
		/* close and clean up first: the disk is as it was when we say so */
		stop(&d, cfg);
		if (log_fd != STDERR_FILENO) {
			close(log_fd);
			log_fd = STDERR_FILENO;
		}
		undo_run();
		if (ready >= 0)
			tell_parent(ready, why);
		else
			fprintf(stderr, "blkstackd: %s\n", why);
		return 1;
	}
	if (!fg)
		detach_stdio();
	bsd_log("blkstackd %s starting%s%s", BLKSTACK_VERSION,
		config ? ", config " : " on the embedded default",
		config ? config : "");
	summary(&d);
	d.served = true;
	tell_parent(ready, "ok");
	bs_loop_run(d.loop);
	rc = stop(&d, NULL);
	bs_config_free(cfg);
	bsd_log("stopped%s", rc ? " (a device could not be flushed)" : "");
	return rc;
}
