/* SPDX-License-Identifier: MIT */
/*
 * An io_manager that puts libext2fs on a blkstack device. libext2fs opens
 * channels by name, so a device is first registered under a generated name
 * ("blkstack:N", bs_fs_io_register()) which ext2fs_open2() and
 * ext2fs_initialize() are then given together with bs_fs_io_manager.
 *
 * Every read and write is a synchronous blkstack request (bs_io_sync).
 * libext2fs asks for byte ranges at its own block size (1024 while it looks
 * for the superblock, the filesystem block size after); ranges that are not
 * aligned to the device's logical block size are done by read-modify-write
 * of the partial logical blocks at the edges. zeroout is the core's
 * may-unmap zeroout (no flags), discard is BS_OP_DISCARD, flush BS_OP_FLUSH.
 * There is no write_byte: the superblock is always written whole, in one
 * request, so a failed write never leaves it torn.
 * There is no cache here: what libext2fs writes has reached the device (up
 * to its write cache) when the call returns.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext2fs.h>

#include <blkstack/bdev.h>
#include <blkstack/zero.h>

#include "fs/internal.h"

#define IO_PREFIX "blkstack:"
#define IO_MAX_DEVS 64

static pthread_mutex_t io_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	struct bs_dev *dev;
	unsigned id;
} io_devs[IO_MAX_DEVS];
static unsigned io_next_id = 1;

int bs_fs_io_register(struct bs_dev *dev, char *name, size_t len)
{
	unsigned i;
	int err = -EMFILE;

	pthread_mutex_lock(&io_lock);
	for (i = 0; i < IO_MAX_DEVS; i++) {
		if (io_devs[i].dev)
			continue;
		io_devs[i].dev = dev;
		io_devs[i].id = io_next_id++;
		snprintf(name, len, IO_PREFIX "%u", io_devs[i].id);
		err = 0;
		break;
	}
	pthread_mutex_unlock(&io_lock);
	if (err)
		return bs_error(err, "%s: ext4: more than %d filesystems open",
				dev->name, IO_MAX_DEVS);
	return 0;
}

void bs_fs_io_unregister(const char *name)
{
	unsigned i, id;

	if (strncmp(name, IO_PREFIX, strlen(IO_PREFIX)) ||
	    sscanf(name + strlen(IO_PREFIX), "%u", &id) != 1)
		return;
	pthread_mutex_lock(&io_lock);
	for (i = 0; i < IO_MAX_DEVS; i++)
		if (io_devs[i].dev && io_devs[i].id == id)
			io_devs[i].dev = NULL;
	pthread_mutex_unlock(&io_lock);
}

static struct bs_dev *io_lookup(const char *name)
{
	struct bs_dev *dev = NULL;
	unsigned i, id;

	if (strncmp(name, IO_PREFIX, strlen(IO_PREFIX)) ||
	    sscanf(name + strlen(IO_PREFIX), "%u", &id) != 1)
		return NULL;
	pthread_mutex_lock(&io_lock);
	for (i = 0; i < IO_MAX_DEVS; i++)
		if (io_devs[i].dev && io_devs[i].id == id)
			dev = io_devs[i].dev;
	pthread_mutex_unlock(&io_lock);
	return dev;
}

struct io_priv {
	struct bs_dev *dev;
	bool rw;
	uint8_t *bounce;	/* one logical block, for read-modify-write */
	struct struct_io_stats stats;
	bool data;		/* writes are file data (fs_io_data) */
	uint32_t lbs;		/* the device's logical block size */
	bool max_discard;	/* the device discards */
	unsigned long meta_errors; /* failed metadata writes and flushes */
};

/* errno values are valid errcode_t values (com_err's "system" table). */
static errcode_t io_err(int err)
{
	return err < 0 ? (errcode_t)-err : 0;
}

/* A failed write, flush, discard or zeroout: count it unless it is data. */
static errcode_t io_wfail(struct io_priv *p, int err)
{
	if (err && !p->data)
		p->meta_errors++;
	return io_err(err);
}

unsigned long fs_io_meta_errors(struct bs_fs *fs)
{
	struct io_priv *p = fs->e2->io->private_data;

	return p->meta_errors;
}

void fs_io_data(struct bs_fs *fs, bool on)
{
	struct io_priv *p = fs->e2->io->private_data;

	p->data = on;
}

