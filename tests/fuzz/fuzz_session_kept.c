/* Fuzzes the record a vmio started after a crash reads around a kept
 * session (cli/session_kept.h): its format, the unit's identity, the
 * device's record and where the session's starts, and how the fds given
 * back split between the two. The memfd's framing and CRC are
 * fuzz_kept_state's; what is inside is written by a process that may
 * have had a bug: hostile input.
 *
 * Input: [0] how many fds were given back, [1] bit 0 whether the device
 * keeps a record (ops.put_device), then the record. The identity is
 * vsock's shape: a u64 and a length-counted path, which must be 3 and
 * "s" to match.
 * Invariants: a record taken has its two parts inside the bytes, the
 * session's last, and fd counts that add up to those given back; a
 * refusal says why. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/session_kept.h"
#include "fuzz.h"

static void put_identity(void *opaque, struct vmio_wire_writer *w)
{
	(void)opaque;
	(void)w;
}

static int check_identity(void *opaque, struct vmio_wire_reader *r,
			  char *why, size_t why_len)
{
	uint64_t cid = vmio_wire_get_u64(r);
	uint32_t plen = vmio_wire_get_count(r, 1);
	const uint8_t *path = vmio_wire_get_bytes(r, plen);

	(void)opaque;
	if (vmio_wire_ok(r) && cid == 3 && plen == 1 && path[0] == 's')
		return 0;
	snprintf(why, why_len, "another unit's");
	vmio_wire_fail(r, "another unit's");
	return -1;
}

static int put_device(void *opaque, struct vmio_wire_writer *w, int fds[],
		      unsigned max, unsigned *nfds, const char **why)
{
	(void)opaque;
	(void)w;
	(void)fds;
	(void)max;
	(void)nfds;
	(void)why;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct session_kept_ops ops = { .put_identity = put_identity,
					.check_identity = check_identity };
	struct session_kept_taken t = { 0 };
	char why[256] = "";
	unsigned nfds;
	size_t len;
	int rc;

	if (size < 2)
		return 0;
	nfds = data[0];
	if (data[1] & 1)
		ops.put_device = put_device;
	len = size - 2;
	/* Its own allocation, so that a read past it is ASan's. */
	t.bytes = malloc(len ? len : 1);
	assert(t.bytes);
	memcpy(t.bytes, data + 2, len);
	rc = session_kept_parse(&ops, NULL, &t, len, nfds, why, sizeof(why));
	if (rc) {
		assert(why[0]);
	} else {
		assert(t.session >= t.bytes &&
		       t.session + t.session_len == t.bytes + len);
		assert(!t.device_len ||
		       (t.device >= t.bytes &&
			t.device + t.device_len <= t.session));
		assert(t.nsession_fds + t.ndevice_fds == nfds);
		assert(ops.put_device || (!t.device_len && !t.ndevice_fds));
	}
	free(t.bytes);
	return 0;
}
