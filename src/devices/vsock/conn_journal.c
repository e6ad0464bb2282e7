/* The journal of open connections; see conn_journal.h. */
#include "devices/vsock/conn_journal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/fd.h"

#define CHECK_MIX 0x6a6f7572u /* "jour" */

struct vsock_journal_slot {
	uint32_t local_port;
	uint32_t peer_port;
	uint16_t type;
	_Atomic uint16_t in_use;
	uint32_t check;
};

_Static_assert(sizeof(struct vsock_journal_slot) == 16,
	       "a slot is 16 bytes");

static uint32_t check_of(uint32_t local, uint32_t peer, uint16_t type)
{
	return (local * 2654435761u) ^ peer ^ ((uint32_t)type << 16) ^
	       CHECK_MIX;
}

int vsock_journal_init(struct vsock_journal *j, unsigned max)
{
	size_t size = (size_t)max * sizeof(struct vsock_journal_slot);
	void *p;

	*j = (struct vsock_journal){ .fd = -1 };
	if (!max)
		return -EINVAL;
	j->free = malloc(max * sizeof(*j->free));
	if (!j->free)
		return -ENOMEM;
	j->fd = memfd_create("vmio-vsock-journal", MFD_CLOEXEC);
	if (j->fd < 0 || ftruncate(j->fd, (off_t)size))
		goto fail;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, j->fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	j->slots = p;
	j->max = max;
	for (unsigned i = 0; i < max; i++)
		j->free[i] = max - 1 - i;
	j->nfree = max;
	return 0;
fail:
	{
		int err = -errno;

		vsock_journal_fini(j);
		return err;
	}
}

void vsock_journal_fini(struct vsock_journal *j)
{
	if (j->slots)
		munmap(j->slots, (size_t)j->max * sizeof(*j->slots));
	vmio_close_fd(&j->fd);
	free(j->free);
	*j = (struct vsock_journal){ .fd = -1 };
}

uint32_t vsock_journal_add(struct vsock_journal *j, uint32_t local_port,
			   uint32_t peer_port, uint16_t type)
{
	struct vsock_journal_slot *s;
	uint32_t n;

	if (!j->slots || !j->nfree)
		return VSOCK_JOURNAL_NONE;
	n = j->free[--j->nfree];
	s = &j->slots[n];
	s->local_port = local_port;
	s->peer_port = peer_port;
	s->type = type;
	s->check = check_of(local_port, peer_port, type);
	atomic_store_explicit(&s->in_use, 1, memory_order_release);
	return n;
}

void vsock_journal_remove(struct vsock_journal *j, uint32_t slot)
{
	if (slot == VSOCK_JOURNAL_NONE || !j->slots || slot >= j->max)
		return;
	atomic_store_explicit(&j->slots[slot].in_use, 0, memory_order_release);
	j->free[j->nfree++] = slot;
}

unsigned vsock_journal_read(int fd, unsigned max,
			    void (*cb)(void *opaque, uint32_t local_port,
				       uint32_t peer_port, uint16_t type),
			    void *opaque)
{
	struct vsock_journal_slot buf[256];
	off_t at = 0;
	unsigned n = 0;
	ssize_t got;

	/* pread, not a mapping: a file that shrinks under us is a short
	 * read, not a SIGBUS; any size, any bytes. */
	while (n < max && (got = pread(fd, buf, sizeof(buf), at)) > 0) {
		size_t slots = (size_t)got / sizeof(buf[0]);

		for (size_t i = 0; i < slots && n < max; i++) {
			const struct vsock_journal_slot *s = &buf[i];

			if (atomic_load_explicit(&s->in_use,
						 memory_order_relaxed) != 1 ||
			    s->check != check_of(s->local_port, s->peer_port,
						 s->type))
				continue;
			cb(opaque, s->local_port, s->peer_port, s->type);
			n++;
		}
		if ((size_t)got < sizeof(buf))
			break;
		at += got;
	}
	return n;
}