static errcode_t io_range(io_channel ch, unsigned long long block, int count,
			  uint64_t *off, uint64_t *len)
{
	struct io_priv *p = ch->private_data;
	uint64_t n = count < 0 ? (uint64_t)-(int64_t)count
			       : (uint64_t)count * (uint64_t)ch->block_size;

	*off = (uint64_t)block * (uint64_t)ch->block_size;
	*len = n;
	if (*off > p->dev->size || n > p->dev->size - *off) {
		bs_error(-EINVAL, "%s: ext4: I/O at %" PRIu64 "+%" PRIu64
			 " past the end of the device (%" PRIu64 ")",
			 p->dev->name, *off, n, p->dev->size);
		return EXT2_ET_LLSEEK_FAILED;
	}
	return 0;
}

/*
 * Byte-granular read or write: the aligned middle goes straight through,
 * partial logical blocks at the edges through the bounce block.
 */
static int io_rw(struct io_priv *p, bool write, uint8_t *buf, uint64_t off,
		 uint64_t len)
{
	uint32_t lbs = p->lbs;
	int err;

	while (len) {
		uint64_t head = off & (lbs - 1);

		if (head || len < lbs) {
			uint64_t base = off - head;
			uint64_t n = lbs - head < len ? lbs - head : len;

			err = bs_read_sync(p->dev, p->bounce, lbs, base);
			if (err)
				return err;
			if (write) {
				memcpy(p->bounce + head, buf, n);
				err = bs_write_sync(p->dev, p->bounce, lbs, base);
				if (err)
					return err;
			} else {
				memcpy(buf, p->bounce + head, n);
			}
			off += n;
			buf += n;
			len -= n;
			continue;
		}
		uint64_t n = len & ~(uint64_t)(lbs - 1);

		err = write ? bs_write_sync(p->dev, buf, n, off)
			    : bs_read_sync(p->dev, buf, n, off);
		if (err)
			return err;
		off += n;
		buf += n;
		len -= n;
	}
	return 0;
}

static errcode_t bsio_open(const char *name, int flags, io_channel *channel)
{
	struct bs_dev *dev = name ? io_lookup(name) : NULL;
	struct io_priv *p = NULL;
	io_channel ch = NULL;
	struct bs_dev_snap snap;
	errcode_t ret;

	if (!dev)
		return EXT2_ET_BAD_DEVICE_NAME;
	/* this runs on the control thread: a locked copy of the limits */
	bs_dev_snap_copy(dev, &snap);
	if ((flags & IO_FLAG_RW) && dev->readonly) {
		bs_error(-EROFS, "%s: ext4: device is read-only", dev->name);
		return EROFS;
	}
	if ((ret = ext2fs_get_memzero(sizeof(*ch), &ch)) ||
	    (ret = ext2fs_get_memzero(sizeof(*p), &p)) ||
	    (ret = ext2fs_get_mem(strlen(name) + 1, &ch->name)) ||
	    (ret = ext2fs_get_memalign(snap.limits.logical_block_size, 4096,
				       &p->bounce)))
		goto fail;
	strcpy(ch->name, name);
	ch->magic = EXT2_ET_MAGIC_IO_CHANNEL;
	ch->manager = bs_fs_io_manager;
	ch->block_size = 1024;
	ch->refcount = 1;
	ch->private_data = p;
	p->dev = dev;
	p->lbs = snap.limits.logical_block_size;
	p->max_discard = snap.limits.max_discard_sectors != 0;
	p->rw = flags & IO_FLAG_RW;
	p->stats.num_fields = 2;
	*channel = ch;
	return 0;
fail:
	if (ch)
		ext2fs_free_mem(&ch->name);
	if (p)
		ext2fs_free_mem(&p->bounce);
	ext2fs_free_mem(&p);
	ext2fs_free_mem(&ch);
	return ret;
}

static errcode_t bsio_close(io_channel ch)
{
	struct io_priv *p = ch->private_data;

	if (--ch->refcount > 0)
		return 0;
	ext2fs_free_mem(&p->bounce);
	ext2fs_free_mem(&p);
	ext2fs_free_mem(&ch->name);
	ext2fs_free_mem(&ch);
	return 0;
}

static errcode_t bsio_set_blksize(io_channel ch, int blksize)
{
	if (blksize < 512 || (blksize & (blksize - 1)))
		return EXT2_ET_INVALID_ARGUMENT;
	ch->block_size = blksize;
	return 0;
}

static errcode_t bsio_read_blk64(io_channel ch, unsigned long long block,
				 int count, void *data)
{
	struct io_priv *p = ch->private_data;
	uint64_t off, len;
	errcode_t ret;
	int err;

	if ((ret = io_range(ch, block, count, &off, &len)))
		return ret;
	err = io_rw(p, false, data, off, len);
	if (err)
		return io_err(err);
	p->stats.bytes_read += len;
	return 0;
}

