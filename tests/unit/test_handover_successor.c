/* Both ends of a hand-over's start (handover/successor.h and
 * takeover.h), with this program as the successor: it runs itself again
 * with --successor MODE, and that copy plays a vmio taking over. The
 * successor is started before the state exists and says "ready" first
 * when asked; a successor that dies, refuses, or never existed, and one
 * given up while its spawn is still under way, each end in one outcome
 * and leave no child behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "event/loop.h"
#include "handover/envelope.h"
#include "handover/successor.h"
#include "handover/takeover.h"

#define WAIT_MS 10000

static char self[4096];

/* ---- The successor's side (this program, run again) ----------------- */

static int play_successor(const char *mode)
{
	struct vmio_takeover t;
	struct vmio_loop *loop;
	int rc = 1;

	if (!strcmp(mode, "die"))
		return 3;
	if (!strcmp(mode, "silent"))
		unsetenv(VMIO_HANDOVER_READY_ENV); /* a vmio before "ready" */
	if (vmio_takeover_open(&t) != 1)
		return 2;
	loop = vmio_loop_new();
	if (!loop)
		return 2;
	if (vmio_takeover_receive(&t, loop, WAIT_MS))
		vmio_takeover_refuse(&t, t.why);
	else if (!strcmp(mode, "refuse"))
		vmio_takeover_refuse(&t, "not this state");
	else if (!vmio_takeover_take(&t, "s", 1, (int[1]){ -1 }))
		vmio_takeover_refuse(&t, t.why);
	else if (!vmio_takeover_accept(&t))
		rc = 0;
	vmio_takeover_fini(&t);
	vmio_loop_free(loop);
	return rc;
}

/* ---- The old side ----------------------------------------------------- */

struct outcome {
	bool ready_seen, done;
	bool ready_after_done;
	pid_t pid;
	char why[1024];
};

static void on_done(void *opaque, pid_t pid, const char *why)
{
	struct outcome *o = opaque;

	o->done = true;
	o->pid = pid;
	snprintf(o->why, sizeof(o->why), "%s", why ? why : "");
}

static void on_ready(void *opaque)
{
	struct outcome *o = opaque;

	if (o->done)
		o->ready_after_done = true;
	o->ready_seen = true;
}

static struct vmio_successor *start(struct vmio_loop *loop, const char *path,
				    const char *mode, bool ask_ready,
				    struct outcome *o)
{
	static char *argv[4];
	char why[256] = "";
	struct vmio_successor *s;
	struct vmio_successor_opts opts = {
		.path = path,
		.argv = argv,
		.timeout_ms = WAIT_MS,
		.done = on_done,
		.ready = ask_ready ? on_ready : NULL,
		.opaque = o,
	};

	argv[0] = (char *)path;
	argv[1] = "--successor";
	argv[2] = (char *)mode;
	argv[3] = NULL;
	memset(o, 0, sizeof(*o));
	s = vmio_successor_start(loop, &opts, why, sizeof(why));
	if (!s)
		fail_msg("vmio_successor_start: %s", why);
	return s;
}

