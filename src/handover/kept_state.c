/* A state kept in systemd's fd store; see kept_state.h. */
#include "handover/kept_state.h"

#include <endian.h>
#include <errno.h>
#include <linux/kcmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "handover/checksum.h"
#include "util/fd.h"
#include "util/fd_store.h"
#include "util/log.h"
#include "util/wire.h"

#define MAGIC "VMIOKEPT"
#define FORMAT 1u
#define HEAD_SIZE 28u
#define ALIAS 0x80000000u
/* PREFIX.NAME, as the store takes it. */
#define NAME_SIZE (VMIO_FD_STORE_NAME_MAX + 1)

struct vmio_kept {
	char prefix[VMIO_KEPT_PREFIX_MAX + 1];
	int memfd[2];      /* ours, written in turn; -1 until the first write */
	bool memfd_kept[2]; /* the store has it under PREFIX.sI */
	unsigned next;     /* the one the next write goes to */
	uint64_t stamp;    /* of the last write */
	/* Our copy of what the store keeps as PREFIX.fN; -1: not known (a
	 * predecessor's, or a send that failed): replaced at the next
	 * write. */
	int stored[VMIO_KEPT_MAX_FDS];
	unsigned nstored;  /* N below it may be named in the store */
	int given[2];      /* PREFIX.s0 and .s1 as systemd gave them back */
};

/* A name too long for the store comes out cut, which the store refuses
 * (fd_store.h): an error where it is used, never another name. */
static void name_of(const struct vmio_kept *k, const char *what, char *out,
		    size_t size)
{
	if ((size_t)snprintf(out, size, "%s.%s", k->prefix, what) >= size)
		out[0] = '\0';
}

static void pos_name(const struct vmio_kept *k, unsigned n, char *out,
		     size_t size)
{
	char what[16];

	snprintf(what, sizeof(what), "f%u", n);
	name_of(k, what, out, size);
}

/* Whether a and b are the same open file, as systemd's same_fd() tells
 * duplicates apart (kcmp): only a second copy of one open file is
 * dropped by the store. Without kcmp (a kernel without
 * CONFIG_CHECKPOINT_RESTORE), nothing is taken for a copy: the store may
 * then drop a name, and a restart refuses the state. */
static bool same_file(int a, int b)
{
	pid_t pid = getpid();

	return a == b || syscall(SYS_kcmp, pid, pid, KCMP_FILE, a, b) == 0;
}

struct vmio_kept *vmio_kept_open(const char *prefix)
{
	struct vmio_kept *k;
	char name[NAME_SIZE];

	if (strlen(prefix) > VMIO_KEPT_PREFIX_MAX || !prefix[0])
		return NULL;
	k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	strcpy(k->prefix, prefix);
	k->memfd[0] = k->memfd[1] = -1;
	for (unsigned i = 0; i < VMIO_KEPT_MAX_FDS; i++)
		k->stored[i] = -1;
	name_of(k, "f", name, sizeof(name));
	k->nstored = vmio_fd_store_count(name);
	if (k->nstored > VMIO_KEPT_MAX_FDS)
		k->nstored = VMIO_KEPT_MAX_FDS;
	name_of(k, "s0", name, sizeof(name));
	k->given[0] = vmio_fd_store_take(name);
	name_of(k, "s1", name, sizeof(name));
	k->given[1] = vmio_fd_store_take(name);
	return k;
}

void vmio_kept_free(struct vmio_kept *k)
{
	if (!k)
		return;
	for (unsigned i = 0; i < 2; i++) {
		vmio_close_fd(&k->memfd[i]);
		vmio_close_fd(&k->given[i]);
	}
	for (unsigned i = 0; i < VMIO_KEPT_MAX_FDS; i++)
		vmio_close_fd(&k->stored[i]);
	free(k);
}

/* ---- Taking back ---------------------------------------------------- */

/* A memfd's whole contents, at most VMIO_KEPT_MAX_BYTES and a bit; NULL
 * if empty, unreadable or larger. */
static uint8_t *read_all(int fd, size_t *len)
{
	struct stat st;
	uint8_t *buf;
	size_t max = HEAD_SIZE + VMIO_KEPT_MAX_FDS * 4 + VMIO_KEPT_MAX_BYTES + 4;

	if (fstat(fd, &st) || st.st_size <= 0 || (size_t)st.st_size > max)
		return NULL;
	buf = malloc((size_t)st.st_size);
	if (!buf)
		return NULL;
	if (pread(fd, buf, (size_t)st.st_size, 0) != st.st_size) {
		free(buf);
		return NULL;
	}
	*len = (size_t)st.st_size;
	return buf;
}

