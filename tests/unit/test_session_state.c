/* The session record: a loopback device's live session, driven by the
 * in-tree front end, handed from one backend to a fresh one again and
 * again while bytes stream through it (every byte checked, no message
 * sent in between, split and packed rings, EVENT_IDX on); and the
 * records a restore refuses, each fd it was given closed once.
 *
 * The backends share one loopback device object: a device's own state
 * (here, how far into a tx chain it got) is not in the core's record, and
 * travels apart (issue 36's later parts). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "devices/loopback/loopback.h"
#include "event/loop.h"
#include "frontend/stream.h"
#include "util/log.h"
#include "virtio/features.h"
#include "vhost-user/backend.h"
#include "vhost-user/session_state.h"

#define QSIZE 64
#define NREGIONS 2
/* Record layout (session_state.c): where the tests below corrupt it. */
#define HEAD_SIZE 64
#define REGION_SIZE 40
#define QUEUE_SIZE 64

struct fx {
	struct vmio_loop *loop;
	struct vmio_loopback *lb;
	struct vmio_backend *be;
	struct vmio_fe *fe;
	char path[64];
	pthread_t thread;
	bool running;
	atomic_bool stop, streaming;
	/* The loop thread's, read after it is joined. */
	unsigned turns, handovers, max_handovers;
	uint64_t features; /* acked, as the last restored backend has them */
	char failure[300];
	struct vmio_stream_opts opts;
};

static bool fd_is_closed(int fd)
{
	return fcntl(fd, F_GETFD) == -1 && errno == EBADF;
}

/* One hand-over, old to new, as the two processes would make it: hold,
 * save, restore into a fresh backend (held), the old one lets go, the
 * new one serves. */
static void hand_over(struct fx *f)
{
	struct vmio_session_record rec;
	struct vmio_backend *next;
	char why[200];
	int rc = vmio_session_hold(f->be, NULL, NULL, why, sizeof(why));

	if (rc == -EAGAIN)
		return; /* not at a message boundary: next time */
	if (rc) {
		snprintf(f->failure, sizeof(f->failure), "hold: %s", why);
		return;
	}
	rc = vmio_session_save(f->be, &rec, why, sizeof(why));
	if (rc) {
		snprintf(f->failure, sizeof(f->failure), "save: %s", why);
		return;
	}
	next = vmio_backend_new(f->loop, vmio_loopback_ops(f->lb), f->lb);
	rc = next ? vmio_session_restore(next, rec.bytes, rec.len, rec.fds,
					 rec.nfds, why, sizeof(why))
		  : -ENOMEM;
	vmio_session_record_free(&rec);
	if (rc) {
		snprintf(f->failure, sizeof(f->failure), "restore: %s", why);
		vmio_backend_free(next);
		vmio_session_resume(f->be);
		return;
	}
	vmio_session_handed_over(f->be);
	vmio_backend_free(f->be);
	f->be = next;
	f->features = vmio_backend_acked_features(next);
	if (vmio_session_resume(next))
		snprintf(f->failure, sizeof(f->failure), "resume failed");
	f->handovers++;
}

/* The backend's loop; every few turns while the stream runs, a
 * hand-over. */
static void *loop_thread(void *opaque)
{
	struct fx *f = opaque;

	while (!atomic_load(&f->stop)) {
		vmio_loop_run_once(f->loop, 20);
		f->turns++;
		if (atomic_load(&f->streaming) && !f->failure[0] &&
		    f->handovers < f->max_handovers && f->turns % 4 == 0)
			hand_over(f);
	}
	return NULL;
}

static void loop_start(struct fx *f)
{
	atomic_store(&f->stop, false);
	assert_int_equal(pthread_create(&f->thread, NULL, loop_thread, f), 0);
	f->running = true;
}

static void loop_join(struct fx *f)
{
	if (!f->running)
		return;
	atomic_store(&f->stop, true);
	assert_int_equal(pthread_join(f->thread, NULL), 0);
	f->running = false;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	vmio_log_set_level(VMIO_LOG_WARN);
	f->loop = vmio_loop_new();
	f->lb = vmio_loopback_new(f->loop, QSIZE);
	f->be = vmio_backend_new(f->loop, vmio_loopback_ops(f->lb), f->lb);
	snprintf(f->path, sizeof(f->path), "/tmp/vmio-session-%d.sock",
		 (int)getpid());
	if (!f->loop || !f->lb || !f->be ||
	    vmio_backend_listen(f->be, f->path))
		return -1;
	vmio_stream_opts_init(&f->opts);
	/* Odd sizes: a tx chain is often half delivered when the device
	 * stops, and resumes where it stood. */
	f->opts.bytes = 24ull << 20;
	f->opts.tx_chunk = 4099;
	f->opts.rx_chunk = 3001;
	f->opts.verify = true;
	f->opts.stall_ms = 10000;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	loop_join(f);
	vmio_fe_close(f->fe);
	vmio_backend_free(f->be);
	vmio_loopback_free(f->lb);
	vmio_loop_free(f->loop);
	unsetenv("VMIO_RING");
	free(f);
	return 0;
}

