/* The XSK map of an interface (xsk_map.h). The map is looked up anew each
 * time: libxdp detaches its program with the last XSK and attaches a new
 * one (with a new map) with the next. */
#include "devices/net/xsk_map.h"

#include <errno.h>
#include <net/if.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <xdp/libxdp.h>

/* The name libxdp gives its XSK redirect program and its map. */
#define XSK_PROG "xsk_def_prog"
#define XSK_MAP "xsks_map"

/* A descriptor of prog_fd's map named XSK_MAP, or -errno. */
static int map_of(int prog_fd)
{
	struct bpf_prog_info info = { 0 };
	uint32_t len = sizeof(info), ids[16];
	int fd = -ENOENT;

	if (bpf_obj_get_info_by_fd(prog_fd, &info, &len))
		return -errno;
	if (info.nr_map_ids > 16)
		info.nr_map_ids = 16;
	{
		struct bpf_prog_info with_ids = {
			.nr_map_ids = info.nr_map_ids,
			.map_ids = (uint64_t)(uintptr_t)ids,
		};

		len = sizeof(with_ids);
		if (bpf_obj_get_info_by_fd(prog_fd, &with_ids, &len))
			return -errno;
		info.nr_map_ids = with_ids.nr_map_ids < 16 ? with_ids.nr_map_ids
							   : 16;
	}
	for (uint32_t i = 0; i < info.nr_map_ids && fd < 0; i++) {
		struct bpf_map_info m = { 0 };
		uint32_t mlen = sizeof(m);
		int mfd = bpf_map_get_fd_by_id(ids[i]);

		if (mfd < 0)
			continue;
		if (!bpf_obj_get_info_by_fd(mfd, &m, &mlen) &&
		    !strcmp(m.name, XSK_MAP)) {
			fd = mfd;
			break;
		}
		close(mfd);
	}
	return fd;
}

/* libxdp's program on ifindex: the attached one where it stands alone,
 * else the dispatcher's component of that name. */
static int xsk_map_fd(const char *ifname)
{
	int ifindex = (int)if_nametoindex(ifname);
	struct xdp_multiprog *mp;
	struct xdp_program *p = NULL;
	int fd = -ENOENT;

	if (!ifindex)
		return -ENODEV;
	mp = xdp_multiprog__get_from_ifindex(ifindex);
	if (!mp || libxdp_get_error(mp))
		return -ENOENT;
	if (xdp_multiprog__is_legacy(mp)) {
		p = xdp_multiprog__main_prog(mp);
		if (p && strcmp(xdp_program__name(p), XSK_PROG))
			p = NULL;
	} else {
		while ((p = xdp_multiprog__next_prog(p, mp)))
			if (!strcmp(xdp_program__name(p), XSK_PROG))
				break;
	}
	if (p)
		fd = map_of(xdp_program__fd(p));
	xdp_multiprog__close(mp);
	return fd;
}

int vnet_xsk_map_set(const char *ifname, unsigned queue, int xsk_fd)
{
	uint32_t key = queue;
	int fd = xsk_map_fd(ifname), rc = 0;

	if (fd < 0)
		return fd;
	if (xsk_fd >= 0 ? bpf_map_update_elem(fd, &key, &xsk_fd, 0)
			: bpf_map_delete_elem(fd, &key))
		rc = errno == ENOENT && xsk_fd < 0 ? 0 : -errno;
	close(fd);
	return rc;
}
