/* vmio-net-drive: the in-tree front end as the guest of a running `vmio
 * net --null`: sends frames on pair 0's tx queue, or takes the frames of
 * `--null-source SIZE` on its rx queue, in batches of a fixed size, with
 * dirty-page logging on or off, and exits. What
 * scripts/callgrind-net.sh runs to count vmio's instructions per frame.
 *
 * Batches are lock-step, so that vmio does the same work for the same
 * frames in every run whatever the machine's load: a batch is posted and
 * published at once, then the tool waits until every chain is back and
 * vmio has asked for the next kick (split rings with EVENT_IDX: its
 * avail_event has caught up), and a short gap more, before the next. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cli/options.h"
#include "devices/net/virtio_net.h"
#include "frontend/frontend.h"
#include "tool_common.h"
#include "virtio/features.h"

#define CONNECT_TIMEOUT_MS 10000
#define HDR 12          /* VERSION_1's virtio-net header */
#define RX_BUF 2048     /* each rx buffer: a header and up to 1514 bytes */
#define PAGE 4096u      /* what one bit of the log covers */
#define MIN_FRAME 60
#define MAX_FRAME 1514
#define WAIT_MS 30000   /* for a batch under valgrind on a loaded machine */

static const char usage[] =
	"Usage: vmio-net-drive --socket PATH [options]\n"
	"\n"
	"Plays the guest of a running `vmio net --null`: sets up memory and\n"
	"queue pair 0 (rx and tx), then sends --frames frames of --size bytes\n"
	"on tx (--mode tx: vmio drops them), or posts --frames rx buffers and\n"
	"takes the frame vmio puts in each (--mode rx: vmio must run with\n"
	"--null-source SIZE, the same SIZE), in lock-step batches; then exits.\n"
	"With --log, logging is on as QEMU turns it on when a migration starts\n"
	"(SET_LOG_BASE with a log memfd for the whole memory table,\n"
	"VHOST_F_LOG_ALL, VHOST_VRING_F_LOG on both rings) before the first\n"
	"frame; at the end the pages marked in the log are counted, and none\n"
	"marked is a failure. Prints one line:\n"
	"  mode=tx size=64 frames=N batch=32 ring=split log=on pages_marked=N\n"
	"\n"
	"Options:\n"
	"  --socket PATH       the device's vhost-user socket (required)\n"
	"  --mode tx|rx        which way frames go (default tx)\n"
	"  --frames N          frames to carry (default 8192)\n"
	"  --size N            frame bytes, 60-1514 (default 64)\n"
	"  --batch N           frames per batch, 1 to the queue size (default 32)\n"
	"  --queue-size N      entries per queue, a power of two (default 256)\n"
	"  --packed            packed rings (default split)\n"
	"  --log               dirty-page logging on\n"
	"  --gap-us N          pause between batches, microseconds, for vmio to\n"
	"                      go back to waiting (default 1000)\n"
	"  -h, --help          this text\n"
	"\n"
	"Exit status: 0 done; 1 the device failed or logging marked nothing;\n"
	"2 a bad command line.\n";

struct opts {
	const char *socket;
	bool rx, packed, log;
	uint64_t frames, size, batch, queue_size, gap_us;
};

enum {
	OPT_SOCKET = 256,
	OPT_MODE,
	OPT_FRAMES,
	OPT_SIZE,
	OPT_BATCH,
	OPT_QUEUE_SIZE,
	OPT_PACKED,
	OPT_LOG,
	OPT_GAP,
};

static int num_opt(const char *name, const char *arg, uint64_t min,
		   uint64_t max, uint64_t *out)
{
	if (vmio_parse_u64(arg, UINT64_MAX, out) || *out < min || *out > max)
		return tool_usage_error("%s must be %" PRIu64 " to %" PRIu64
					", not '%s'",
					name, min, max, arg);
	return 0;
}

