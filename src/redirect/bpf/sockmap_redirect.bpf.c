// SPDX-License-Identifier: GPL-2.0-only OR MIT
/* The sockmap engine's data path: every datagram that reaches the
 * ingress socket (a unix datagram socket, the only one in `ingress`) is
 * handed by the kernel to the egress socket's send path, without this
 * process ever seeing it. One pair per process: `vmio redirect
 * UNIX-RECV:... X` has exactly one.
 *
 * The key could not be the ingress socket: on a unix socket an skb
 * belongs to its sender, so bpf_get_socket_cookie() names the sender, and
 * a datagram socket has any number of those.
 *
 * Slot 1 of `egress` is a stream socket of vmio's own, the diversion: when
 * a unix stream egress's peer shuts down either way (a sink may well shut
 * its sending side), Linux takes the egress out of the map (unix_shutdown
 * unhashes the peer), slot 0 is empty, and what is refused here would be
 * lost. Sent to the diversion instead, it reaches vmio in order, and
 * still holds its sender back while it waits (its memory stays charged to
 * the sender), where passing it up to the ingress socket would not. What
 * the kernel still held for the egress then is dropped with it, counted
 * on the egress, and vmio reports it as lost (sockmap_relay.c). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} ingress SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} egress SEC(".maps");

/* Read by the loader through the mmap()ed .bss, without a syscall. */
__u64 redirected_bytes;   /* handed to the egress socket */
__u64 redirected_msgs;
__u64 diverted_msgs;      /* refused by the egress, sent to slot 1 */
__u64 failed_msgs;        /* refused by both: the kernel dropped them */
volatile __u32 diverting;  /* sticky: order holds only if all later data follows */
volatile __u32 eof;        /* an empty datagram arrived: end of input */

SEC("sk_skb")
int redirect_datagram(struct __sk_buff *skb)
{
	__u32 len = skb->len;

	/* socat's end-of-data convention. There is nothing to forward, and
	 * passing an empty skb up to a psock makes recv() fail with EFAULT
	 * (Linux 6.18), so the loader polls for this flag instead. */
	if (len == 0) {
		eof = 1; /* a plain store: a u32 write is atomic */
		return SK_DROP;
	}
	if (diverting || bpf_sk_redirect_map(skb, &egress, 0, 0) != SK_PASS) {
		diverting = 1;
		if (bpf_sk_redirect_map(skb, &egress, 1, 0) != SK_PASS) {
			__sync_fetch_and_add(&failed_msgs, 1);
			return SK_DROP;
		}
		__sync_fetch_and_add(&diverted_msgs, 1);
	}
	__sync_fetch_and_add(&redirected_bytes, len);
	__sync_fetch_and_add(&redirected_msgs, 1);
	return SK_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
