#include "redirect/sockmap.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "sockmap_redirect.skel.h"
#include "util/log.h"

struct redir_sockmap {
	struct sockmap_redirect *skel;
};

/* libbpf prints its own diagnostics; they belong in our debug log, not on
 * the terminal of a user for whom `auto` quietly falls back. */
static int libbpf_to_log(enum libbpf_print_level level, const char *fmt,
			 va_list ap)
{
	char line[512];

	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	log_debug("libbpf: %s", line);
	return 0;
}

struct redir_sockmap *redir_sockmap_load(char *err, size_t err_size)
{
	struct redir_sockmap *sm = calloc(1, sizeof(*sm));
	int rc;

	if (!sm) {
		snprintf(err, err_size, "out of memory");
		return NULL;
	}
	libbpf_set_print(libbpf_to_log);
	sm->skel = sockmap_redirect__open_and_load();
	if (!sm->skel) {
		rc = -errno;
		snprintf(err, err_size,
			 "cannot load the BPF program: %s%s", strerror(-rc),
			 rc == -EPERM ? " (needs root, or CAP_BPF and CAP_NET_ADMIN)" : "");
		free(sm);
		return NULL;
	}
	/* Attached to the map, not to a socket: every socket inserted into
	 * `ingress` from now on runs it. */
	if (bpf_prog_attach(bpf_program__fd(sm->skel->progs.redirect_datagram),
			    bpf_map__fd(sm->skel->maps.ingress),
			    BPF_SK_SKB_VERDICT, 0) < 0) {
		rc = -errno;
		snprintf(err, err_size,
			 "cannot attach the sk_skb verdict program: %s",
			 strerror(-rc));
		redir_sockmap_free(sm);
		return NULL;
	}
	return sm;
}

int redir_sockmap_attach(struct redir_sockmap *sm, int ingress, int egress,
			 int sndbuf)
{
	__u32 key = 0;
	__u64 fd;

	/* The kernel retries a full egress only on the next timer tick (4 ms
	 * at HZ=250), not when room appears; a large send buffer keeps it
	 * from getting there. FORCE goes past net.core.wmem_max, and a
	 * process that could load the program may use it. */
	if (setsockopt(egress, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf,
		       sizeof(sndbuf)) < 0 &&
	    setsockopt(egress, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) < 0)
		log_warn("sockmap: cannot set the egress send buffer: %s",
			 strerror(errno));
	/* Egress first: a datagram redirected to an empty slot is dropped. */
	fd = (__u64)egress;
	if (bpf_map_update_elem(bpf_map__fd(sm->skel->maps.egress), &key, &fd,
				BPF_NOEXIST) < 0)
		return -errno;
	fd = (__u64)ingress;
	if (bpf_map_update_elem(bpf_map__fd(sm->skel->maps.ingress), &key, &fd,
				BPF_NOEXIST) < 0) {
		int rc = -errno;

		bpf_map_delete_elem(bpf_map__fd(sm->skel->maps.egress), &key);
		return rc;
	}
	return 0;
}

void redir_sockmap_read(const struct redir_sockmap *sm,
			struct redir_sockmap_counters *c)
{
	const volatile struct sockmap_redirect__bss *bss = sm->skel->bss;

	*c = (struct redir_sockmap_counters){
		.bytes = bss->redirected_bytes,
		.msgs = bss->redirected_msgs,
		.failed = bss->failed_msgs,
		.eof = bss->eof != 0,
	};
}

void redir_sockmap_free(struct redir_sockmap *sm)
{
	if (!sm)
		return;
	sockmap_redirect__destroy(sm->skel);
	free(sm);
}