/* Returns -1 to go on, or an exit status. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, OPT_SOCKET },
		{ "mode", required_argument, NULL, OPT_MODE },
		{ "frames", required_argument, NULL, OPT_FRAMES },
		{ "size", required_argument, NULL, OPT_SIZE },
		{ "batch", required_argument, NULL, OPT_BATCH },
		{ "queue-size", required_argument, NULL, OPT_QUEUE_SIZE },
		{ "packed", no_argument, NULL, OPT_PACKED },
		{ "log", no_argument, NULL, OPT_LOG },
		{ "gap-us", required_argument, NULL, OPT_GAP },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, r = 0;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_SOCKET:
			o->socket = optarg;
			break;
		case OPT_MODE:
			if (strcmp(optarg, "tx") && strcmp(optarg, "rx"))
				return tool_usage_error("--mode is tx or rx, not '%s'",
							optarg);
			o->rx = !strcmp(optarg, "rx");
			break;
		case OPT_FRAMES:
			r = num_opt("--frames", optarg, 1, UINT32_MAX, &o->frames);
			break;
		case OPT_SIZE:
			r = num_opt("--size", optarg, MIN_FRAME, MAX_FRAME, &o->size);
			break;
		case OPT_BATCH:
			r = num_opt("--batch", optarg, 1, VIRTQ_MAX_SIZE, &o->batch);
			break;
		case OPT_QUEUE_SIZE:
			r = num_opt("--queue-size", optarg, 2, VIRTQ_MAX_SIZE,
				    &o->queue_size);
			if (!r && (o->queue_size & (o->queue_size - 1)))
				return tool_usage_error("--queue-size must be a power of two, not '%s'",
							optarg);
			break;
		case OPT_PACKED:
			o->packed = true;
			break;
		case OPT_LOG:
			o->log = true;
			break;
		case OPT_GAP:
			r = num_opt("--gap-us", optarg, 0, 1000000, &o->gap_us);
			break;
		case ':':
			return tool_usage_error("option '%s' needs a value",
						argv[optind - 1]);
		case '?':
			return tool_usage_error("unknown option '%s'",
						argv[optind - 1]);
		default:
			return tool_other_option(c, usage);
		}
		if (r)
			return r;
	}
	if (optind < argc)
		return tool_usage_error("unexpected argument '%s'", argv[optind]);
	if (!o->socket)
		return tool_usage_error("%s", "--socket PATH is required");
	if (o->batch > o->queue_size)
		return tool_usage_error("--batch %" PRIu64 " is more than the queue size %" PRIu64,
					o->batch, o->queue_size);
	return -1;
}

/* A broadcast frame of size bytes, ethertype 0x88b5 (local experimental),
 * zero payload: what vmio's --null-source sends the other way. */
static void make_frame(uint8_t *f, uint64_t size)
{
	memset(f, 0, size);
	memset(f, 0xff, 6);
	f[6] = 0x52;
	f[7] = 0x54;
	f[11] = 0x01;
	f[12] = 0x88;
	f[13] = 0xb5;
}

