/*
 * sockmap-recv-lock: the smallest reproducer of a Linux vsock issue
 * (docs/known-kernel-issues.md): a blocking recv() on a connected vsock
 * stream socket that is in a sockmap, entered with nothing to read, sleeps
 * in vsock_msg_wait_data() (net/vmw_vsock/vsock_bpf.c) holding the
 * socket's lock. Whatever needs that lock waits with it: this process's
 * own send() on the socket, the kernel's sends into it (a sockmap
 * redirect), and the guest's virtio-vsock receive worker, which takes the
 * lock of the socket each packet is for, so that the data that would wake
 * the reader cannot arrive. The recv ends only at SO_RCVTIMEO, with
 * EAGAIN, or never without one.
 *
 *   sockmap-recv-lock PORT [--no-sockmap] [--wait-ms MS]
 *
 * Connects to CID 2 (the host) PORT, where an echo service runs (uds-peer
 * listen PATH --mode echo), puts the socket alone in a sockmap with no
 * program (as `vmio redirect` puts its ADDRESS2), unless --no-sockmap,
 * sets SO_RCVTIMEO to MS (default 3000), and starts a thread that sends
 * 16 bytes 100 ms later, while the main thread is in a blocking recv()
 * of them. Prints one line:
 *   sockmap=0|1 recv=16|ERRNO recv_ms=T send_ms=T
 * recv_ms: how long the recv took; send_ms: how long the thread's send()
 * took. A kernel without the issue: recv=16 after about 100 ms plus the
 * round trip, send_ms near 0. With it: recv=EAGAIN after MS, and the send
 * blocked until then. Exit 0 when the line could be measured, 1 if not.
 * Inside a guest only: on a host, AF_VSOCK reaches the host's hypervisor.
 */
#include <errno.h>
#include <linux/bpf.h>
#include <linux/vm_sockets.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SEND_AFTER_MS 100

static int fd;
static double send_ms = -1;

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void *sender(void *unused)
{
	double t0;

	(void)unused;
	usleep(SEND_AFTER_MS * 1000);
	t0 = now_ms();
	if (send(fd, "sixteen bytes...", 16, MSG_NOSIGNAL) == 16)
		send_ms = now_ms() - t0;
	return NULL;
}

/* A sockmap of one slot, with no program attached, holding fd: what
 * replaces the socket's recvmsg with vsock_bpf_recvmsg. */
static int join_sockmap(int sock)
{
	union bpf_attr create = {
		.map_type = BPF_MAP_TYPE_SOCKMAP,
		.key_size = 4,
		.value_size = 4,
		.max_entries = 1,
	};
	uint32_t key = 0, value = (uint32_t)sock;
	union bpf_attr update = {
		.key = (uintptr_t)&key,
		.value = (uintptr_t)&value,
		.flags = BPF_ANY,
	};
	int map = (int)syscall(SYS_bpf, BPF_MAP_CREATE, &create,
			       sizeof(create));

	if (map < 0)
		return -1;
	update.map_fd = (uint32_t)map;
	return (int)syscall(SYS_bpf, BPF_MAP_UPDATE_ELEM, &update,
			    sizeof(update));
}

int main(int argc, char **argv)
{
	struct sockaddr_vm host = { .svm_family = AF_VSOCK, .svm_cid = 2 };
	int use_sockmap = 1, wait_ms = 3000;
	struct timeval tv;
	pthread_t th;
	char buf[64];
	double t0, recv_ms;
	ssize_t n;
	int err;

	if (argc < 2) {
		fprintf(stderr, "usage: %s PORT [--no-sockmap] [--wait-ms MS]\n",
			argv[0]);
		return 2;
	}
	host.svm_port = (unsigned)atoi(argv[1]);
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--no-sockmap"))
			use_sockmap = 0;
		else if (!strcmp(argv[i], "--wait-ms") && i + 1 < argc)
			wait_ms = atoi(argv[++i]);
	}
	fd = socket(AF_VSOCK, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&host, sizeof(host))) {
		fprintf(stderr, "sockmap-recv-lock: vsock 2:%u: %s\n",
			host.svm_port, strerror(errno));
		return 1;
	}
	if (use_sockmap && join_sockmap(fd)) {
		fprintf(stderr, "sockmap-recv-lock: sockmap: %s\n",
			strerror(errno));
		return 1;
	}
	tv = (struct timeval){ .tv_sec = wait_ms / 1000,
			       .tv_usec = wait_ms % 1000 * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (pthread_create(&th, NULL, sender, NULL))
		return 1;
	t0 = now_ms();
	n = recv(fd, buf, sizeof(buf), 0);
	err = errno;
	recv_ms = now_ms() - t0;
	pthread_join(th, NULL);
	printf("sockmap=%d recv=%s recv_ms=%.0f send_ms=%.0f\n", use_sockmap,
	       n > 0 ? (snprintf(buf, sizeof(buf), "%zd", n), buf) :
	       n == 0 ? "EOF" : err == EAGAIN ? "EAGAIN" : strerror(err),
	       recv_ms, send_ms);
	close(fd);
	return 0;
}
