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
	int egress; /* in slot 0 of the egress map; -1: none yet */
};

/* libbpf prints its own diagnostics; they belong in our debug log, not on
 * the terminal of a user for whom `auto` quietly falls back. */
__attribute__((format(printf, 2, 0)))
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
	sm->egress = -1;
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

/* The kernel retries a full egress only on the next timer tick (4 ms at
 * HZ=250), not when room appears; a large send buffer keeps it from
 * getting there. FORCE goes past net.core.wmem_max, and a process that
 * could load the program may use it. */
static void set_sndbuf(int fd, int sndbuf)
{
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf,
		       sizeof(sndbuf)) < 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) < 0)
		log_warn("sockmap: cannot set a send buffer: %s",
			 strerror(errno));
}

static int insert(int map_fd, __u32 key, int fd)
{
	__u64 value = (__u64)fd;

	return bpf_map_update_elem(map_fd, &key, &value, BPF_NOEXIST) < 0 ?
		       -errno : 0;
}

int redir_sockmap_join_egress(struct redir_sockmap *sm, int egress,
			      int sndbuf)
{
	int rc;

	set_sndbuf(egress, sndbuf);
	rc = insert(bpf_map__fd(sm->skel->maps.egress), 0, egress);
	if (!rc)
		sm->egress = egress;
	return rc;
}

int redir_sockmap_attach(struct redir_sockmap *sm, int ingress, int egress,
			 int diversion, int sndbuf)
{
	int egress_map = bpf_map__fd(sm->skel->maps.egress);
	int rc = 0;

	set_sndbuf(diversion, sndbuf);
	/* Egress first: a datagram redirected to an empty slot is dropped. */
	if (sm->egress != egress)
		rc = redir_sockmap_join_egress(sm, egress, sndbuf);
	if (!rc)
		rc = insert(egress_map, 1, diversion);
	if (!rc)
		rc = insert(bpf_map__fd(sm->skel->maps.ingress), 0, ingress);
	if (rc) {
		for (__u32 key = 0; key < 2; key++)
			bpf_map_delete_elem(egress_map, &key);
		sm->egress = -1;
	}
	return rc;
}

void redir_sockmap_read(const struct redir_sockmap *sm,
			struct redir_sockmap_counters *c)
{
	const volatile struct sockmap_redirect__bss *bss = sm->skel->bss;

	*c = (struct redir_sockmap_counters){
		.bytes = bss->redirected_bytes,
		.msgs = bss->redirected_msgs,
		.diverted = bss->diverted_msgs,
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
