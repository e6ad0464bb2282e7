/*
 * crash-guest: the guest's end of guest_crash (tests/guest/crash_test.sh),
 * static, run in the test guest only (AF_VSOCK on a host reaches the
 * host's own hypervisor).
 *
 *   crash-guest G2H_PORT IDLE_PORT STOP_PORT SECONDS
 *
 * Holds, for as long as vmio lets it, two connections:
 *   stream  to the host (CID 2) G2H_PORT: a 64-byte request every 20 ms,
 *           each answered by the host's echo, byte for byte
 *   idle    from the host, accepted on IDLE_PORT: the host's first bytes
 *           echoed once, then nothing either way
 * When either ends without this side closing it (what a guest sees of
 * the RST a vmio restarted after a crash sends for every connection of
 * the one that died), one line:
 *   CRASH stream-end n=K how=HOW      (K: ends of that connection so far)
 *   CRASH idle-end n=K how=HOW
 * HOW is what the socket said: "reset" for ECONNRESET, "eof+epipe" for
 * an end of stream after which a write fails with EPIPE (the peer shut
 * both ways: Linux reports an RST on an established stream socket so,
 * setting no error), or what else it was ("eof", "eof+write-ok",
 * "ERRNO"). The stream is connected again at once (retried for up to
 * 10 s); the host opens the next idle connection itself. A connection
 * to STOP_PORT ends the run:
 *   CRASH-GUEST stream_ends=N idle_ends=N round_trips=N result=ok|fail
 *   [why=...]
 * Exit 0 with result=ok: every answer right, every reconnection within
 * its bound; 1 otherwise; 2 on usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MSG 64
#define PACE_MS 20
#define BOUND_MS 10000

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int vsock_listen(unsigned port)
{
	struct sockaddr_vm a = { .svm_family = AF_VSOCK,
				 .svm_cid = VMADDR_CID_ANY, .svm_port = port };
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(fd, 8)) {
		fprintf(stderr, "crash-guest: listen on %u: %s\n", port,
			strerror(errno));
		exit(1);
	}
	return fd;
}

/* Connects to the host's port, trying again until BOUND_MS. -1 then. */
static int vsock_connect(unsigned port)
{
	struct sockaddr_vm a = { .svm_family = AF_VSOCK, .svm_cid = 2,
				 .svm_port = port };
	int64_t end = now_ms() + BOUND_MS;

	while (now_ms() < end) {
		int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd < 0)
			return -1;
		if (!connect(fd, (struct sockaddr *)&a, sizeof(a))) {
			fcntl(fd, F_SETFL, O_NONBLOCK);
			return fd;
		}
		close(fd);
		usleep(20000);
	}
	return -1;
}