static long long ms_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0->tv_sec) * 1000 +
	       (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Whether the device has asked to be kicked for the next chain: on a
 * split ring with EVENT_IDX, its avail_event (after used->ring[size]) has
 * reached what we published. Elsewhere there is nothing as exact to
 * read, and the gap alone separates batches. */
static bool device_waits(struct vmio_dvq *q)
{
	const uint16_t *avail_event;

	if (q->packed || !q->event_idx)
		return true;
	avail_event = (const uint16_t *)&q->used->ring[q->size];
	return le16toh(__atomic_load_n(avail_event, __ATOMIC_ACQUIRE)) ==
	       q->avail_idx;
}

/* Until all n chains of the batch on q are back (each rx one checked:
 * len bytes, a header and the frame), then until the device waits for
 * the next kick, then gap_us more. */
static void finish_batch(struct vmio_dvq *q, unsigned n, uint32_t want_len,
			 const struct opts *o)
{
	struct timespec t0;
	unsigned back = 0;
	uint32_t len;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (back < n) {
		if (vmio_dvq_get_used(q, &len)) {
			if (want_len && len != want_len)
				tool_die("an rx buffer came back with %" PRIu32
					 " bytes, not %" PRIu32
					 " (a %" PRIu64 "-byte frame and its header): does vmio run with --null-source %" PRIu64 "?",
					 len, want_len, o->size, o->size);
			back++;
			continue;
		}
		vmio_dvq_want_interrupt(q);
		if (vmio_dvq_used_pending(q))
			continue;
		if (ms_since(&t0) >= WAIT_MS)
			tool_die("%u of a batch of %u chains came back on queue %u in %d s%s",
				 back, n, q->index, WAIT_MS / 1000,
				 o->rx ? ": does vmio run with --null --null-source SIZE?"
				       : "");
		vmio_dvq_wait(q, 100);
	}
	vmio_dvq_want_interrupt(q);
	while (!device_waits(q)) {
		if (ms_since(&t0) >= WAIT_MS)
			tool_die("the device did not ask for the next kick on queue %u in %d s",
				 q->index, WAIT_MS / 1000);
		usleep(20);
	}
	if (o->gap_us)
		usleep((useconds_t)o->gap_us);
}

static unsigned count_bits(const uint8_t *log, uint64_t size)
{
	unsigned n = 0;

	for (uint64_t i = 0; i < size; i++)
		n += (unsigned)__builtin_popcount(log[i]);
	return n;
}

int main(int argc, char **argv)
{
	struct opts o = { .frames = 8192, .size = 64, .batch = 32,
			  .queue_size = 256, .gap_us = 1000 };
	uint64_t want = VMIO_BIT(VIRTIO_F_VERSION_1) |
			VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
			VMIO_BIT(VIRTIO_NET_F_MRG_RXBUF);
	uint64_t protocol = VMIO_BIT(VHOST_USER_PROTOCOL_F_REPLY_ACK);
	uint64_t mem = 4u << 20, log_size = mem / PAGE / 8, *buf_gpa, done;
	struct vmio_fe *fe;
	struct vmio_dvq *q;
	uint8_t *log = NULL;
	int r, log_fd = -1;

	tool_name = "vmio-net-drive";
	r = parse_args(argc, argv, &o);
	if (r >= 0)
		return r;
	if (o.packed)
		want |= VMIO_BIT(VIRTIO_F_RING_PACKED);
	if (o.log)
		protocol |= VMIO_BIT(VHOST_USER_PROTOCOL_F_LOG_SHMFD);

	fe = vmio_fe_connect(o.socket, CONNECT_TIMEOUT_MS);
	if (!fe)
		tool_die("cannot connect to %s: %s", o.socket, strerror(errno));
	r = vmio_fe_negotiate(fe, want, protocol);
	if (r < 0)
		tool_die("feature negotiation with %s failed: %s", o.socket,
			 strerror(-r));
	if ((fe->features & want) != want)
		tool_die("the device does not offer features 0x%" PRIx64
			 " (VERSION_1, EVENT_IDX, MRG_RXBUF%s): is %s a vmio net?",
			 want & ~fe->features, o.packed ? ", RING_PACKED" : "",
			 o.socket);
	if (o.log && (!(fe->device_features & VMIO_BIT(VHOST_F_LOG_ALL)) ||
		      !(fe->protocol_features &
			VMIO_BIT(VHOST_USER_PROTOCOL_F_LOG_SHMFD))))
		tool_die("--log: the device does not offer VHOST_F_LOG_ALL and LOG_SHMFD (a vmio from before dirty logging?)");
	r = vmio_fe_mem_create(fe, mem, 1);
	if (r < 0)
		tool_die("SET_MEM_TABLE of %" PRIu64 " bytes failed: %s", mem,
			 strerror(-r));
	for (unsigned idx = 0; idx < 2; idx++) {
		r = vmio_fe_queue_setup(fe, idx, (uint16_t)o.queue_size);
		if (r < 0)
			tool_die("setting up queue %u failed: %s", idx,
				 strerror(-r));
	}
	/* Buffers for one batch, used again by every batch. */
	buf_gpa = calloc(o.batch, sizeof(*buf_gpa));
	if (!buf_gpa)
		tool_die("out of memory");
	for (uint64_t i = 0; i < o.batch; i++) {
		buf_gpa[i] = vmio_fe_alloc(fe, RX_BUF, 64);
		if (buf_gpa[i] == UINT64_MAX)
			tool_die("--batch %" PRIu64 " does not fit in %" PRIu64
				 " bytes of guest memory",
				 o.batch, mem);
		if (!o.rx) {
			uint8_t *p = vmio_fe_ptr(fe, buf_gpa[i]);

			memset(p, 0, HDR);
			make_frame(p + HDR, o.size);
		}
	}
	if (o.log) {
		log_fd = memfd_create("vmio-net-drive-log", MFD_CLOEXEC);
		if (log_fd < 0 || ftruncate(log_fd, (off_t)log_size) < 0)
			tool_die("the log's memfd: %s", strerror(errno));
		log = mmap(NULL, log_size, PROT_READ | PROT_WRITE, MAP_SHARED,
			   log_fd, 0);
		if (log == MAP_FAILED)
			tool_die("mapping the log: %s", strerror(errno));
		r = vmio_fe_log_start(fe, log_fd, log_size);
		if (r < 0)
			tool_die("starting the log (SET_LOG_BASE, SET_FEATURES with VHOST_F_LOG_ALL, SET_VRING_ADDR with VHOST_VRING_F_LOG) failed: %s",
				 strerror(-r));
	}

	q = vmio_fe_queue(fe, o.rx ? 0 : 1);
	for (done = 0; done < o.frames;) {
		unsigned n = (unsigned)(o.frames - done < o.batch ? o.frames - done
								   : o.batch);

		for (unsigned i = 0; i < n; i++) {
			struct vmio_dbuf b = {
				.gpa = buf_gpa[i],
				.len = o.rx ? RX_BUF : (uint32_t)(HDR + o.size),
				.writable = o.rx,
			};

			if (vmio_dvq_add(q, &b, 1, (void *)(uintptr_t)(i + 1)) < 0)
				tool_die("no room for a chain on queue %u", q->index);
		}
		vmio_dvq_want_interrupt(q);
		vmio_dvq_kick(q);
		finish_batch(q, n, o.rx ? (uint32_t)(HDR + o.size) : 0, &o);
		done += n;
	}

	printf("mode=%s size=%" PRIu64 " frames=%" PRIu64 " batch=%" PRIu64
	       " ring=%s log=%s",
	       o.rx ? "rx" : "tx", o.size, o.frames, o.batch,
	       o.packed ? "packed" : "split", o.log ? "on" : "off");
	if (o.log) {
		unsigned marked = count_bits(log, log_size);

		printf(" pages_marked=%u\n", marked);
		if (!marked)
			tool_die("logging was on and vmio marked no page in the log: %" PRIu64
				 " frames written unlogged",
				 o.frames);
		munmap(log, log_size);
		close(log_fd);
	} else {
		putchar('\n');
	}
	vmio_fe_close(fe);
	free(buf_gpa);
	return 0;
}
