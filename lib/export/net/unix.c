/* SPDX-License-Identifier: MIT */
/*
 * Listening on a UNIX socket path without stepping on another server: a
 * path held by a live listener is refused, a stale socket file (nobody
 * listening) is replaced, anything that is not a socket is left alone,
 * and a path is unlinked on failure only if this call bound it.
 *
 * The socket file is born with its mode: bind() runs under the umask
 * ~mode, so there is no moment where it has the process umask's looser
 * mode (a bind-then-chmod window any local user could connect in). The
 * umask is process-wide; listeners are opened on the loop thread at
 * start-up, when no other thread creates files.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <blkstack/export.h>
#include <blkstack/net.h>

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

int bs_net_listen_unix(const char *path, int backlog, mode_t mode, int *out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int fd, err, tries, rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (!mode)
		mode = 0600;
	mode &= 0777;
	for (tries = 0;; tries++) {
		old = umask(~mode & 0777);
		rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
		err = rc ? -errno : 0;
		umask(old);
		if (!rc)
			break;
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
	/*
	 * bound here: from now on the path is ours to remove. A default ACL
	 * on the directory overrides the umask: then tighten to @mode (this
	 * only ever removes permissions).
	 */
	if ((!lstat(path, &st) && (st.st_mode & 0777) != mode &&
	     chmod(path, mode)) || listen(fd, backlog)) {
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

/* The older name (include/blkstack/export.h). */
int bs_listen_unix(const char *path, int backlog, mode_t mode, int *out)
{
	return bs_net_listen_unix(path, backlog, mode, out);
}
