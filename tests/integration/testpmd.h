/* DPDK's testpmd as a vhost-user front end (its virtio-user port), for
 * the tests of `vmio net`: started in the background with one forwarding
 * mode, stopped with SIGINT (it then prints its totals), its counters
 * read from its output. Bounded in time throughout; testpmd busy-polls,
 * so it never outlives the test case that started it. */
#ifndef VMIO_TESTS_TESTPMD_H
#define VMIO_TESTS_TESTPMD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define TESTPMD_BIN "/usr/bin/dpdk-testpmd"

struct testpmd {
	pid_t pid;
	char log[4096];    /* its stdout and stderr */
	char prefix[64];   /* its --file-prefix, removed at stop */
};

/* Starts testpmd on the vhost-user socket sock in mode ("txonly",
 * "rxonly", "io"). Fails the test if testpmd is not installed. */
void testpmd_start(struct testpmd *t, const char *sock, const char *mode);
/* The same with `queues` queue pairs, all on its one forwarding core. */
void testpmd_start_queues(struct testpmd *t, const char *sock,
			  const char *mode, unsigned queues);
/* Whether the testpmds started from now on use packed rings (packed_vq=1). */
void testpmd_use_packed(bool on);

/* The last value testpmd printed for counter ("TX-packets",
 * "RX-packets"), from its periodic or final statistics; -1 if none. */
long long testpmd_counter(const struct testpmd *t, const char *counter);

/* Polls the output until counter reaches at least want; false after
 * timeout_ms. */
bool testpmd_wait_counter(const struct testpmd *t, const char *counter,
			  long long want, int timeout_ms);

/* SIGINT, wait (SIGKILL if it hangs), remove its runtime directory.
 * Returns the final value of counter from "Forward statistics", or -1. */
long long testpmd_stop(struct testpmd *t, const char *counter);

#endif
