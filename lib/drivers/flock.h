/* SPDX-License-Identifier: MIT */
/*
 * Backing-file locks for the drivers that open a path (file, hostbdev);
 * not a public API. An open file description lock (fcntl F_OFD_SETLK) over
 * the whole file: a write lock when the device is opened read-write, a
 * read lock when read-only. So a second process (another blkstackd, the
 * `blkstack` CLI, qemu, which locks the same way) cannot open an image for
 * writing while one has it, nor for reading while one writes it. OFD locks
 * are advisory: programs that do not lock (dd, the kernel's loop driver)
 * are not stopped.
 *
 * OFD locks also conflict inside one process (two devices of one config
 * over one image); the message then names the device that holds it.
 */
#ifndef BLKSTACK_DRIVERS_FLOCK_H
#define BLKSTACK_DRIVERS_FLOCK_H

#include <stdbool.h>
#include <sys/types.h>

#include <blkstack/bdev.h>

struct drv_lock {
	bool held;
	dev_t st_dev;
	ino_t st_ino;
	struct drv_lock *next;		/* this process's locks */
	char devname[BS_NAME_MAX];
};

/*
 * Lock @fd (@path, opened for @dev by driver @drv) for writing when @rw,
 * else for reading. 0, or -EBUSY with bs_error() "DEV: DRV: PATH: in use
 * by ..." naming the device of this process that holds it, else the
 * process (a classic lock names it; for an OFD lock, whose l_pid is -1,
 * the holder is looked for in /proc/PID/fdinfo), else saying that another
 * process, which the lock does not name, holds it; other -errno as fcntl.
 */
int drv_lock(struct drv_lock *l, int fd, const char *path, bool rw,
	     struct bs_dev *dev, const char *drv);
/* Forget the lock (closing the descriptor drops it): before close(fd). */
void drv_unlock(struct drv_lock *l);

#endif
