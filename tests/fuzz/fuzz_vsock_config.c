/* Fuzzes the YAML config parser of `vmio vsock --config`: the file is the
 * operator's, but a parser must not crash, leak or hang on any input.
 * Invariants checked: a parse either succeeds or leaves a NUL-terminated
 * message; what it accepts has VM entries within bounds; vsock_vms_check
 * then accepts only VMs with every required key and no duplicates. */
#include <assert.h>
#include <string.h>

#include "cli/vsock_vms.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vsock_vm_list l = { 0 };
	char err[256];

	if (size > VSOCK_CONFIG_MAX_BYTES)
		return 0;
	err[0] = '\0';
	if (vsock_vms_parse_yaml(&l, "fuzz", data, size, err, sizeof(err))) {
		assert(memchr(err, '\0', sizeof(err)) && err[0]);
	} else if (!vsock_vms_check(&l, err, sizeof(err))) {
		assert(l.n >= 1 && l.n <= VSOCK_MAX_VMS);
		for (unsigned i = 0; i < l.n; i++) {
			const struct vsock_vm_spec *s = &l.vms[i];

			assert(s->guest_cid >= VSOCK_MIN_GUEST_CID &&
			       s->guest_cid <= VSOCK_MAX_GUEST_CID);
			assert(s->socket && s->uds_path);
			assert(s->ngroups >= 1 &&
			       s->ngroups <= VSOCK_VM_MAX_GROUPS);
			for (unsigned j = 0; j < i; j++)
				assert(l.vms[j].guest_cid != s->guest_cid);
		}
	}
	vsock_vms_release(&l);
	return 0;
}
