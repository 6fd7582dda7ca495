/*
 * nbdzero: zero one range of an NBD export again and again from ONE
 * connection, for bench/load.sh's "in a loop" rows: a client that zeroes
 * as fast as the server answers, without a process start per command
 * (on 2 cores, starting a CLI dozens of times a second cost the
 * foreground job more than the zeroing did).
 *
 *   nbdzero [-c CHUNK] [-t SECONDS] [-n PASSES] [-f] URI OFFSET LENGTH
 *
 * Each pass sends NBD_CMD_WRITE_ZEROES over [OFFSET, OFFSET+LENGTH) in
 * CHUNK pieces (default 1 GiB; NBD without extended headers caps one
 * request below 4 GiB), one at a time, with holes allowed (no
 * NBD_CMD_FLAG_NO_HOLE) unless -f (fast zero: LIBNBD_CMD_FLAG_FAST_ZERO).
 * Stops after SECONDS (default 10) or PASSES (default 1000000), whichever
 * comes first, or at SIGTERM/SIGINT between requests.
 *
 * Prints one line: nbdzero passes=P bytes=B seconds=S
 * Exit status 0 when every request succeeded.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libnbd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return false;
	switch (*end) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	case '\0': break;
	default: return false;
	}
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

static void usage(void)
{
	fprintf(stderr, "usage: nbdzero [-c CHUNK] [-t SECONDS] [-n PASSES] "
			"[-f] URI OFFSET LENGTH\n");
	exit(2);
}

int main(int argc, char **argv)
{
	uint64_t chunk = 1ULL << 30, off, len, passes = 1000000, done = 0;
	uint64_t bytes = 0;
	double secs = 10, t0, t;
	uint32_t flags = 0;
	struct nbd_handle *h;
	struct sigaction sa;
	int c;

	while ((c = getopt(argc, argv, "c:t:n:f")) != -1) {
		switch (c) {
		case 'c':
			if (!parse_u64(optarg, &chunk) || !chunk ||
			    chunk >= (1ULL << 32))
				usage();
			break;
		case 't':
			secs = atof(optarg);
			if (secs <= 0)
				usage();
			break;
		case 'n':
			if (!parse_u64(optarg, &passes) || !passes)
				usage();
			break;
		case 'f':
			flags |= LIBNBD_CMD_FLAG_FAST_ZERO;
			break;
		default:
			usage();
		}
	}
	if (argc - optind != 3 || !parse_u64(argv[optind + 1], &off) ||
	    !parse_u64(argv[optind + 2], &len) || !len)
		usage();

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	h = nbd_create();
	if (!h || nbd_connect_uri(h, argv[optind]) == -1) {
		fprintf(stderr, "nbdzero: %s\n", nbd_get_error());
		return 1;
	}
	t0 = now_s();
	for (t = t0; done < passes && !stop && t - t0 < secs; done++) {
		for (uint64_t pos = 0; pos < len && !stop; pos += chunk) {
			uint64_t n = len - pos < chunk ? len - pos : chunk;

			if (nbd_zero(h, n, off + pos, flags) == -1) {
				fprintf(stderr, "nbdzero: zero %" PRIu64 "+%" PRIu64
						": %s\n", off + pos, n,
					nbd_get_error());
				nbd_close(h);
				return 1;
			}
			bytes += n;
		}
		t = now_s();
	}
	t = now_s();
	nbd_shutdown(h, 0);
	nbd_close(h);
	printf("nbdzero passes=%" PRIu64 " bytes=%" PRIu64 " seconds=%.3f\n",
	       done, bytes, t - t0);
	return 0;
}
