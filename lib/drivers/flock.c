/* SPDX-License-Identifier: MIT */
/* Backing-file locks (flock.h): OFD locks, and who holds a conflicting one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "drivers/flock.h"

/* This process's locks: to name the device when two of ours collide. */
static pthread_mutex_t locks_mu = PTHREAD_MUTEX_INITIALIZER;
static struct drv_lock *locks;

/* Bounds of the search below: it runs only on a conflict, and ends. */
#define SCAN_MAX_PROCS 8192
#define SCAN_MAX_FILES 65536

/* Does fdinfo text @buf hold an OFD lock on the inode @key ("fe:00:123 ")? */
static bool fdinfo_locks(const char *buf, const char *key)
{
	const char *p = buf;

	while ((p = strstr(p, "lock:"))) {
		const char *eol = strchr(p, '\n');
		const char *k = strstr(p, key);

		if (k && (!eol || k < eol) && strstr(p, "OFDLCK") &&
		    strstr(p, "OFDLCK") < k)
			return true;
		if (!eol)
			break;
		p = eol + 1;
	}
	return false;
}

/*
 * The process holding an OFD lock on @st: the kernel does not say
 * (F_OFD_GETLK and /proc/locks give -1), but the holder's
 * /proc/PID/fdinfo/FD lists the locks of that open file, as lslocks reads
 * them. Only processes we may look into are seen (the same user, or
 * root). 0 when not found.
 */
static pid_t ofd_holder(const struct stat *st)
{
	char key[64], path[96], buf[4096];
	unsigned procs = 0, files = 0;
	struct dirent *pe, *fe;
	DIR *pd, *fdd;
	pid_t found = 0, self = getpid();
	ssize_t n;
	int fd;

	snprintf(key, sizeof(key), "%02x:%02x:%llu ", major(st->st_dev),
		 minor(st->st_dev), (unsigned long long)st->st_ino);
	pd = opendir("/proc");
	if (!pd)
		return 0;
	while (!found && (pe = readdir(pd)) && procs++ < SCAN_MAX_PROCS) {
		pid_t pid = (pid_t)atoi(pe->d_name);

		if (pid <= 0 || pid == self)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fdinfo", (int)pid);
		fdd = opendir(path);
		if (!fdd)
			continue;
		while (!found && (fe = readdir(fdd)) &&
		       files++ < SCAN_MAX_FILES) {
			if (fe->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "/proc/%d/fdinfo/%.16s",
				 (int)pid, fe->d_name);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				continue;
			n = read(fd, buf, sizeof(buf) - 1);
			close(fd);
			if (n <= 0)
				continue;
			buf[n] = '\0';
			if (fdinfo_locks(buf, key))
				found = pid;
		}
		closedir(fdd);
	}
	closedir(pd);
	return found;
}

/* The name of process @pid ("?" when unknown). */
static void read_comm(pid_t pid, char *comm, size_t len)
{
	char path[64], buf[64];
	ssize_t n = -1;
	size_t m;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (n <= 0) {
		snprintf(comm, len, "?");
		return;
	}
	buf[n] = '\0';
	m = strcspn(buf, "\n");
	if (m >= len)
		m = len - 1;
	memcpy(comm, buf, m);
	comm[m] = '\0';
}

static int conflict(int fd, const char *path, bool rw, struct bs_dev *dev,
		    const char *drv, const struct stat *st)
{
	struct flock fl = {
		.l_type = rw ? F_WRLCK : F_RDLCK,
		.l_whence = SEEK_SET,
	};
	struct drv_lock *l;
	char who[BS_NAME_MAX + 64] = "", comm[64];
	const char *kind;
	pid_t pid;

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
	if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
		fl.l_type = F_UNLCK;
	kind = fl.l_type == F_WRLCK ? "write" :
	       fl.l_type == F_RDLCK ? "read" : "conflicting";
	if (fl.l_type != F_UNLCK && fl.l_pid > 0) {
		/* a classic POSIX lock: it names its process */
		pid = fl.l_pid;
	} else {
		/* an OFD lock: l_pid is -1; look for the open file holding it */
		pid = ofd_holder(st);
	}
	if (pid > 0)
		read_comm(pid, comm, sizeof(comm));
	if (pid > 0)
		return bs_error(-EBUSY, "%s: %s: %s: in use by process %d (%s): "
				"it holds a %s lock", dev->name, drv, path,
				(int)pid, comm, kind);
	return bs_error(-EBUSY, "%s: %s: %s: in use by another process: it "
			"holds a %s lock, and an OFD lock does not say which "
			"process (see `fuser -v %s`)", dev->name, drv, path,
			kind, path);
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