/* Turns of the loop until cond holds; bounded. */
#define RUN_UNTIL(loop, cond)                                               \
	do {                                                                \
		for (unsigned turn_ = 0; !(cond); turn_++) {                \
			if (turn_ > 2000)                                   \
				fail_msg("waited too long for " #cond);     \
			assert_true(vmio_loop_run_once(loop, 10) >= 0);     \
		}                                                           \
	} while (0)

/* A record of one section "s" carrying one fd. */
struct state {
	struct vmio_envelope_writer w;
	const uint8_t *rec;
	size_t len;
	int fds[1];
};

static void state_init(struct state *st)
{
	int p[2];

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	close(p[1]);
	st->fds[0] = p[0];
	vmio_envelope_writer_init(&st->w, "test");
	assert_int_equal(vmio_envelope_add(&st->w, "s", "x", 1, 1), 0);
	assert_int_equal(vmio_envelope_finish(&st->w, &st->rec, &st->len), 0);
}

static void state_fini(struct state *st)
{
	vmio_envelope_writer_fini(&st->w);
	close(st->fds[0]);
}

static void assert_no_child(void)
{
	errno = 0;
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

/* Sends st to s and turns the loop until the outcome. */
static void send_and_wait(struct vmio_loop *loop, struct vmio_successor *s,
			  const struct state *st, struct outcome *o)
{
	vmio_successor_send(s, st->rec, st->len, st->fds, 1);
	RUN_UNTIL(loop, o->done);
}

/* The outcome was "taken over": the child exits once it has answered
 * (a vmio would serve on). Its end may have been seen, and the child
 * reaped, in the turn that read the answer; if not, it is ours to reap. */
static void assert_taken_over(struct vmio_successor *s, struct outcome *o)
{
	pid_t rc;

	if (o->why[0])
		fail_msg("not taken over: %s", o->why);
	assert_true(o->pid > 0);
	vmio_successor_free(s);
	errno = 0;
	rc = waitpid(o->pid, NULL, 0);
	if (rc != o->pid && !(rc < 0 && errno == ECHILD))
		fail_msg("waitpid: %s", strerror(errno));
	assert_no_child();
}

/* Each case's loop, outcome and state to send. */
struct fx {
	struct vmio_loop *loop;
	struct outcome o;
	struct state st;
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->loop = vmio_loop_new();
	assert_non_null(f->loop);
	state_init(&f->st);
	*state = f;
	return 0;
}

/* Whatever the case did, no child is left. */
static int fx_teardown(void **state)
{
	struct fx *f = *state;

	state_fini(&f->st);
	vmio_loop_free(f->loop);
	free(f);
	assert_no_child();
	return 0;
}

/* Ready first, then the state, then "taken over" from the child's pid. */
static void test_ready_then_taken_over(void **state)
{
	struct fx *f = *state;
	struct vmio_successor *s;

	s = start(f->loop, self, "take", true, &f->o);
	RUN_UNTIL(f->loop, f->o.ready_seen || f->o.done);
	assert_true(f->o.ready_seen);
	assert_false(f->o.done);
	send_and_wait(f->loop, s, &f->st, &f->o);
	assert_taken_over(s, &f->o);
}

/* A successor from before "ready" says nothing, and still takes the
 * state it is sent. */
static void test_silent_successor_takes_the_state(void **state)
{
	struct fx *f = *state;
	struct vmio_successor *s;

	s = start(f->loop, self, "silent", true, &f->o);
	for (unsigned i = 0; i < 30; i++)
		assert_true(vmio_loop_run_once(f->loop, 10) >= 0);
	assert_false(f->o.ready_seen);
	assert_false(f->o.done);
	send_and_wait(f->loop, s, &f->st, &f->o);
	assert_false(f->o.ready_seen);
	assert_taken_over(s, &f->o);
}

/* A vmio that did not know the variable passes it on to its own
 * successor: that one, not asked by its parent, must not say "ready" to
 * a predecessor that does not expect it. */
static void test_inherited_ready_variable_is_ignored(void **state)
{
	struct fx *f = *state;
	struct vmio_successor *s;

	assert_int_equal(setenv(VMIO_HANDOVER_READY_ENV, "1", 1), 0);
	s = start(f->loop, self, "take", false, &f->o);
	unsetenv(VMIO_HANDOVER_READY_ENV);
	send_and_wait(f->loop, s, &f->st, &f->o);
	assert_false(f->o.ready_seen);
	assert_taken_over(s, &f->o);
}

/* Dead before it was ready: one outcome that says how, and no child. */
static void test_dies_before_ready(void **state)
{
	struct fx *f = *state;
	struct vmio_successor *s;

	s = start(f->loop, self, "die", true, &f->o);
	RUN_UNTIL(f->loop, f->o.done);
	if (!strstr(f->o.why, "exited with status 3"))
		fail_msg("the outcome does not say it exited: %s", f->o.why);
	assert_false(f->o.ready_seen);
	vmio_successor_free(s);
}

/* It refuses the state it was sent: its words reach the outcome. */
static void test_refused(void **state)
{
	struct fx *f = *state;
	struct vmio_successor *s;

	s = start(f->loop, self, "refuse", true, &f->o);
	RUN_UNTIL(f->loop, f->o.ready_seen || f->o.done);
	send_and_wait(f->loop, s, &f->st, &f->o);
	if (!strstr(f->o.why, "refused the state: not this state"))
		fail_msg("the outcome does not carry the refusal: %s", f->o.why);
	assert_false(f->o.ready_after_done);
	vmio_successor_free(s);
}

/* No binary at the path: the outcome names it, nothing runs. */
static void test_missing_binary(void **state)
{
	struct fx *f = *state;
	struct vmio_successor *s;

	s = start(f->loop, "/nonexistent/vmio", "take", true, &f->o);
	RUN_UNTIL(f->loop, f->o.done);
	if (!strstr(f->o.why, "cannot start /nonexistent/vmio"))
		fail_msg("the outcome does not name the binary: %s", f->o.why);
	assert_false(f->o.ready_seen);
	vmio_successor_free(s);
}

/* Given up at once, its spawn likely still under way (a hand-over whose
 * device refused at once): the child is killed and reaped all the same,
 * and no outcome is told. */
static void test_given_up_while_spawning(void **state)
{
	struct fx *f = *state;

	for (unsigned i = 0; i < 5; i++) {
		vmio_successor_free(start(f->loop, self, "take", true, &f->o));
		for (unsigned k = 0; k < 5; k++)
			assert_true(vmio_loop_run_once(f->loop, 1) >= 0);
		assert_false(f->o.done);
	}
	/* The abandoned threads kill and reap what they started: wait
	 * (bounded) until no child is left, reaping none here. */
	for (unsigned i = 0; i < 500; i++) {
		siginfo_t info;

		errno = 0;
		if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) < 0 &&
		    errno == ECHILD)
			return;
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 },
			  NULL);
	}
	fail_msg("a successor given up is still a child of this process");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ready_then_taken_over, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_silent_successor_takes_the_state, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(
			test_inherited_ready_variable_is_ignored, fx_setup,
			fx_teardown),
		cmocka_unit_test_setup_teardown(test_dies_before_ready, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_refused, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_missing_binary, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_given_up_while_spawning, fx_setup, fx_teardown),
	};
	ssize_t n;

	if (argc == 3 && !strcmp(argv[1], "--successor"))
		return play_successor(argv[2]);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = '\0';
	return cmocka_run_group_tests(tests, NULL, NULL);
}
