/* The vhost-user wire format: messages with and without fds over a
 * socketpair, and the ways a peer can send something malformed or stop
 * half-way. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <dirent.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vhost-user/protocol.h"

struct pair {
	int a, b;
};

static int setup(void **state)
{
	static struct pair p;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	p.a = sv[0];
	p.b = sv[1];
	*state = &p;
	return 0;
}

static int teardown(void **state)
{
	struct pair *p = *state;

	close(p->a);
	if (p->b >= 0)
		close(p->b);
	return 0;
}

static void set_nonblock(int fd)
{
	assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
}

static int memfd_with(uint8_t tag)
{
	int fd = memfd_create("test", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, &tag, 1), 1);
	return fd;
}

static uint8_t memfd_tag(int fd)
{
	uint8_t tag = 0;
	assert_int_equal(pread(fd, &tag, 1, 0), 1);
	return tag;
}

static void roundtrip(struct pair *p, unsigned nfds)
{
	struct vhost_user_msg out = {
		.hdr = { .request = VHOST_USER_SET_MEM_TABLE,
			 .flags = VHOST_USER_VERSION,
			 .size = sizeof(struct vhost_user_memory) },
	};
	struct vhost_user_msg in;

	out.payload.memory.nregions = nfds;
	for (unsigned i = 0; i < VHOST_USER_MEM_TABLE_MAX_REGIONS; i++)
		out.payload.memory.regions[i].gpa = 0x1000ull * (i + 1);
	for (unsigned i = 0; i < nfds; i++)
		out.fds[i] = memfd_with((uint8_t)(0xa0 + i));
	out.nfds = nfds;

	assert_int_equal(vhost_user_msg_send(p->a, &out), 0);
	vhost_user_msg_close_fds(&out);
	assert_int_equal(vhost_user_msg_recv(p->b, &in), 1);

	assert_int_equal(in.hdr.request, VHOST_USER_SET_MEM_TABLE);
	assert_int_equal(in.hdr.size, sizeof(struct vhost_user_memory));
	assert_int_equal(in.payload.memory.nregions, nfds);
	for (unsigned i = 0; i < VHOST_USER_MEM_TABLE_MAX_REGIONS; i++)
		assert_int_equal(in.payload.memory.regions[i].gpa,
				 0x1000ull * (i + 1));
	assert_int_equal(in.nfds, nfds);
	/* The fds arrive as new descriptors for the same files. */
	for (unsigned i = 0; i < nfds; i++)
		assert_int_equal(memfd_tag(in.fds[i]), 0xa0 + i);
	vhost_user_msg_close_fds(&in);
	assert_int_equal(in.nfds, 0);
}

static void test_roundtrip_no_fds(void **state)
{
	roundtrip(*state, 0);
}

static void test_roundtrip_one_fd(void **state)
{
	roundtrip(*state, 1);
}

static void test_roundtrip_eight_fds(void **state)
{
	roundtrip(*state, 8);
}

static void test_eventfd_works_after_transfer(void **state)
{
	struct pair *p = *state;
	struct vhost_user_msg out = {
		.hdr = { .request = VHOST_USER_SET_VRING_KICK,
			 .flags = VHOST_USER_VERSION, .size = 8 },
		.payload.u64 = 1,
		.nfds = 1,
	};
	struct vhost_user_msg in;
	uint64_t v = 0;

	out.fds[0] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	assert_true(out.fds[0] >= 0);
	assert_int_equal(vhost_user_msg_send(p->a, &out), 0);
	assert_int_equal(vhost_user_msg_recv(p->b, &in), 1);
	assert_int_equal(in.nfds, 1);
	assert_int_equal(in.payload.u64, 1);
	v = 5;
	assert_int_equal(write(in.fds[0], &v, 8), 8);
	v = 0;
	assert_int_equal(read(out.fds[0], &v, 8), 8);
	assert_int_equal(v, 5);
	vhost_user_msg_close_fds(&out);
	vhost_user_msg_close_fds(&in);
}

static void send_raw(int fd, const void *buf, size_t len)
{
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
}

static void test_oversize_payload(void **state)
{
	struct pair *p = *state;
	struct vhost_user_header h = { .request = VHOST_USER_SET_FEATURES,
				       .flags = VHOST_USER_VERSION,
				       .size = VHOST_USER_MAX_PAYLOAD + 1 };
	struct vhost_user_msg in;

	send_raw(p->a, &h, sizeof(h));
	assert_int_equal(vhost_user_msg_recv(p->b, &in), -EPROTO);
	assert_int_equal(in.nfds, 0);
}

static void test_bad_version(void **state)
{
	struct pair *p = *state;
	struct vhost_user_header h = { .request = VHOST_USER_GET_FEATURES,
				       .flags = 0x2 };
	struct vhost_user_msg in;

	send_raw(p->a, &h, sizeof(h));
	assert_int_equal(vhost_user_msg_recv(p->b, &in), -EPROTO);
}

