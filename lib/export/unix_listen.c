/* SPDX-License-Identifier: MIT */
/*
 * Listening on a UNIX socket path without stepping on another server: a
 * path held by a live listener is refused, a stale socket file (nobody
 * listening) is replaced, anything that is not a socket is left alone,
 * and a path is unlinked on failure only if this call bound it.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <blkstack/export.h>

/* Does a server answer on @sa? Non-blocking: a full backlog is "live". */
static bool socket_live(const struct sockaddr_un *sa)
{
	int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			   0);
	bool live;

	if (probe < 0)
		return true;	/* cannot tell: do not touch it */
	live = !connect(probe, (const struct sockaddr *)sa, sizeof(*sa)) ||
	       errno != ECONNREFUSED;
	close(probe);
	return live;
}

int bs_listen_unix(const char *path, int backlog, mode_t mode, int *out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, err, tries;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	for (tries = 0;; tries++) {
		if (!bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
			break;
		err = -errno;
		if (err != -EADDRINUSE || tries)
			goto fail;
		if (lstat(path, &st) || !S_ISSOCK(st.st_mode)) {
			err = -EEXIST;
			goto fail;
		}
		if (socket_live(&sa))
			goto fail;	/* -EADDRINUSE: somebody serves there */
		unlink(path);	/* stale: its server is gone */
	}
	/* bound here: from now on the path is ours to remove */
	if ((mode && chmod(path, mode)) || listen(fd, backlog)) {
		err = -errno;
		unlink(path);
		goto fail;
	}
	*out = fd;
	return 0;
fail:
	close(fd);
	return err;
}
