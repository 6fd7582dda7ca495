/* SPDX-License-Identifier: MIT */
/*
 * The NFS client's pieces that need no server: nfs:// URLs, nfsstat4
 * names and errnos, and what a connection attempt to nothing says.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/nfsclient.h>

#include "helpers/th.h"

static void urls(void **state)
{
	struct bs_nfs_url u;

	(void)state;
	assert_int_equal(bs_nfs_url_parse("nfs://127.0.0.1:2050/a/b", &u), 0);
	assert_string_equal(u.host, "127.0.0.1");
	assert_int_equal(u.port, 2050);
	assert_string_equal(u.path, "a/b");
	assert_int_equal(bs_nfs_url_parse("nfs://host", &u), 0);
	assert_string_equal(u.host, "host");
	assert_int_equal(u.port, 2049);
	assert_string_equal(u.path, "");
	assert_int_equal(bs_nfs_url_parse("nfs://h///x/", &u), 0);
	assert_string_equal(u.path, "x/");
	assert_int_equal(bs_nfs_url_parse("nfs://[::1]:7/e", &u), 0);
	assert_string_equal(u.host, "::1");
	assert_int_equal(u.port, 7);
	assert_string_equal(u.path, "e");
	assert_int_equal(bs_nfs_url_parse("http://h/x", &u), -EINVAL);
	assert_int_equal(bs_nfs_url_parse("nfs:///x", &u), -EINVAL);
	assert_int_equal(bs_nfs_url_parse("nfs://h:0/x", &u), -EINVAL);
	assert_int_equal(bs_nfs_url_parse("nfs://h:65536/x", &u), -EINVAL);
	assert_int_equal(bs_nfs_url_parse("nfs://h:12a/x", &u), -EINVAL);
	assert_int_equal(bs_nfs_url_parse("nfs://[::1/x", &u), -EINVAL);
	assert_int_equal(bs_nfs_url_parse("nfs://[::1]x/y", &u), -EINVAL);
}

static void statuses(void **state)
{
	(void)state;
	assert_string_equal(bs_nfs_status_name(10004), "NFS4ERR_NOTSUPP");
	assert_string_equal(bs_nfs_status_name(10044), "NFS4ERR_OP_ILLEGAL");
	assert_string_equal(bs_nfs_status_name(2), "NFS4ERR_NOENT");
	assert_string_equal(bs_nfs_status_name(99999), "nfsstat4 99999");
	assert_int_equal(bs_nfs_status_errno(0), 0);
	assert_int_equal(bs_nfs_status_errno(2), -ENOENT);
	assert_int_equal(bs_nfs_status_errno(10004), -EOPNOTSUPP);
	assert_int_equal(bs_nfs_status_errno(10044), -EOPNOTSUPP);
	assert_int_equal(bs_nfs_status_errno(10090), -EOPNOTSUPP);
	assert_int_equal(bs_nfs_status_errno(10021), -EPROTONOSUPPORT);
	assert_int_equal(bs_nfs_status_errno(27), -EFBIG);
	assert_int_equal(bs_nfs_status_errno(99999), -EREMOTEIO);
}

/* Nobody listens: ECONNREFUSED, a message naming the peer, nothing leaked. */
static void refused(void **state)
{
	struct bs_nfs *nfs = (struct bs_nfs *)1;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	(void)state;
	/* a port that was free a moment ago */
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	assert_int_equal(bs_nfs_connect("127.0.0.1", ntohs(a.sin_port), NULL,
					&nfs),
			 -ECONNREFUSED);
	assert_null(nfs);
	assert_non_null(strstr(bs_last_error(), "nfs 127.0.0.1:"));
	bs_nfs_disconnect(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(urls),
		cmocka_unit_test(statuses),
		cmocka_unit_test(refused),
	};

	return cmocka_run_group_tests_name("nfsclient", tests, NULL, NULL);
}
