/* The engine `vmio redirect` runs; see engine_choice.h. */
#include "redirect/engine_choice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>

#include "util/log.h"

/* Unless vsock-buffer= says otherwise, a vsock ADDRESS2 of the sockmap
 * engine: the same timer tick comes each time the socket runs out of
 * credit, which Linux 6.12.69+ bounds by this buffer as well as by the
 * host's. In a 6.12 guest through `vmio vsock --tx-buffer-size 4m`, 16
 * MiB of 64 KiB datagrams waited a tick 50 times at the kernel's 256
 * KiB, 1 to 3 times at 2 MiB, never at 4 MiB (README, "vsock credit"). */
#define SOCKMAP_VSOCK_BUFFER (4u << 20)
/* The first Linux that takes a vsock socket into a sockmap
 * (634f1a7110b4, "vsock: support sockmap"). */
#define SOCKMAP_VSOCK_LINUX 0x060400u

/* Each reason is a trap measured on Linux 6.18 (README, "Engines"). */
const char *redir_sockmap_misfit(const struct redir_addr *in,
				 const struct redir_addr *out)
{
	if (in->kind == REDIR_STDIO || out->kind == REDIR_STDIO)
		return "STDIO is no socket the kernel could forward between";
	if (out->socktype != SOCK_STREAM)
		return "the kernel splits messages on their way into a datagram or seqpacket socket";
	if (in->family == AF_INET || in->family == AF_INET6 ||
	    in->family == AF_UNSPEC)
		return "a TCP ingress gets no backpressure: the kernel acknowledges what it holds for a slow ADDRESS2, without bound";
	if (in->kind != REDIR_UNIX_RECV)
		return "a stream ingress would strand the data queued on it before it joined the map (the kernel forwards one queued packet per arrival), and the way back would have no end-of-data";
	return NULL;
}

static const char *misfit(const struct redir_endpoint ep[2])
{
	return redir_sockmap_misfit(&ep[0].addr, &ep[1].addr);
}

/* The running kernel's version as 0xMMmmpp (major, minor, patch), or 0
 * when uname's release does not start with one. */
static unsigned kernel_version(void)
{
	struct utsname u;
	unsigned maj, min, patch = 0;

	if (uname(&u) || sscanf(u.release, "%u.%u.%u", &maj, &min, &patch) < 2 ||
	    min > 255)
		return 0;
	return maj << 16 | min << 8 | (patch > 255 ? 255 : patch);
}

/* Why this kernel cannot run the sockmap engine for a pair that fits it,
 * or NULL; the message is written into buf. Only what is known before
 * connecting: the kernel may still refuse ADDRESS2 once connected
 * (redir_engine_fall_back). */
static const char *sockmap_unavailable(const struct redir_endpoint ep[2],
				       char *buf, size_t size)
{
	struct utsname u;
	unsigned v = kernel_version();

	/* For the guest test: have an old kernel refuse the socket itself,
	 * which takes the path a backported or vendor kernel would. */
	if (getenv("VMIO_REDIRECT_SOCKMAP_ANY_KERNEL"))
		return NULL;
	if (ep[1].addr.family == AF_VSOCK && v && v < SOCKMAP_VSOCK_LINUX) {
		snprintf(buf, size,
			 "forwarding into vsock needs Linux 6.4, this is %s",
			 uname(&u) ? "older" : u.release);
		return buf;
	}
	return NULL;
}

int redir_engine_choose(struct redir_engine_choice *ch, enum redir_engine asked,
			struct redir_endpoint ep[2], char *err, size_t size)
{
	const char *unfit = misfit(ep), *unavailable = NULL;
	char why[256];