/* How a connection that read() ended (r: its result) ended. */
static const char *how_ended(int fd, ssize_t r, int err)
{
	static char buf[64];

	if (r < 0 && err == ECONNRESET)
		return "reset";
	if (r < 0) {
		snprintf(buf, sizeof(buf), "%s", strerrorname_np(err) ?
			 strerrorname_np(err) : "error");
		return buf;
	}
	if (send(fd, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		return errno == EPIPE ? "eof+epipe"
		       : errno == ECONNRESET ? "reset" : "eof+write-failed";
	return "eof+write-ok";
}

int main(int argc, char **argv)
{
	unsigned g2h, idle_port, stop_port;
	int64_t end, next_req = 0, sent_at = 0;
	int s, lis, stop, idle = -1;
	unsigned stream_ends = 0, idle_ends = 0;
	uint64_t rts = 0, seq = 0;
	uint8_t want[MSG], got[MSG];
	size_t have = 0;
	bool outstanding = false, idle_echoed = false;
	char why[160] = "";

	if (argc != 5) {
		fprintf(stderr, "usage: crash-guest G2H_PORT IDLE_PORT "
				"STOP_PORT SECONDS\n");
		return 2;
	}
	g2h = (unsigned)atoi(argv[1]);
	idle_port = (unsigned)atoi(argv[2]);
	stop_port = (unsigned)atoi(argv[3]);
	end = now_ms() + atoi(argv[4]) * 1000;
	setvbuf(stdout, NULL, _IOLBF, 0);
	lis = vsock_listen(idle_port);
	stop = vsock_listen(stop_port);
	s = vsock_connect(g2h);
	if (s < 0) {
		printf("CRASH-GUEST stream_ends=0 idle_ends=0 round_trips=0 "
		       "result=fail why=no-first-connection\n");
		return 1;
	}
	printf("CRASH stream-open n=0\n");
	while (!why[0]) {
		struct pollfd p[4] = {
			{ .fd = s, .events = POLLIN },
			{ .fd = idle, .events = POLLIN },
			{ .fd = lis, .events = POLLIN },
			{ .fd = stop, .events = POLLIN },
		};
		int64_t t = now_ms();

		if (t >= end) {
			snprintf(why, sizeof(why), "no-stop-within-the-time");
			break;
		}
		if (!outstanding && t >= next_req) {
			for (unsigned i = 0; i < MSG; i++)
				want[i] = (uint8_t)(seq * 7 + i);
			if (send(s, want, MSG, MSG_NOSIGNAL) == MSG) {
				outstanding = true;
				sent_at = t;
				have = 0;
			} /* else: the read below sees the end */
		}
		if (outstanding && t - sent_at > BOUND_MS) {
			snprintf(why, sizeof(why), "stream-unanswered-10s");
			break;
		}
		poll(p, 4, PACE_MS);
		if (p[3].revents) {
			printf("CRASH stop\n");
			break;
		}
		if (idle >= 0 && p[1].revents) {
			char b[64];
			ssize_t r = recv(idle, b, sizeof(b), MSG_DONTWAIT);

			if (r > 0 && !idle_echoed) {
				idle_echoed = send(idle, b, (size_t)r,
						   MSG_NOSIGNAL) == r;
			} else if (r > 0) {
				snprintf(why, sizeof(why), "idle-got-bytes");
			} else if (r == 0 || errno != EAGAIN) {
				int err = errno;

				printf("CRASH idle-end n=%u how=%s\n",
				       ++idle_ends, how_ended(idle, r, err));
				close(idle);
				idle = -1;
			}
		}
		if (p[2].revents) {
			int fd = accept4(lis, NULL, NULL, SOCK_CLOEXEC);

			if (fd >= 0) {
				if (idle >= 0)
					close(idle);
				idle = fd;
				idle_echoed = false;
				printf("CRASH idle-open n=%u\n", idle_ends);
			}
		}
		if (p[0].revents) {
			ssize_t r = recv(s, got + have, MSG - have,
					 MSG_DONTWAIT);

			if (r > 0) {
				have += (size_t)r;
				if (!outstanding) {
					snprintf(why, sizeof(why),
						 "stream-unasked-bytes");
				} else if (have == MSG) {
					if (memcmp(got, want, MSG)) {
						snprintf(why, sizeof(why),
							 "stream-wrong-answer");
						break;
					}
					outstanding = false;
					rts++;
					seq++;
					next_req = now_ms() + PACE_MS;
				}
			} else if (r == 0 || errno != EAGAIN) {
				int err = errno;

				printf("CRASH stream-end n=%u how=%s\n",
				       ++stream_ends, how_ended(s, r, err));
				close(s);
				outstanding = false;
				s = vsock_connect(g2h);
				if (s < 0) {
					snprintf(why, sizeof(why),
						 "no-new-stream-within-10s");
					break;
				}
				printf("CRASH stream-open n=%u\n", stream_ends);
			}
		}
	}
	printf("CRASH-GUEST stream_ends=%u idle_ends=%u round_trips=%llu "
	       "result=%s%s%s\n", stream_ends, idle_ends,
	       (unsigned long long)rts, why[0] ? "fail" : "ok",
	       why[0] ? " why=" : "", why);
	return why[0] ? 1 : 0;
}
