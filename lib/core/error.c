/* SPDX-License-Identifier: MIT */
/* The calling thread's last error message, set next to a -errno return. */
#include <stdarg.h>
#include <stdio.h>

#include <blkstack/bdev.h>

static _Thread_local char last_error[512];

int bs_verror(int err, const char *fmt, va_list ap)
{
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	return err;
}

int bs_error(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	bs_verror(err, fmt, ap);
	va_end(ap);
	return err;
}

const char *bs_last_error(void)
{
	return last_error;
}

void bs_error_clear(void)
{
	last_error[0] = '\0';
}
