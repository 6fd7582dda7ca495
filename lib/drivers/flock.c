/* SPDX-License-Identifier: MIT */
/* Backing-file locks (flock.h): OFD locks, and who holds a conflicting one. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "drivers/flock.h"

/* This process's locks: to name the device when two of ours collide. */
static pthread_mutex_t locks_mu = PTHREAD_MUTEX_INITIALIZER;
static struct drv_lock *locks;

static int conflict(int fd, const char *path, bool rw, struct bs_dev *dev,
		    const char *drv, const struct stat *st)
{
	struct flock fl = {
		.l_type = rw ? F_WRLCK : F_RDLCK,
		.l_whence = SEEK_SET,
	};
	struct drv_lock *l;
	char who[BS_NAME_MAX + 64] = "";

	pthread_mutex_lock(&locks_mu);
	for (l = locks; l; l = l->next) {
		if (l->st_dev == st->st_dev && l->st_ino == st->st_ino) {
			snprintf(who, sizeof(who), "device %s of this process",
				 l->devname);
			break;
		}
	}
	pthread_mutex_unlock(&locks_mu);
	if (*who)
		return bs_error(-EBUSY, "%s: %s: %s: in use by %s", dev->name,
				drv, path, who);
	if (fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK &&
	    fl.l_pid > 0)
		/* a classic POSIX lock: it names its process */
		return bs_error(-EBUSY, "%s: %s: %s: in use by process %d (it "
				"holds a %s lock)", dev->name, drv, path,
				(int)fl.l_pid,
				fl.l_type == F_WRLCK ? "write" : "read");
	/* an OFD lock: l_pid is -1, the kernel does not say whose */
	return bs_error(-EBUSY, "%s: %s: %s: in use by another process (it "
			"holds a %s lock; the lock does not say which process: "
			"see `fuser -v %s`)", dev->name, drv, path,
			fl.l_type == F_WRLCK ? "write" :
			fl.l_type == F_RDLCK ? "read" : "conflicting", path);
}

int drv_lock(struct drv_lock *l, int fd, const char *path, bool rw,
	     struct bs_dev *dev, const char *drv)
{
	struct flock fl = {
		.l_type = rw ? F_WRLCK : F_RDLCK,
		.l_whence = SEEK_SET,
		.l_start = 0,
		.l_len = 0,	/* the whole file, however it grows */
		.l_pid = 0,	/* must be 0 for OFD locks */
	};
	struct stat st;

	memset(l, 0, sizeof(*l));
	if (fstat(fd, &st) < 0)
		return bs_error(-errno, "%s: %s: %s: stat: %s", dev->name, drv,
				path, strerror(errno));
	if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
		if (errno == EAGAIN || errno == EACCES)
			return conflict(fd, path, rw, dev, drv, &st);
		return bs_error(-errno, "%s: %s: %s: cannot lock: %s (lock = 0 "
				"opens it without)", dev->name, drv, path,
				strerror(errno));
	}
	l->held = true;
	l->st_dev = st.st_dev;
	l->st_ino = st.st_ino;
	snprintf(l->devname, sizeof(l->devname), "%s", dev->name);
	pthread_mutex_lock(&locks_mu);
	l->next = locks;
	locks = l;
	pthread_mutex_unlock(&locks_mu);
	return 0;
}

void drv_unlock(struct drv_lock *l)
{
	struct drv_lock **pp;

	if (!l->held)
		return;
	pthread_mutex_lock(&locks_mu);
	for (pp = &locks; *pp; pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	}
	pthread_mutex_unlock(&locks_mu);
	l->held = false;
}