static int count_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void test_bad_header_closes_fds(void **state)
{
	struct pair *p = *state;
	struct vhost_user_msg out = {
		.hdr = { .request = VHOST_USER_SET_VRING_CALL, .flags = 0 },
		.nfds = 1,
	};
	struct vhost_user_msg in;

	out.fds[0] = eventfd(0, EFD_CLOEXEC);
	assert_int_equal(vhost_user_msg_send(p->a, &out), 0);
	vhost_user_msg_close_fds(&out);
	int before = count_open_fds();
	assert_int_equal(vhost_user_msg_recv(p->b, &in), -EPROTO);
	assert_int_equal(in.nfds, 0);
	assert_int_equal(count_open_fds(), before);
}

static double elapsed_s(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) +
	       (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static void test_header_then_silence_times_out(void **state)
{
	struct pair *p = *state;
	struct vhost_user_header h = { .request = VHOST_USER_SET_FEATURES,
				       .flags = VHOST_USER_VERSION, .size = 8 };
	struct vhost_user_msg in;
	struct timespec t0;

	send_raw(p->a, &h, sizeof(h));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(vhost_user_msg_recv(p->b, &in), -ETIMEDOUT);
	double s = elapsed_s(&t0);
	assert_true(s >= 0.9 && s < 3.0);
}

static void test_partial_header_times_out_nonblocking(void **state)
{
	struct pair *p = *state;
	struct vhost_user_msg in;
	uint8_t half[6] = { 1, 0, 0, 0, 1, 0 };

	set_nonblock(p->b);
	/* Nothing at all: the caller's socket is non-blocking, so say so. */
	assert_int_equal(vhost_user_msg_recv(p->b, &in), -EAGAIN);
	send_raw(p->a, half, sizeof(half));
	assert_int_equal(vhost_user_msg_recv(p->b, &in), -ETIMEDOUT);
}

static void test_eof(void **state)
{
	struct pair *p = *state;
	struct vhost_user_msg in;

	close(p->a);
	p->a = -1;
	assert_int_equal(vhost_user_msg_recv(p->b, &in), 0);
	p->a = open("/dev/null", O_RDONLY | O_CLOEXEC); /* for teardown */
}

static void test_eof_mid_message(void **state)
{
	struct pair *p = *state;
	struct vhost_user_header h = { .request = VHOST_USER_SET_FEATURES,
				       .flags = VHOST_USER_VERSION, .size = 8 };
	struct vhost_user_msg in;

	send_raw(p->a, &h, sizeof(h));
	close(p->a);
	p->a = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_int_equal(vhost_user_msg_recv(p->b, &in), -EIO);
}

static void test_split_message_arrives_whole(void **state)
{
	struct pair *p = *state;
	struct vhost_user_header h = { .request = VHOST_USER_SET_FEATURES,
				       .flags = VHOST_USER_VERSION, .size = 8 };
	uint64_t features = 0x1234567890abcdefull;
	struct vhost_user_msg in;

	set_nonblock(p->b);
	send_raw(p->a, &h, sizeof(h));
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		usleep(200 * 1000);
		send_raw(p->a, &features, sizeof(features));
		_exit(0);
	}
	assert_int_equal(vhost_user_msg_recv(p->b, &in), 1);
	assert_int_equal(in.hdr.request, VHOST_USER_SET_FEATURES);
	assert_int_equal(in.payload.u64, features);
	assert_int_equal(in.nfds, 0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
}

static void test_send_rejects_oversize(void **state)
{
	struct pair *p = *state;
	struct vhost_user_msg out = {
		.hdr = { .size = VHOST_USER_MAX_PAYLOAD + 1 },
	};

	assert_int_equal(vhost_user_msg_send(p->a, &out), -EINVAL);
	out.hdr.size = 0;
	out.nfds = VHOST_USER_MAX_FDS + 1;
	assert_int_equal(vhost_user_msg_send(p->a, &out), -EINVAL);
}

static void test_request_names(void **state)
{
	assert_string_equal(vhost_user_request_name(VHOST_USER_SET_MEM_TABLE),
			    "SET_MEM_TABLE");
	assert_string_equal(vhost_user_request_name(VHOST_USER_GET_STATUS),
			    "GET_STATUS");
	assert_string_equal(vhost_user_request_name(26), "unknown");
	assert_string_equal(vhost_user_request_name(0xffffffffu), "unknown");
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_roundtrip_no_fds),
		T(test_roundtrip_one_fd),
		T(test_roundtrip_eight_fds),
		T(test_eventfd_works_after_transfer),
		T(test_oversize_payload),
		T(test_bad_version),
		T(test_bad_header_closes_fds),
		T(test_header_then_silence_times_out),
		T(test_partial_header_times_out_nonblocking),
		T(test_eof),
		T(test_eof_mid_message),
		T(test_split_message_arrives_whole),
		T(test_send_rejects_oversize),
		T(test_request_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
