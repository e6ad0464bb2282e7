/*
 * handover-sibling: the sibling VM of tests/guest/handover_test.sh. A
 * second VM of the same `vmio vsock` (same group as the QEMU guest),
 * driven by the in-tree front end (src/frontend/vsock_guest.h) from this
 * process: a second QEMU guest would cost too much under TCG.
 *
 *   handover-sibling --socket PATH --cid N --port P [--timeout SECS]
 *
 * Opens the VM's vhost-user socket as its driver, listens on port P,
 * accepts one connection (the QEMU guest's, from its CID, routed by vmio
 * between its VMs), reads it to end of stream checking every byte
 * against the pattern (peer-engine.h) and timing the longest gap between
 * two reads, then replies "got N fnv X\n" as handover-peer's recv does and
 * waits for the guest to close. Prints "handover-sibling: listening",
 * "connected", and one result line (result=ok|FAIL); exit 0 ok, 1 not.
 * The driver's own checks of the device (protocol violations, refused
 * packets) are in the result line and must be 0.
 */
#include <signal.h>

#include "frontend/vsock_guest.h"
#include "peer-engine.h"

static const char *prog = "handover-sibling";

static void usage(void)
{
	fprintf(stderr, "usage: %s --socket PATH --cid N --port P [--timeout SECS]\n", prog);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *path = NULL;
	uint64_t cid = 0, port = 0, x;
	double timeout = 300;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--socket"))
			path = argv[i + 1];
		else if (!strcmp(argv[i], "--cid") && pe_parse_size(argv[i + 1], &x))
			cid = x;
		else if (!strcmp(argv[i], "--port") && pe_parse_size(argv[i + 1], &x))
			port = x;
		else if (!strcmp(argv[i], "--timeout") && pe_parse_size(argv[i + 1], &x))
			timeout = (double)x;
		else
			usage();
	}
	if (!path || !cid || !port || (argc % 2) != 1)
		usage();
	double t0 = pe_now(), deadline = t0 + timeout;

	struct vg_opts o;
	char err[256];
	vg_opts_init(&o);
	o.guest_cid = cid;
	o.siblings = true;
	struct vg *g = vg_open(path, 10000, &o, err, sizeof(err));
	if (!g) {
		printf("%s: open %s result=FAIL why=%s\n", prog, path, err);
		return 1;
	}
	if (vg_listen(g, (uint32_t)port)) {
		printf("%s: listen result=FAIL why=%s\n", prog, g->error);
		return 1;
	}
	printf("%s: listening cid=%" PRIu64 " port=%" PRIu64 "\n", prog, cid, port);
	int e = 0;
	struct vg_sock *s = NULL;
	while (!s && pe_now() < deadline) {
		s = vg_accept(g, (uint32_t)port, false, 1000, &e);
		if (!s && e != -ETIMEDOUT && e != 0)
			break;
	}
	if (!s) {
		printf("%s: accept result=FAIL why=%s\n", prog, e ? pe_errname(-e) : "timeout");
		return 1;
	}
	struct vg_sock_info si;
	vg_sock_info(s, &si);
	printf("%s: connected port=%u peer_port=%u\n", prog, si.local_port, si.peer_port);

	static unsigned char buf[PE_CHUNK];
	struct pe_rx rx;
	const char *why = NULL;
	pe_rx_init(&rx);
	rx.t0 = t0;
	for (;;) {
		if (pe_now() >= deadline) {
			why = "timeout";
			break;
		}
		ssize_t k = vg_read(s, buf, sizeof(buf), 200);
		if (k == -ETIMEDOUT)
			continue;
		if (k == 0)
			break;
		if (k < 0) {
			why = pe_errname((int)-k);
			break;
		}
		if (pe_rx_take(&rx, buf, (size_t)k))
			printf("%s: first-byte\n", prog);
	}
	if (!why) {
		char reply[96];
		int n = snprintf(reply, sizeof(reply), "got %" PRIu64 " fnv %016" PRIx64 "\n", rx.got, rx.fnv);
		ssize_t w = vg_write(s, reply, (size_t)n, 10000);
		if (w != n)
			why = "reply-not-sent";
		else if (vg_shutdown(s, VSOCK_SHUTDOWN_SEND))
			why = "shutdown";
	}
	/* The guest closes once it has the reply. */
	for (double end = pe_now() + 10; !why && pe_now() < end;) {
		ssize_t k = vg_read(s, buf, sizeof(buf), 200);
		if (k == 0 || k == -ECONNRESET)
			break;
		if (k > 0)
			why = "data-after-end-of-stream";
	}
	bool ok = !why && rx.bad_at == UINT64_MAX && !g->violations && !g->rx_refused_pkts && !g->rx_resets;
	printf("%s: recv recvd=%" PRIu64 " recv_fnv=%016" PRIx64 " pattern=%s max_gap_ms=%.0f gap_at_s=%.1f"
	       " violations=%" PRIu64 " refused=%" PRIu64 " resets=%" PRIu64 "%s%s%s%s%s result=%s\n",
	       prog, rx.got, rx.fnv, rx.bad_at == UINT64_MAX ? "ok" : "BAD", rx.max_gap * 1e3, rx.gap_at, g->violations,
	       g->rx_refused_pkts, g->rx_resets, why ? " why=" : "", why ? why : "",
	       g->violations ? " violation=\"" : "", g->violations ? g->violation : "",
	       g->violations ? "\"" : "", ok ? "ok" : "FAIL");
	vg_close(s);
	vg_free(g);
	return ok ? 0 : 1;
}