	*ch = (struct redir_engine_choice){ .asked = asked, .engine = asked };
	if (asked == REDIR_ENGINE_SOCKMAP && unfit) {
		snprintf(err, size, "%s", unfit);
		return REDIR_CHOICE_MISFIT;
	}
	if (!unfit)
		unavailable = sockmap_unavailable(ep, why, sizeof(why));
	if (unavailable && asked == REDIR_ENGINE_SOCKMAP) {
		snprintf(err, size, "%s", unavailable);
		return REDIR_CHOICE_FAILED;
	}
	if (unavailable && asked == REDIR_ENGINE_AUTO)
		snprintf(ch->why, sizeof(ch->why),
			 "sockmap is not available: %s", unavailable);
	if (asked == REDIR_ENGINE_SOCKMAP ||
	    (asked == REDIR_ENGINE_AUTO && !unfit && !unavailable)) {
		ch->sm = redir_sockmap_load(why, sizeof(why));
		if (ch->sm) {
			ch->engine = REDIR_ENGINE_SOCKMAP;
		} else if (asked == REDIR_ENGINE_SOCKMAP) {
			snprintf(err, size, "%s", why);
			return REDIR_CHOICE_FAILED;
		} else {
			snprintf(ch->why, sizeof(ch->why),
				 "sockmap is not available: %s", why);
		}
	}
	if (ch->engine == REDIR_ENGINE_AUTO)
		ch->engine = REDIR_ENGINE_SPLICE;
	/* A vsock ADDRESS2 of the sockmap engine gets the larger buffer
	 * the kernel's timer-driven retries need; the other engines wake
	 * as soon as credit comes, and keep the kernel's. */
	if (ch->engine == REDIR_ENGINE_SOCKMAP &&
	    ep[1].addr.family == AF_VSOCK &&
	    ep[1].addr.vsock_buffer == REDIR_VSOCK_BUFFER_UNSET)
		ep[1].addr.vsock_buffer = SOCKMAP_VSOCK_BUFFER;
	return 0;
}

int redir_engine_fall_back(struct redir_engine_choice *ch, int err)
{
	redir_sockmap_free(ch->sm);
	ch->sm = NULL;
	if (ch->asked == REDIR_ENGINE_SOCKMAP) {
		log_err("--engine sockmap: the kernel does not take ADDRESS2 into a sockmap: %s",
			strerror(-err));
		return -1;
	}
	snprintf(ch->why, sizeof(ch->why),
		 "the kernel does not take ADDRESS2 into a sockmap: %s",
		 strerror(-err));
	ch->engine = REDIR_ENGINE_SPLICE;
	return 0;
}

static bool has_message_end(const struct redir_endpoint ep[2])
{
	return ep[0].addr.socktype != SOCK_STREAM ||
	       ep[1].addr.socktype != SOCK_STREAM;
}

const char *redir_engine_running(const struct redir_engine_choice *ch,
				 const struct redir_endpoint ep[2])
{
	if (ch->engine != REDIR_ENGINE_SOCKMAP && has_message_end(ep))
		return "message";
	return redir_engine_name(ch->engine);
}

void redir_engine_log_choice(const struct redir_engine_choice *ch,
			     const struct redir_endpoint ep[2])
{
	const char *run = redir_engine_running(ch, ep), *unfit = misfit(ep);
	const char *asked = redir_engine_name(ch->asked);
	const char *why = ch->why[0] ? ch->why : NULL;

	if (!why && !strcmp(run, "message") && strcmp(asked, "message"))
		why = "a datagram or seqpacket end takes the message engine";
	if (!why && ch->asked == REDIR_ENGINE_AUTO && unfit)
		why = unfit;
	if (why)
		log_info("engine %s (--engine %s: %s)", run, asked, why);
	else
		log_info("engine %s", run);
}

void redir_engine_log_buffers(const struct redir_engine_choice *ch,
			      const struct redir_endpoint ep[2], size_t buffer,
			      bool given)
{
	size_t sndbuf = given ? buffer : REDIR_SOCKMAP_DEFAULT_SNDBUF;

	if (ch->engine == REDIR_ENGINE_SOCKMAP &&
	    ep[1].addr.family == AF_VSOCK)
		log_debug("engine sockmap, ADDRESS2 send buffer %zu bytes, vsock buffer %u bytes%s",
			  sndbuf, ep[1].addr.vsock_buffer,
			  ep[1].addr.vsock_buffer ? "" : " (the kernel's)");
	else if (ch->engine == REDIR_ENGINE_SOCKMAP)
		log_debug("engine sockmap, ADDRESS2 send buffer %zu bytes",
			  sndbuf);
	else if (has_message_end(ep))
		/* What relay.c picks for such a pair, whatever --engine. */
		log_debug("engine message (a datagram or seqpacket end), %zu "
			  "bytes per direction",
			  buffer ? buffer : (size_t)REDIR_DEFAULT_BUFFER);
	else
		log_debug("engine %s, %zu bytes per direction",
			  redir_engine_name(ch->engine),
			  buffer ? buffer :
			  ch->engine == REDIR_ENGINE_SPLICE ?
				  (size_t)REDIR_SPLICE_DEFAULT_BUFFER :
				  (size_t)REDIR_DEFAULT_BUFFER);
}
