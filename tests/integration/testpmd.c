#include "testpmd.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

static void start(struct testpmd *t, const char *sock, const char *mode,
		  unsigned queues, bool packed);

static bool packed_rings;

void testpmd_use_packed(bool on)
{
	packed_rings = on;
}

void testpmd_start(struct testpmd *t, const char *sock, const char *mode)
{
	start(t, sock, mode, 1, packed_rings);
}

void testpmd_start_queues(struct testpmd *t, const char *sock,
			  const char *mode, unsigned queues)
{
	start(t, sock, mode, queues, packed_rings);
}

static void start(struct testpmd *t, const char *sock, const char *mode,
		  unsigned queues, bool packed)
{
	static unsigned seq;
	char vdev[512], fwd[64], rxq[32], txq[32];
	int fd;

	if (access(TESTPMD_BIN, X_OK))
		fail_msg("%s not found: install the dpdk-dev package "
			 "(make deps)", TESTPMD_BIN);
	snprintf(t->prefix, sizeof(t->prefix), "vmio-test-%d-%u", getpid(),
		 seq);
	snprintf(t->log, sizeof(t->log), "%s", harness_path(t->prefix));
	seq++;
	/* More than one pair: virtio-user answers the control queue itself
	 * (VQ_PAIRS_SET enables the pairs' queues). */
	snprintf(vdev, sizeof(vdev), "net_virtio_user0,path=%s,queues=%u%s%s",
		 sock, queues, queues > 1 ? ",cq=1" : "",
		 packed ? ",packed_vq=1" : "");
	snprintf(rxq, sizeof(rxq), "--rxq=%u", queues);
	snprintf(txq, sizeof(txq), "--txq=%u", queues);
	snprintf(fwd, sizeof(fwd), "--forward-mode=%s", mode);
	fd = open(t->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	t->pid = fork();
	assert_true(t->pid >= 0);
	if (t->pid == 0) {
		char prefix_arg[96];
		int null = open("/dev/null", O_RDONLY);

		snprintf(prefix_arg, sizeof(prefix_arg), "--file-prefix=%s",
			 t->prefix);
		/* stdin: testpmd without -i waits on it only when it has no
		 * --stats-period; /dev/null keeps it off the terminal. */
		dup2(null, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		/* Both lcores on CPU 1 (testpmd wants two; one of them
		 * polls); no hugepages, one memory segment file so that the
		 * memory table fits vhost-user's regions. */
		execl(TESTPMD_BIN, TESTPMD_BIN, "--no-pci",
		      "--single-file-segments", "--lcores", "0@1,1@1",
		      "--vdev", vdev, "--no-huge", "-m", "256", prefix_arg,
		      "--log-level", "lib.eal:error", "--", fwd,
		      "--stats-period", "1", "--total-num-mbufs", "4096",
		      rxq, txq, (char *)NULL);
		_exit(127);
	}
	close(fd);
}

static char *read_log(const struct testpmd *t)
{
	FILE *f = fopen(t->log, "r");
	char *buf;
	long len;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)len + 1);
	if (buf) {
		len = (long)fread(buf, 1, (size_t)len, f);
		buf[len] = '\0';
	}
	fclose(f);
	return buf;
}

/* The value after the last "counter:" at or after the last occurrence
 * of section (NULL: anywhere). */
static long long last_value(const char *text, const char *section,
			    const char *counter)
{
	const char *p = text, *hit = NULL;
	char key[64];

	if (section) {
		const char *s = NULL;

		for (p = strstr(text, section); p; p = strstr(p + 1, section))
			s = p;
		if (!s)
			return -1;
		text = s;
	}
	snprintf(key, sizeof(key), "%s:", counter);
	for (p = strstr(text, key); p; p = strstr(p + 1, key))
		hit = p;
	return hit ? strtoll(hit + strlen(key), NULL, 10) : -1;
}

long long testpmd_counter(const struct testpmd *t, const char *counter)
{
	char *text = read_log(t);
	long long v = text ? last_value(text, NULL, counter) : -1;

	free(text);
	return v;
}

bool testpmd_wait_counter(const struct testpmd *t, const char *counter,
			  long long want, int timeout_ms)
{
	struct timespec tick = { .tv_nsec = 50 * 1000000L };

	/* testpmd prints its counters once a second: polling its output is
	 * the only way to see them. */
	for (int waited = 0; waited < timeout_ms; waited += 50) {
		if (testpmd_counter(t, counter) >= want)
			return true;
		nanosleep(&tick, NULL);
	}
	return false;
}

static int remove_entry(const char *path, const struct stat *sb, int flag,
			struct FTW *ftw)
{
	return remove(path);
}

long long testpmd_stop(struct testpmd *t, const char *counter)
{
	char dir[128];
	char *text;
	long long v;
	int status;

	kill(t->pid, SIGINT);
	status = harness_wait_exit(t->pid, 10000);
	if (status == -1) {
		kill(t->pid, SIGKILL);
		harness_wait_exit(t->pid, 5000);
	}
	snprintf(dir, sizeof(dir), "/var/run/dpdk/%s", t->prefix);
	nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
	text = read_log(t);
	v = text ? last_value(text, "Forward statistics", counter) : -1;
	if (v < 0 && text)
		fprintf(stderr, "testpmd output:\n%s\n", text);
	free(text);
	return v;
}
