/* SPDX-License-Identifier: MIT */
/*
 * seekdata FILE [OFFSET LENGTH]: print the data extents of FILE inside
 * [OFFSET, OFFSET+LENGTH) (default: the whole file) as found by
 * lseek(SEEK_DATA/SEEK_HOLE), one "START LENGTH" line each, in bytes, and a
 * last line "data BYTES". Tests use it to check that a range was
 * deallocated (no extent) or stayed allocated (one extent over it).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	unsigned long long start = 0, len = 0, end, data = 0;
	struct stat st;
	off_t pos, hole;
	int fd;

	if (argc != 2 && argc != 4) {
		fprintf(stderr, "usage: seekdata FILE [OFFSET LENGTH]\n");
		return 2;
	}
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st)) {
		fprintf(stderr, "seekdata: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	end = (unsigned long long)st.st_size;
	if (argc == 4) {
		start = strtoull(argv[2], NULL, 0);
		len = strtoull(argv[3], NULL, 0);
		if (start + len < end)
			end = start + len;
	}
	pos = (off_t)start;
	while ((unsigned long long)pos < end) {
		pos = lseek(fd, pos, SEEK_DATA);
		if (pos < 0) {
			if (errno == ENXIO)
				break; /* only a hole from here */
			fprintf(stderr, "seekdata: SEEK_DATA: %s\n",
				strerror(errno));
			return 1;
		}
		if ((unsigned long long)pos >= end)
			break;
		hole = lseek(fd, pos, SEEK_HOLE);
		if (hole < 0) {
			fprintf(stderr, "seekdata: SEEK_HOLE: %s\n",
				strerror(errno));
			return 1;
		}
		if ((unsigned long long)hole > end)
			hole = (off_t)end;
		printf("%lld %lld\n", (long long)pos, (long long)(hole - pos));
		data += (unsigned long long)(hole - pos);
		pos = hole;
	}
	printf("data %llu\n", data);
	close(fd);
	return 0;
}