/* The front end connects and sets up both queues (the loop serving it on
 * its thread). */
static void connect_session(struct fx *f, bool packed)
{
	char err[256] = "";

	if (packed)
		setenv("VMIO_RING", "packed", 1);
	else
		unsetenv("VMIO_RING");
	loop_start(f);
	f->fe = vmio_stream_connect(f->path, 5000,
				    vmio_stream_mem_needed(&f->opts, QSIZE),
				    NREGIONS, QSIZE, err, sizeof(err));
	if (!f->fe)
		fail_msg("connect: %s", err);
}

static void stream_across_hand_overs(void **state, bool packed)
{
	struct fx *f = *state;
	struct vmio_stream_result res;
	uint64_t ring = VMIO_BIT(VIRTIO_F_RING_PACKED);

	connect_session(f, packed);
	f->max_handovers = 200;
	/* From here the front end sends no message: only rings and
	 * eventfds move. */
	atomic_store(&f->streaming, true);
	int rc = vmio_stream_run(f->fe, &f->opts, &res);
	atomic_store(&f->streaming, false);
	loop_join(f);
	if (f->failure[0])
		fail_msg("after %u hand-overs: %s", f->handovers, f->failure);
	if (rc)
		fail_msg("after %u hand-overs and %llu bytes: %s",
			 f->handovers, (unsigned long long)res.bytes, res.error);
	assert_int_equal(res.bytes, f->opts.bytes);
	printf("# %u hand-overs in %llu bytes\n", f->handovers,
	       (unsigned long long)res.bytes);
	assert_true(f->handovers >= 10);
	assert_true(f->features & VMIO_BIT(VIRTIO_RING_F_EVENT_IDX));
	assert_int_equal(!!(f->features & ring), packed);
	/* Nothing the front end did was refused or unexpected. */
	assert_int_equal(vmio_backend_errors(f->be), 0);
}

static void test_stream_across_hand_overs_split(void **state)
{
	stream_across_hand_overs(state, false);
}

static void test_stream_across_hand_overs_packed(void **state)
{
	stream_across_hand_overs(state, true);
}

/* ---- Refusals ----------------------------------------------------------- */

/* A session set up by the front end, held and saved on this thread. */
static void saved_session(struct fx *f, struct vmio_session_record *rec)
{
	char why[200];

	connect_session(f, false);
	loop_join(f);
	assert_int_equal(vmio_session_hold(f->be, NULL, NULL, why, sizeof(why)),
			 0);
	assert_int_equal(vmio_session_save(f->be, rec, why, sizeof(why)), 0);
}

/* Copies of the record's fds, as a successor receives them. */
static void copy_fds(const struct vmio_session_record *rec, int *fds)
{
	for (unsigned i = 0; i < rec->nfds; i++) {
		fds[i] = fcntl(rec->fds[i], F_DUPFD_CLOEXEC, 0);
		assert_true(fds[i] >= 0);
	}
}

/* Restores bytes (with copies of rec's fds, plus extra fds) into a fresh
 * backend and expects the refusal rc whose reason says `says`; every fd
 * given is closed after. Then the record itself restores into the same
 * backend: the refusal left nothing behind. */
static void expect_refused(struct fx *f, const struct vmio_session_record *rec,
			   const uint8_t *bytes, size_t len, unsigned nfds,
			   int want, const char *says)
{
	int fds[VMIO_SESSION_MAX_FDS], given[VMIO_SESSION_MAX_FDS];
	struct vmio_backend *be =
		vmio_backend_new(f->loop, vmio_loopback_ops(f->lb), f->lb);
	char why[200] = "";

	assert_non_null(be);
	copy_fds(rec, fds);
	for (unsigned i = rec->nfds; i < nfds; i++)
		fds[i] = eventfd(0, EFD_CLOEXEC);
	memcpy(given, fds, nfds * sizeof(int));
	assert_int_equal(vmio_session_restore(be, bytes, len, fds, nfds, why,
					      sizeof(why)),
			 want);
	if (!strstr(why, says))
		fail_msg("refused for \"%s\", expected \"%s\"", why, says);
	for (unsigned i = 0; i < nfds; i++)
		assert_true(fd_is_closed(given[i]));
	/* The backend is as fresh as it was. */
	copy_fds(rec, fds);
	assert_int_equal(vmio_session_restore(be, rec->bytes, rec->len, fds,
					      rec->nfds, why, sizeof(why)),
			 0);
	vmio_session_handed_over(be);
	vmio_backend_free(be);
}

