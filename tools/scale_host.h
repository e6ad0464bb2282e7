/* The host programs of vmio-scale: one forked child that listens at the
 * guests' host ports (<uds-path>_<port>) and serves whatever connects,
 * each listener in one of three ways:
 *
 *   hold  accept and keep the connection open, reading nothing but what
 *         comes unasked (counted as stray bytes); the idle connections
 *   sink  read to end of stream, checking the first and last pattern
 *         message (vsock_transfer.h), then report bytes and the time of
 *         the last byte; the streams
 *   echo  write back what comes; the request/response connections
 *
 * All on one epoll loop, never blocking: the child holds any number of
 * connections (its RLIMIT_NOFILE is the bound) and answers the parent
 * through a SOCK_SEQPACKET socket pair, one struct scale_host_msg a
 * message. It exits when the parent goes away. */
#ifndef VMIO_TOOLS_SCALE_HOST_H
#define VMIO_TOOLS_SCALE_HOST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

enum scale_serve { SCALE_HOLD, SCALE_SINK, SCALE_ECHO };

/* The host ports vmio-scale's guests connect to, one per way of serving;
 * nobody listens at SCALE_PORT_NONE. */
#define SCALE_PORT_HOLD 1000u
#define SCALE_PORT_SINK 1001u
#define SCALE_PORT_ECHO 1002u
#define SCALE_PORT_NONE 1003u
/* Not served by the child: vmio-scale handover's two-way streams, whose
 * host ends it holds itself (scale_handover.h). */
#define SCALE_PORT_STREAM 1004u

struct scale_listener {
	const char *uds_path; /* the VM's; the socket is <uds_path>_<port> */
	uint32_t port;
	enum scale_serve serve;
	uint32_t vm;          /* a tag reported back with each stream */
};

struct scale_host_cfg {
	const struct scale_listener *l;
	unsigned n;
	/* Sinks: what each stream carries (xfer_pattern_check_ends); total
	 * UINT64_MAX for endless streams, of which only the start is
	 * checked. */
	uint64_t msg, per_conn;
};

enum {
	/* Parent to child: answer with SCALE_HELD once n (or more) hold
	 * connections are open. Child to parent: n held now, m of those
	 * accepted that closed since, stray bytes in bytes. */
	SCALE_HELD = 1,
	/* Child to parent: a sink stream ended; vm of its listener, bytes
	 * received, t_ns (vmio_now_ns) when its last byte came; error set
	 * if it was not all there or the pattern was wrong. */
	SCALE_DONE,
};

struct scale_host_msg {
	uint32_t type;
	uint32_t vm;
	uint64_t n, m, bytes;
	int64_t t_ns;
	char error[128];
};

struct scale_host {
	pid_t pid;
	int ctl; /* our end of the pair */
	/* The socket files, removed at stop (the child dies by SIGKILL). */
	char **paths;
	struct stat *st;
	unsigned n;
};

/* Binds every listener (so they exist on return), then forks the child
 * that serves them. Returns 0, or -1 with err filled. */
int scale_host_start(const struct scale_host_cfg *cfg, struct scale_host *h,
		     char *err, size_t err_size);
/* Kills and reaps the child, and removes its socket files. */
void scale_host_stop(struct scale_host *h);

int scale_host_send(struct scale_host *h, const struct scale_host_msg *m);
/* Takes one message, waiting up to timeout_ms. Returns 1, 0 on timeout,
 * -1 if the child is gone. */
int scale_host_recv(struct scale_host *h, struct scale_host_msg *m,
		    int timeout_ms);

/* Asks for n held connections and waits for the answer, at most
 * XFER_STALL_MS without the count growing. Returns 0 with *reply
 * filled (reply->n < n if the count stalled), or -1 if the child is
 * gone or said something else. */
int scale_host_wait_held(struct scale_host *h, uint64_t n,
			 struct scale_host_msg *reply);

#endif