struct record {
	uint64_t stamp;
	uint32_t nfds, len;
	const uint8_t *map; /* nfds u32s */
	const uint8_t *bytes;
};

/* The record in buf, checked whole. Returns 0 or -EINVAL with why. */
static int parse(const uint8_t *buf, size_t len, unsigned max,
		 struct record *r, char *why, size_t why_len)
{
	struct vmio_wire_reader rd;
	uint32_t crc;

	vmio_wire_reader_init(&rd, buf, len);
	if (len < HEAD_SIZE + 4 ||
	    memcmp(vmio_wire_get_bytes(&rd, 8), MAGIC, 8)) {
		snprintf(why, why_len, "not a kept state (%zu bytes)", len);
		return -EINVAL;
	}
	memcpy(&crc, buf + len - 4, 4);
	if (le32toh(crc) != vmio_checksum(buf, len - 4)) {
		snprintf(why, why_len,
			 "its checksum does not match (cut or changed)");
		return -EINVAL;
	}
	if (vmio_wire_get_u32(&rd) != FORMAT) {
		snprintf(why, why_len, "a format this vmio does not read");
		return -EPROTONOSUPPORT;
	}
	r->nfds = vmio_wire_get_u32(&rd);
	r->stamp = vmio_wire_get_u64(&rd);
	r->len = vmio_wire_get_u32(&rd);
	if (r->nfds > max || r->len > VMIO_KEPT_MAX_BYTES ||
	    len != HEAD_SIZE + (size_t)r->nfds * 4 + r->len + 4) {
		snprintf(why, why_len,
			 "%zu bytes do not hold %u fds and %u bytes (at most %u fds)",
			 len, r->nfds, r->len, max);
		return -EINVAL;
	}
	r->map = vmio_wire_get_bytes(&rd, (size_t)r->nfds * 4);
	r->bytes = vmio_wire_get_bytes(&rd, r->len);
	return vmio_wire_ok(&rd) ? 0 : -EINVAL;
}

/* The record's fds from the store: each PREFIX.fN once, an alias a copy
 * of an fd before it. Returns 0, or -errno with why (fds closed). */
static int take_fds(struct vmio_kept *k, const struct record *r, int *fds,
		    char *why, size_t why_len)
{
	struct vmio_wire_reader rd;
	char name[NAME_SIZE];
	int rc = 0;
	unsigned i;

	vmio_wire_reader_init(&rd, r->map, (size_t)r->nfds * 4);
	for (i = 0; i < r->nfds && !rc; i++) {
		uint32_t e = vmio_wire_get_u32(&rd);

		if (e & ALIAS) {
			uint32_t j = e & ~ALIAS;

			if (j >= i) {
				snprintf(why, why_len,
					 "fd %u names fd %u as its copy", i, j);
				rc = -EINVAL;
				break;
			}
			fds[i] = fcntl(fds[j], F_DUPFD_CLOEXEC, 0);
			if (fds[i] < 0) {
				rc = -errno;
				snprintf(why, why_len, "cannot copy fd %u: %s",
					 j, strerror(errno));
			}
			continue;
		}
		pos_name(k, e, name, sizeof(name));
		fds[i] = vmio_fd_store_take(name);
		if (fds[i] < 0) {
			snprintf(why, why_len,
				 "fd %u (%s) was not given back (named twice, or the store was full)",
				 i, name);
			rc = -ENOENT;
		}
	}
	if (rc)
		for (unsigned j = 0; j < i; j++)
			vmio_close_fd(&fds[j]);
	return rc;
}

