/* How a queue of the net device waits for the guest: an optional short
 * poll of the ring before notifications go back on (--poll-us). Polling trades CPU
 * for the system calls on both sides: while kicks are off the driver does
 * not write the eventfd, and we do not sleep in epoll for it. */
#include "devices/net/queue_wait.h"

#include "util/clock.h"

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

bool vnet_poll_avail(const struct vnet_device *d, const struct vmio_vq *vq)
{
	uint64_t end;

	if (!d->cfg.poll_ns)
		return false;
	end = vmio_now_ns() + d->cfg.poll_ns;
	do {
		/* A clock read is dearer than a look at the ring. */
		for (int i = 0; i < 64; i++) {
			if (vmio_vq_avail_pending(vq))
				return true;
			cpu_relax();
		}
	} while (vmio_now_ns() < end);
	return false;
}

