/* Taking over from a predecessor (takeover.h). */
#include "handover/takeover.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "event/loop.h"
#include "handover/successor.h"
#include "util/clock.h"
#include "util/fd.h"
#include "util/log.h"
#include "util/sd_notify.h"

int vmio_takeover_open(struct vmio_takeover *t)
{
	const char *v = getenv(VMIO_HANDOVER_ENV);
	int type = 0;
	socklen_t len = sizeof(type);
	char *end;
	long fd;

	const char *ready = getenv(VMIO_HANDOVER_READY_ENV);

	*t = (struct vmio_takeover){ .sock = -1 };
	vmio_fd_receiver_init(&t->rx, -1, 0, 0);
	/* Asked by our parent, not passed on by a vmio that did not know
	 * the variable (successor.h). */
	t->say_ready = ready && atol(ready) == (long)getppid();
	unsetenv(VMIO_HANDOVER_READY_ENV);
	if (!v)
		return 0;
	errno = 0;
	fd = strtol(v, &end, 10);
	unsetenv(VMIO_HANDOVER_ENV);
	if (errno || end == v || *end || fd < 3 || fd > 1 << 20 ||
	    getsockopt((int)fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
	    type != SOCK_SEQPACKET) {
		log_err("%s does not name a hand-over socket; starting afresh is not safe, exiting",
			VMIO_HANDOVER_ENV);
		return -1;
	}
	t->sock = (int)fd;
	/* Ours alone: no later child of this process gets it. */
	if (fcntl(t->sock, F_SETFD, FD_CLOEXEC) < 0 ||
	    vmio_fd_set_nonblock(t->sock)) {
		log_err("hand-over socket: %s", strerror(errno));
		return -1;
	}
	return 1;
}

static void on_readable(void *opaque, int fd, uint32_t events)
{
	struct vmio_takeover *t = opaque;
	int rc = vmio_fd_receiver_step(&t->rx, t->why, sizeof(t->why));

	(void)fd;
	if (rc == -EAGAIN)
		return;
	if (rc)
		t->failed = true;
	else
		t->received = true;
}

static int read_state(struct vmio_takeover *t)
{
	if (vmio_envelope_read(&t->env, t->rx.rec, t->rx.len, t->why,
			       sizeof(t->why)))
		return -1;
	if (t->env.nfds != t->rx.nfds) {
		snprintf(t->why, sizeof(t->why),
			 "the state names %u fds, %zu came with it",
			 t->env.nfds, t->rx.nfds);
		return -1;
	}
	log_debug("hand-over: state format %u from vmio %s, %u sections, %u fds",
		  t->env.format, t->env.version, t->env.nsections, t->env.nfds);
	return 0;
}

int vmio_takeover_receive(struct vmio_takeover *t, struct vmio_loop *loop,
			  unsigned timeout_ms)
{
	uint64_t end = vmio_now_ns() + (uint64_t)timeout_ms * 1000000u;

	vmio_fd_receiver_init(&t->rx, t->sock, VMIO_ENVELOPE_MAX_BYTES,
			      VMIO_ENVELOPE_MAX_FDS);
	/* Set up, and nothing of the guests' touched yet: the predecessor
	 * stops serving only now, so that this process's start is not part
	 * of the pause. A full socket cannot be: nothing was sent on it. */
	if (t->say_ready && send(t->sock, VMIO_HANDOVER_READY,
				 strlen(VMIO_HANDOVER_READY),
				 MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		snprintf(t->why, sizeof(t->why), "cannot say ready: %s",
			 strerror(errno));
		return -1;
	}
	if (vmio_loop_add(loop, t->sock, EPOLLIN, on_readable, t)) {
		snprintf(t->why, sizeof(t->why), "cannot watch the hand-over socket");
		return -1;
	}
	/* The loop serves nothing else yet: its turns wait for the state
	 * alone, bounded. */
	while (!t->received && !t->failed) {
		uint64_t now = vmio_now_ns();
		int rc;

		if (now >= end) {
			snprintf(t->why, sizeof(t->why),
				 "the state did not arrive within %u ms",
				 timeout_ms);
			t->failed = true;
			break;
		}
		rc = vmio_loop_run_once(loop,
					(int)((end - now) / 1000000u) + 1);
		if (rc < 0) {
			snprintf(t->why, sizeof(t->why), "event loop: %s",
				 strerror(-rc));
			t->failed = true;
		}
	}
	vmio_loop_remove(loop, t->sock);
	if (t->failed || read_state(t))
		return -1;
	return 0;
}

const struct vmio_envelope_section *
vmio_takeover_take(struct vmio_takeover *t, const char *name, unsigned count,
		   int *fds)
{
	const struct vmio_envelope_section *s =
		vmio_envelope_find(&t->env, name);

	if (!s) {
		snprintf(t->why, sizeof(t->why), "the state has no section '%s'",
			 name);
		return NULL;
	}
	if (s->fd_count != count) {
		snprintf(t->why, sizeof(t->why),
			 "section '%s' carries %u fds, %u expected", name,
			 s->fd_count, count);
		return NULL;
	}
	/* The reader checked the range against the list; a taken fd is
	 * marked, so no section hands one out twice. */
	for (unsigned i = 0; i < count; i++) {
		int *slot = &t->rx.fds[s->fd_first + i];

		if (*slot < 0) {
			snprintf(t->why, sizeof(t->why),
				 "section '%s': fd %u was taken already", name,
				 s->fd_first + i);
			while (i--)
				t->rx.fds[s->fd_first + i] = fds[i];
			return NULL;
		}
		fds[i] = *slot;
		*slot = -1;
	}
	return s;
}

static int answer(struct vmio_takeover *t, const char *text)
{
	ssize_t n = send(t->sock, text, strlen(text),
			 MSG_DONTWAIT | MSG_NOSIGNAL);

	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* systemd must know the new main process before the old one may exit:
 * it reads pending notifications before it handles a child's exit, so
 * this datagram, sent before the answer, wins against the old one's
 * end. */
static void notify_main(pid_t pid, bool ready)
{
	char msg[64];
	int rc;

	snprintf(msg, sizeof(msg), "MAINPID=%d%s", (int)pid,
		 ready ? "\nREADY=1" : "");
	rc = vmio_sd_notify(msg);
	if (rc < 0)
		log_warn("cannot tell systemd the main process is %d: %s",
			 (int)pid, strerror(-rc));
}

int vmio_takeover_accept(struct vmio_takeover *t)
{
	char msg[64];

	notify_main(getpid(), true);
	snprintf(msg, sizeof(msg), "%s%d", VMIO_HANDOVER_TAKEN, (int)getpid());
	if (answer(t, msg)) {
		log_err("hand-over: the predecessor is gone before the answer (%s); it went on serving, so this one does not",
			strerror(errno));
		/* It is our parent, if it still runs: the main process
		 * again. */
		if (getppid() > 1)
			notify_main(getppid(), false);
		return -1;
	}
	log_info("hand-over: taken over from vmio %s", t->env.version);
	return 0;
}

void vmio_takeover_refuse(struct vmio_takeover *t, const char *why)
{
	char msg[VMIO_HANDOVER_ANSWER_MAX];

	log_err("hand-over refused: %s", why);
	snprintf(msg, sizeof(msg), "%s%s", VMIO_HANDOVER_REFUSED, why);
	if (t->sock >= 0)
		answer(t, msg);
}

void vmio_takeover_fini(struct vmio_takeover *t)
{
	vmio_fd_receiver_fini(&t->rx);
	vmio_close_fd(&t->sock);
}