int vmio_kept_take(struct vmio_kept *k, uint8_t **bytes, size_t *len,
		   int *fds, unsigned max, unsigned *nfds, char *why,
		   size_t why_len)
{
	uint8_t *buf[2] = { NULL, NULL };
	size_t blen[2] = { 0, 0 };
	struct record rec[2];
	int ok[2] = { -ENOENT, -ENOENT }, rc = 0;
	char w[2][160] = { "", "" };
	int pick;

	*bytes = NULL;
	*len = 0;
	*nfds = 0;
	for (unsigned i = 0; i < 2; i++) {
		if (k->given[i] < 0)
			continue;
		buf[i] = read_all(k->given[i], &blen[i]);
		if (buf[i])
			ok[i] = parse(buf[i], blen[i], max, &rec[i], w[i],
				      sizeof(w[i]));
		vmio_close_fd(&k->given[i]);
	}
	if (ok[0] && ok[1]) {
		/* Both empty (never written, or cleared): nothing kept. */
		if (!buf[0] && !buf[1])
			goto out;
		snprintf(why, why_len, "%s", w[0][0] ? w[0] : w[1]);
		rc = ok[0] != -ENOENT ? ok[0] : ok[1];
		goto out;
	}
	pick = ok[0] ? 1 : ok[1] ? 0 : rec[1].stamp > rec[0].stamp;
	/* An empty record is a cleared state: nothing to take up. */
	if (!rec[pick].len && !rec[pick].nfds)
		goto out;
	rc = take_fds(k, &rec[pick], fds, why, why_len);
	if (rc)
		goto out;
	*bytes = malloc(rec[pick].len ? rec[pick].len : 1);
	if (!*bytes) {
		for (unsigned i = 0; i < rec[pick].nfds; i++)
			vmio_close_fd(&fds[i]);
		snprintf(why, why_len, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	memcpy(*bytes, rec[pick].bytes, rec[pick].len);
	*len = rec[pick].len;
	*nfds = rec[pick].nfds;
	k->stamp = rec[pick].stamp;
	rc = 1;
out:
	free(buf[0]);
	free(buf[1]);
	return rc;
}

int vmio_kept_take_fd(struct vmio_kept *k, const char *name)
{
	char full[NAME_SIZE];

	name_of(k, name, full, sizeof(full));
	return vmio_fd_store_take(full);
}

/* ---- Keeping -------------------------------------------------------- */

/* Removes what the store keeps under name, then gives it fd. */
static int replace(const char *name, int fd)
{
	int rc = vmio_fd_store_remove(name);

	if (rc >= 0 && fd >= 0)
		rc = vmio_fd_store_put(fd, name);
	return rc < 0 ? rc : 0;
}

int vmio_kept_replace_fd(struct vmio_kept *k, const char *name, int fd)
{
	char full[NAME_SIZE];

	name_of(k, name, full, sizeof(full));
	return replace(full, fd);
}

/* This process's two memfds, made and kept at the first write. */
static int keep_memfds(struct vmio_kept *k)
{
	char name[NAME_SIZE];
	int rc = 0;

	for (unsigned i = 0; i < 2 && !rc; i++) {
		if (k->memfd_kept[i])
			continue;
		if (k->memfd[i] < 0)
			k->memfd[i] = memfd_create("vmio-kept", MFD_CLOEXEC);
		if (k->memfd[i] < 0)
			return -errno;
		name_of(k, i ? "s1" : "s0", name, sizeof(name));
		rc = replace(name, k->memfd[i]);
		k->memfd_kept[i] = !rc;
	}
	return rc;
}

/* PREFIX.fN for every open file of fds, in order; map[i] says where fd i
 * went. The store's names follow (those changed replaced, those beyond
 * removed), and the kept copies with them. Returns 0 or the first
 * failure (a name that failed is replaced at the next write). */
static int store_fds(struct vmio_kept *k, int *fds, unsigned nfds,
		     uint32_t *map)
{
	int uniq[VMIO_KEPT_MAX_FDS];
	char name[NAME_SIZE];
	unsigned nu = 0, n, was = k->nstored;
	bool changed[VMIO_KEPT_MAX_FDS];
	bool beyond_left = false;
	int rc = 0, r;

	for (unsigned i = 0; i < nfds; i++) {
		unsigned j;

		for (j = 0; j < i; j++)
			if (!(map[j] & ALIAS) && same_file(fds[i], fds[j]))
				break;
		if (j < i) {
			map[i] = ALIAS | j;
			vmio_close_fd(&fds[i]);
		} else {
			map[i] = nu;
			uniq[nu++] = fds[i];
			fds[i] = -1;
		}
	}
	/* Every name whose fd changes is removed before any is put: the
	 * store drops an fd it already keeps under any name, and a session
	 * whose fds moved up the list would lose one that way. */
	for (n = 0; n < nu || n < was; n++) {
		bool same = n < nu && k->stored[n] >= 0 &&
			    same_file(k->stored[n], uniq[n]);

		changed[n] = !same;
		if (same) {
			close(uniq[n]);
			continue;
		}
		pos_name(k, n, name, sizeof(name));
		r = vmio_fd_store_remove(name);
		vmio_close_fd(&k->stored[n]);
		if (r < 0) {
			changed[n] = false; /* not put: the name is unknown */
			if (n < nu)
				close(uniq[n]);
			beyond_left |= n >= nu;
			if (!rc)
				rc = r;
		}
	}
	for (n = 0; n < nu; n++) {
		if (!changed[n])
			continue;
		pos_name(k, n, name, sizeof(name));
		r = vmio_fd_store_put(uniq[n], name);
		if (r < 0) {
			close(uniq[n]);
			if (!rc)
				rc = r;
		} else {
			k->stored[n] = uniq[n];
		}
	}
	/* A name beyond the list that could not be removed is tried again. */
	k->nstored = beyond_left ? was : nu;
	return rc;
}

static uint64_t next_stamp(struct vmio_kept *k)
{
	struct timespec ts;
	uint64_t now;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	k->stamp = now > k->stamp ? now : k->stamp + 1;
	return k->stamp;
}

/* The record into the memfd whose turn it is: emptied first, so that a
 * write cut short is a record cut short, which its checksum refuses. */
static int write_memfd(struct vmio_kept *k, const uint32_t *map,
		       unsigned nfds, const void *bytes, size_t len)
{
	struct vmio_wire_writer w;
	int fd = k->memfd[k->next], rc = 0;

	vmio_wire_writer_init(&w, 0);
	vmio_wire_put_bytes(&w, MAGIC, 8);
	vmio_wire_put_u32(&w, FORMAT);
	vmio_wire_put_u32(&w, nfds);
	vmio_wire_put_u64(&w, next_stamp(k));
	vmio_wire_put_u32(&w, (uint32_t)len);
	for (unsigned i = 0; i < nfds; i++)
		vmio_wire_put_u32(&w, map[i]);
	vmio_wire_put_bytes(&w, bytes, len);
	vmio_wire_put_u32(&w, vmio_checksum(w.buf, w.len));
	if (w.failed)
		rc = -ENOMEM;
	else if (ftruncate(fd, 0) ||
		 pwrite(fd, w.buf, w.len, 0) != (ssize_t)w.len)
		rc = errno ? -errno : -EIO;
	vmio_wire_writer_fini(&w);
	if (!rc)
		k->next ^= 1;
	return rc;
}

int vmio_kept_write(struct vmio_kept *k, const void *bytes, size_t len,
		    int *fds, unsigned nfds)
{
	uint32_t map[VMIO_KEPT_MAX_FDS];
	int rc;

	if (nfds > VMIO_KEPT_MAX_FDS || len > VMIO_KEPT_MAX_BYTES) {
		for (unsigned i = 0; i < nfds; i++)
			vmio_close_fd(&fds[i]);
		return -E2BIG;
	}
	rc = keep_memfds(k);
	if (!rc)
		rc = store_fds(k, fds, nfds, map);
	else
		for (unsigned i = 0; i < nfds; i++)
			vmio_close_fd(&fds[i]);
	/* A record names only what the store has: until then the one
	 * before stays. */
	if (!rc)
		rc = write_memfd(k, map, nfds, bytes, len);
	return rc;
}

int vmio_kept_clear(struct vmio_kept *k)
{
	char name[NAME_SIZE];
	unsigned left = 0;
	int rc = 0;

	/* A predecessor's memfds, if this process has none yet: what they
	 * hold is over too. */
	for (unsigned i = 0; i < 2; i++) {
		name_of(k, i ? "s1" : "s0", name, sizeof(name));
		if (k->memfd[i] >= 0 ? ftruncate(k->memfd[i], 0) != 0
				     : replace(name, -1) != 0)
			rc = -EAGAIN;
	}
	for (unsigned n = 0; n < k->nstored; n++) {
		pos_name(k, n, name, sizeof(name));
		if (replace(name, -1)) {
			rc = -EAGAIN;
			left = n + 1;
		}
		vmio_close_fd(&k->stored[n]);
	}
	k->nstored = left;
	return rc;
}