static uint8_t *corrupt(const struct vmio_session_record *rec, size_t at,
			uint32_t value)
{
	uint8_t *b = malloc(rec->len);

	memcpy(b, rec->bytes, rec->len);
	memcpy(b + at, &value, sizeof(value)); /* little-endian host */
	return b;
}

static void test_refusals(void **state)
{
	struct fx *f = *state;
	struct vmio_session_record rec;
	size_t q0 = HEAD_SIZE + NREGIONS * REGION_SIZE;
	uint8_t *b;

	saved_session(f, &rec);
	assert_int_equal(rec.len, q0 + 2 * QUEUE_SIZE);
	/* Channel, two regions, queue 0's kick, call, queue 1's. */
	assert_int_equal(rec.nfds, 1 + NREGIONS + 4);

	expect_refused(f, &rec, rec.bytes, rec.len - 1, rec.nfds, -EINVAL,
		       "says it has");
	expect_refused(f, &rec, rec.bytes, 10, rec.nfds, -EINVAL,
		       "not a session record");
	b = corrupt(&rec, 8, 3);
	expect_refused(f, &rec, b, rec.len, rec.nfds, -EPROTONOSUPPORT,
		       "record format 3; this vmio reads formats 1 to 2");
	free(b);
	/* Format 2 says bytes in flight follow; none do. */
	b = corrupt(&rec, 8, 2);
	expect_refused(f, &rec, b, rec.len, rec.nfds, -EINVAL,
		       "does not hold");
	free(b);
	/* Queue 0's descriptor ring past the end of guest memory. */
	b = corrupt(&rec, q0 + 16, 0);
	memset(b + q0 + 20, 0xff, 4);
	expect_refused(f, &rec, b, rec.len, rec.nfds, -EFAULT,
		       "queue 0 refused (SET_VRING_ADDR)");
	free(b);
	/* Queue 0's call fd beyond the list; then named twice. */
	b = corrupt(&rec, q0 + 52, rec.nfds);
	expect_refused(f, &rec, b, rec.len, rec.nfds, -EINVAL,
		       "queue 0's call names fd 7 of a list of 7");
	free(b);
	b = corrupt(&rec, q0 + 52, 0);
	expect_refused(f, &rec, b, rec.len, rec.nfds, -EINVAL,
		       "which is named before");
	free(b);
	/* An fd more than the record names. */
	expect_refused(f, &rec, rec.bytes, rec.len, rec.nfds + 1, -EINVAL,
		       "record names 7 fds, 8 came with it");
	/* A queue size no SET_VRING_NUM would pass. */
	b = corrupt(&rec, q0, 3);
	expect_refused(f, &rec, b, rec.len, rec.nfds, -EINVAL,
		       "queue 0 refused (SET_VRING_NUM)");
	free(b);
	vmio_session_record_free(&rec);
	assert_int_equal(vmio_session_resume(f->be), 0);
}

/* A record restored is saved again byte for byte (the fds it names, in
 * the same order): the writer and the reader agree on every field. */
static void test_record_round_trip(void **state)
{
	struct fx *f = *state;
	struct vmio_session_record rec, again;
	struct vmio_backend *next =
		vmio_backend_new(f->loop, vmio_loopback_ops(f->lb), f->lb);
	int fds[VMIO_SESSION_MAX_FDS];
	char why[200];

	assert_non_null(next);
	saved_session(f, &rec);
	copy_fds(&rec, fds);
	assert_int_equal(vmio_session_restore(next, rec.bytes, rec.len, fds,
					      rec.nfds, why, sizeof(why)),
			 0);
	assert_int_equal(vmio_session_save(next, &again, why, sizeof(why)), 0);
	assert_int_equal(again.nfds, rec.nfds);
	assert_int_equal(again.len, rec.len);
	assert_memory_equal(again.bytes, rec.bytes, rec.len);
	vmio_session_record_free(&again);
	vmio_session_record_free(&rec);
	vmio_session_handed_over(next);
	vmio_backend_free(next);
	assert_int_equal(vmio_session_resume(f->be), 0);
}

/* Not held: nothing to save. A message half read goes to the
 * successor (format 2): the front end finishes it there, and the reply
 * comes from the successor. A VMM slow to finish a message holds up no
 * hand-over. */