static errcode_t bsio_write_blk64(io_channel ch, unsigned long long block,
				  int count, const void *data)
{
	struct io_priv *p = ch->private_data;
	uint64_t off, len;
	errcode_t ret;
	int err;

	if (!p->rw)
		return EXT2_ET_RO_FILSYS;
	if ((ret = io_range(ch, block, count, &off, &len)))
		return ret;
	/* io_rw() does not write through @data; the cast only shares code */
	err = io_rw(p, true, (uint8_t *)data, off, len);
	if (err)
		return io_wfail(p, err);
	p->stats.bytes_written += len;
	return 0;
}

static errcode_t bsio_read_blk(io_channel ch, unsigned long block, int count,
			       void *data)
{
	return bsio_read_blk64(ch, block, count, data);
}

static errcode_t bsio_write_blk(io_channel ch, unsigned long block, int count,
				const void *data)
{
	return bsio_write_blk64(ch, block, count, data);
}

static errcode_t bsio_flush(io_channel ch)
{
	struct io_priv *p = ch->private_data;

	if (!p->rw)
		return 0;
	return io_wfail(p, bs_flush_sync(p->dev));
}

static errcode_t bsio_set_option(io_channel ch, const char *option,
				 const char *arg)
{
	return EXT2_ET_INVALID_ARGUMENT;
}

static errcode_t bsio_get_stats(io_channel ch, io_stats *stats)
{
	struct io_priv *p = ch->private_data;

	if (stats)
		*stats = &p->stats;
	return 0;
}

/* [block, block+count) in channel blocks, as a byte range inside the device. */
static errcode_t io_blocks(io_channel ch, unsigned long long block,
			   unsigned long long count, uint64_t *off,
			   uint64_t *len)
{
	struct io_priv *p = ch->private_data;
	uint64_t bs = (uint64_t)ch->block_size;

	if (block > p->dev->size / bs || count > p->dev->size / bs - block)
		return EXT2_ET_INVALID_ARGUMENT;
	*off = block * bs;
	*len = count * bs;
	return 0;
}

static errcode_t bsio_discard(io_channel ch, unsigned long long block,
			      unsigned long long count)
{
	struct io_priv *p = ch->private_data;
	uint64_t off, len;
	errcode_t ret;

	if (!p->rw)
		return EXT2_ET_RO_FILSYS;
	if (!p->max_discard)
		return EXT2_ET_UNIMPLEMENTED;
	if ((ret = io_blocks(ch, block, count, &off, &len)))
		return ret;
	if (!len)
		return 0;
	return io_wfail(p, bs_io_sync(p->dev, BS_OP_DISCARD, 0, off, len,
					 NULL));
}

/*
 * libext2fs' zeroout (ext2fs_zero_blocks2: inode tables, the journal):
 * the core's zeroout with no flags, so a device with unmap write-zeroes
 * deallocates, and one without gets zero buffers written.
 */
static errcode_t bsio_zeroout(io_channel ch, unsigned long long block,
			      unsigned long long count)
{
	struct io_priv *p = ch->private_data;
	uint64_t off, len;
	errcode_t ret;

	if (!p->rw)
		return EXT2_ET_RO_FILSYS;
	if ((ret = io_blocks(ch, block, count, &off, &len)))
		return ret;
	if (!len)
		return 0;
	return io_wfail(p, bs_zeroout_sync(p->dev, off, len, 0, NULL, NULL));
}

static errcode_t bsio_cache_readahead(io_channel ch, unsigned long long block,
				      unsigned long long count)
{
	return 0; /* nothing cached here, nothing to read ahead */
}

static struct struct_io_manager bs_io_manager_struct = {
	.magic = EXT2_ET_MAGIC_IO_MANAGER,
	.name = "blkstack I/O manager",
	.open = bsio_open,
	.close = bsio_close,
	.set_blksize = bsio_set_blksize,
	.read_blk = bsio_read_blk,
	.write_blk = bsio_write_blk,
	.flush = bsio_flush,
	/*
	 * No write_byte: libext2fs would then write the primary superblock
	 * as the runs of bytes that changed, one request each, and a failure
	 * between them leaves a superblock whose checksum does not match
	 * (e2fsck cannot open it). Without it the superblock is one request.
	 */
	.set_option = bsio_set_option,
	.get_stats = bsio_get_stats,
	.read_blk64 = bsio_read_blk64,
	.write_blk64 = bsio_write_blk64,
	.discard = bsio_discard,
	.cache_readahead = bsio_cache_readahead,
	.zeroout = bsio_zeroout,
};

io_manager bs_fs_io_manager = &bs_io_manager_struct;
