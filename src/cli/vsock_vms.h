/* The VMs of a multi-VM `vmio vsock`: `--vm KEY=VALUE,...` (repeatable)
 * and `--config FILE` (YAML: a `vms:` list of mappings with the same
 * keys), spelled as rust-vmm's vhost-device-vsock spells them:
 *
 *   guest-cid=C        the guest's CID, 3 to 4294967294 (required)
 *   socket=PATH        the vhost-user socket the VMM connects to (required)
 *   uds-path=PATH      the hybrid-vsock unix socket prefix (required)
 *   tx-buffer-size=N   per-connection buffer (default: the command's)
 *   queue-size=N       largest ring, a power of two (default: the command's)
 *   groups=a+b         sibling groups, '+'-separated (default "default")
 *   thread=K           the worker that serves it, from 0 (default: the
 *                      VMs are dealt out over the workers in turn)
 *
 * In YAML the keys may also be written with '_' for '-' (guest_cid,
 * uds_path, ...), as vhost-device-vsock's own examples do. Beside vms:,
 * a file may set the command's options for every VM as top-level keys
 * named as the long options (max_connections: 4096, control: PATH,
 * tx_splice: true); which ones the command takes is its to say.
 *
 * Parsing is pure: nothing is opened but the config file itself, and
 * every error comes back as text naming the key (and, in YAML, the line)
 * for the caller to print. */
#ifndef VMIO_CLI_VSOCK_VMS_H
#define VMIO_CLI_VSOCK_VMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "event/workers.h"

/* Bounds shared with the single-VM options. */
#define VSOCK_MIN_GUEST_CID 3ull
#define VSOCK_MAX_GUEST_CID 0xfffffffeull /* 2^32 - 1 is VMADDR_CID_ANY */
#define VSOCK_MAX_BUF_SIZE (1u << 30)
/* Sibling groups per VM, and the longest group name. */
#define VSOCK_VM_MAX_GROUPS 16
#define VSOCK_VM_GROUP_MAX_LEN 64
/* Why vhost-device-vsock's --forward-cid and --forward-listen (and the
 * keys of the same names) are refused. */
#define VSOCK_VMS_NO_FORWARD                                                    \
	"--forward-cid and --forward-listen (vhost-device-vsock's AF_VSOCK "    \
	"backend) are not supported: vmio vsock's host side is unix sockets; "  \
	"give --uds-path, and host programs reach the guest by connecting "     \
	"there and writing CONNECT <port>"

/* VMs per process, and the largest config file read. */
#define VSOCK_MAX_VMS 256
#define VSOCK_CONFIG_MAX_BYTES (1u << 20)

struct vsock_vm_spec {
	uint64_t guest_cid;      /* 0 until given */
	char *socket;
	char *uds_path;
	uint64_t tx_buffer_size; /* 0: the command's default */
	uint16_t queue_size;     /* 0: the command's default */
	char *groups[VSOCK_VM_MAX_GROUPS];
	unsigned ngroups;        /* 0 until given: then "default" */
	int thread;              /* -1 until given */
	unsigned line;           /* in a config file, for messages; 0: --vm */
};

/* A top-level key of a config file other than vms:, its name with '-'
 * for '_' ("max-connections"), its scalar value, and its line. */
struct vsock_file_option {
	char *name;
	char *value;
	unsigned line;
};

struct vsock_vm_list {
	struct vsock_vm_spec *vms;
	unsigned n;
	struct vsock_file_option *opts; /* from --config, in file order */
	unsigned nopts;
};

/* A new entry at the end of list, empty (thread -1): for a VM given
 * otherwise (the single-VM form). NULL beyond VSOCK_MAX_VMS or without
 * memory. */
struct vsock_vm_spec *vsock_vms_add(struct vsock_vm_list *list);

/* Parses one --vm argument into a new entry of list. Returns 0, or -1
 * with a message in err ("--vm: guest-cid: 'x' is not a number ..."). */
int vsock_vms_parse_arg(struct vsock_vm_list *list, const char *arg,
			char *err, size_t err_size);

/* Parses YAML text (len bytes, need not be NUL-terminated) and appends
 * its VMs to list. name is used in messages ("NAME:LINE: ..."). Returns 0
 * or -1 with a message in err. */
int vsock_vms_parse_yaml(struct vsock_vm_list *list, const char *name,
			 const void *text, size_t len, char *err,
			 size_t err_size);

/* Reads path (at most VSOCK_CONFIG_MAX_BYTES) and parses it. */
int vsock_vms_load_config(struct vsock_vm_list *list, const char *path,
			  char *err, size_t err_size);

/* Once everything is parsed: at least one VM, each with guest-cid, socket
 * and uds-path, no two with the same CID, socket or uds-path, no socket
 * and no other VM's uds-path inside a VM's host-port namespace, and a
 * default group for those that named none. Returns 0 or -1 with err. */
int vsock_vms_check(struct vsock_vm_list *list, char *err, size_t err_size);

/* Whether path is one a guest reaches as a host port: <uds_path>_...
 * vsock_vms_check refuses any VM's socket or other VM's uds-path there. */
bool vsock_vms_in_namespace(const char *uds_path, const char *path);

/* Whether path is where the VM with this uds_path listens for host
 * programs: uds_path itself, or uds_path.seqpacket. */
bool vsock_vms_is_listener(const char *uds_path, const char *path);

/* Whether two VMs share a group. */
bool vsock_vms_share_group(const struct vsock_vm_spec *a,
			   const struct vsock_vm_spec *b);

/* Checks a groups value ("a+b") as the groups key would: for the
 * single-VM form's --groups, accepted for vhost-device-vsock's command
 * lines (one VM has no sibling to reach). Returns 0 or -1 with err. */
int vsock_vms_check_groups(const char *val, char *err, size_t err_size);

void vsock_vms_release(struct vsock_vm_list *list);

#endif