static void test_half_message_handed_over(void **state)
{
	struct fx *f = *state;
	struct vmio_session_record rec;
	struct vhost_user_header h = { .request = VHOST_USER_GET_FEATURES,
				       .flags = VHOST_USER_VERSION };
	struct vmio_backend *next;
	uint8_t reply[sizeof(h) + 8];
	uint32_t version;
	size_t got = 0;
	char why[200];

	connect_session(f, false);
	loop_join(f);
	assert_int_equal(vmio_session_save(f->be, &rec, why, sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "not held"));
	/* Three bytes of a header. */
	assert_int_equal(write(f->fe->sock, &h, 3), 3);
	for (int i = 0; i < 10 && vmio_loop_run_once(f->loop, 100) == 0; i++)
		;
	assert_int_equal(vmio_session_hold(f->be, NULL, NULL, why, sizeof(why)),
			 0);
	assert_int_equal(vmio_session_save(f->be, &rec, why, sizeof(why)), 0);
	memcpy(&version, rec.bytes + 8, sizeof(version));
	assert_int_equal(version, 2);
	next = vmio_backend_new(f->loop, vmio_loopback_ops(f->lb), f->lb);
	assert_non_null(next);
	if (vmio_session_restore(next, rec.bytes, rec.len, rec.fds, rec.nfds,
				 why, sizeof(why)))
		fail_msg("restore: %s", why);
	vmio_session_record_free(&rec);
	vmio_session_handed_over(f->be);
	vmio_backend_free(f->be);
	f->be = next;
	assert_int_equal(vmio_session_resume(next), 0);
	/* The rest of the message, to the successor. */
	assert_int_equal(write(f->fe->sock, (uint8_t *)&h + 3, sizeof(h) - 3),
			 (ssize_t)(sizeof(h) - 3));
	for (int i = 0; i < 100 && got < sizeof(reply); i++) {
		struct pollfd p = { .fd = f->fe->sock, .events = POLLIN };
		ssize_t n;

		vmio_loop_run_once(f->loop, 10);
		if (poll(&p, 1, 0) != 1)
			continue;
		n = read(f->fe->sock, reply + got, sizeof(reply) - got);
		assert_true(n > 0);
		got += (size_t)n;
	}
	assert_int_equal(got, sizeof(reply));
	memcpy(&h, reply, sizeof(h));
	assert_int_equal(h.request, VHOST_USER_GET_FEATURES);
	assert_true(h.flags & VHOST_USER_REPLY_MASK);
	assert_int_equal(h.size, 8);
}

static bool signalled(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint64_t n;

	if (poll(&p, 1, 0) != 1)
		return false;
	return read(fd, &n, sizeof(n)) == sizeof(n);
}

/* A split ring's avail_event, after the used ring's entries. */
static void set_avail_event(struct vmio_dvq *d, uint16_t v)
{
	memcpy((uint8_t *)&d->used->ring[d->size], &v, sizeof(v));
}

static uint16_t avail_event(struct vmio_dvq *d)
{
	uint16_t v;

	memcpy(&v, (uint8_t *)&d->used->ring[d->size], sizeof(v));
	return v;
}

/* The successor tells the guest it is there: each started ring's call fd
 * written once, and a fresh avail_event on each (a guest that read a
 * stale one, here one the old process left while it kept kicks off, may
 * never kick again). */
static void test_resume_tells_the_driver(void **state)
{
	struct fx *f = *state;
	struct vmio_session_record rec;
	struct vmio_backend *next;
	char why[200];

	connect_session(f, false);
	loop_join(f);
	for (unsigned q = 0; q < 2; q++) {
		struct vmio_dvq *d = vmio_fe_queue(f->fe, q);

		signalled(d->call_fd);
		set_avail_event(d, 0x1234);
	}
	assert_int_equal(vmio_session_hold(f->be, NULL, NULL, why, sizeof(why)),
			 0);
	assert_int_equal(vmio_session_save(f->be, &rec, why, sizeof(why)), 0);
	next = vmio_backend_new(f->loop, vmio_loopback_ops(f->lb), f->lb);
	assert_int_equal(vmio_session_restore(next, rec.bytes, rec.len,
					      rec.fds, rec.nfds, why,
					      sizeof(why)),
			 0);
	vmio_session_record_free(&rec);
	vmio_session_handed_over(f->be);
	vmio_backend_free(f->be);
	f->be = next;
	assert_int_equal(vmio_session_resume(next), 0);
	for (unsigned q = 0; q < 2; q++) {
		struct vmio_dvq *d = vmio_fe_queue(f->fe, q);

		assert_true(signalled(d->call_fd));
		assert_int_equal(avail_event(d), 0);
	}
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_stream_across_hand_overs_split),
		T(test_stream_across_hand_overs_packed),
		T(test_refusals),
		T(test_record_round_trip),
		T(test_resume_tells_the_driver),
		T(test_half_message_handed_over),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
