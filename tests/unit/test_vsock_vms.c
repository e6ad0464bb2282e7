/* `vmio vsock --vm` and `--config`: the argument and YAML parsers and the
 * checks across VMs, good inputs and bad, each bad one with a message
 * that names the key (and, in YAML, the line). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/vsock_vms.h"

static char err[512];

static int yaml(struct vsock_vm_list *l, const char *text)
{
	return vsock_vms_parse_yaml(l, "vms.yaml", text, strlen(text), err,
				    sizeof(err));
}

static void assert_err(const char *needle)
{
	if (!strstr(err, needle))
		fail_msg("error '%s' does not say '%s'", err, needle);
}

static void test_vm_arg_full(void **state)
{
	struct vsock_vm_list l = { 0 };

	assert_int_equal(vsock_vms_parse_arg(&l,
					     "guest-cid=4,socket=/tmp/a.sock,"
					     "uds-path=/tmp/a.vsock,"
					     "tx-buffer-size=64k,queue-size=256,"
					     "groups=red+blue,thread=7",
					     err, sizeof(err)),
			 0);
	assert_int_equal(l.n, 1);
	assert_int_equal(l.vms[0].guest_cid, 4);
	assert_string_equal(l.vms[0].socket, "/tmp/a.sock");
	assert_string_equal(l.vms[0].uds_path, "/tmp/a.vsock");
	assert_int_equal(l.vms[0].tx_buffer_size, 65536);
	assert_int_equal(l.vms[0].queue_size, 256);
	assert_int_equal(l.vms[0].ngroups, 2);
	assert_string_equal(l.vms[0].groups[0], "red");
	assert_string_equal(l.vms[0].groups[1], "blue");
	assert_int_equal(l.vms[0].thread, 7);
	assert_int_equal(vsock_vms_check(&l, err, sizeof(err)), 0);
	vsock_vms_release(&l);
}

static void test_vm_arg_defaults_and_groups(void **state)
{
	struct vsock_vm_list l = { 0 };

	assert_int_equal(vsock_vms_parse_arg(&l, "guest-cid=3,socket=s3,uds-path=u3",
					     err, sizeof(err)), 0);
	assert_int_equal(vsock_vms_parse_arg(&l, "guest-cid=4,socket=s4,uds-path=u4",
					     err, sizeof(err)), 0);
	assert_int_equal(vsock_vms_parse_arg(&l, "guest-cid=5,socket=s5,uds-path=u5,"
					     "groups=other", err, sizeof(err)), 0);
	assert_int_equal(vsock_vms_parse_arg(&l, "guest-cid=6,socket=s6,uds-path=u6,"
					     "groups=other+default", err,
					     sizeof(err)), 0);
	assert_int_equal(vsock_vms_check(&l, err, sizeof(err)), 0);
	assert_true(vsock_vms_in_namespace("/a/vm", "/a/vm_52"));
	assert_false(vsock_vms_in_namespace("/a/vm", "/a/vm2"));
	assert_false(vsock_vms_in_namespace("/a/vm", "/a/vm"));
	assert_int_equal(l.vms[0].tx_buffer_size, 0);
	assert_int_equal(l.vms[0].queue_size, 0);
	assert_int_equal(l.vms[0].thread, -1);
	assert_string_equal(l.vms[0].groups[0], "default");
	assert_true(vsock_vms_share_group(&l.vms[0], &l.vms[1]));
	assert_false(vsock_vms_share_group(&l.vms[0], &l.vms[2]));
	assert_true(vsock_vms_share_group(&l.vms[2], &l.vms[3]));
	assert_true(vsock_vms_share_group(&l.vms[0], &l.vms[3]));
	vsock_vms_release(&l);
}

static void test_vm_arg_bad(void **state)
{
	static const struct {
		const char *arg, *says;
	} bad[] = {
		{ "", "empty" },
		{ "guest-cid", "not KEY=VALUE" },
		{ "guest-cid=2", "guest-cid: '2'" },
		{ "guest-cid=x", "guest-cid: 'x'" },
		{ "guest-cid=4294967295", "guest-cid" },
		{ "socket=", "socket: empty path" },
		{ "uds-path=", "uds-path: empty path" },
		{ "tx-buffer-size=0", "tx-buffer-size: '0'" },
		{ "tx-buffer-size=2g", "tx-buffer-size" },
		{ "queue-size=100", "queue-size: '100'" },
		{ "queue-size=65536", "queue-size" },
		{ "groups=a++b", "groups: 'a++b' has an empty group name" },
		{ "groups=", "groups" },
		{ "thread=-1", "thread: '-1'" },
		{ "thread=256", "thread: '256' is not a worker from 0 to 255" },
		{ "color=red", "unknown key 'color'" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct vsock_vm_list l = { 0 };

		err[0] = '\0';
		if (!vsock_vms_parse_arg(&l, bad[i].arg, err, sizeof(err)))
			fail_msg("'%s' was accepted", bad[i].arg);
		assert_err("--vm: ");
		assert_err(bad[i].says);
		vsock_vms_release(&l);
	}
}

static void test_check_rejects(void **state)
{
	static const struct {
		const char *a, *b, *says;
	} bad[] = {
		{ "socket=s,uds-path=u", NULL, "VM 1: guest-cid is required" },
		{ "guest-cid=3,uds-path=u", NULL, "socket is required" },
		{ "guest-cid=3,socket=s", NULL, "uds-path is required" },
		{ "guest-cid=3,socket=s,uds-path=u",
		  "guest-cid=3,socket=t,uds-path=v", "VM 2: guest-cid 3 is VM 1's" },
		{ "guest-cid=3,socket=s,uds-path=u",
		  "guest-cid=4,socket=s,uds-path=v", "socket s is VM 1's" },
		{ "guest-cid=3,socket=s,uds-path=u",
		  "guest-cid=4,socket=t,uds-path=u", "uds-path u is VM 1's" },
		/* Where a guest's connection to a host port lands. */
		{ "guest-cid=3,socket=u_9,uds-path=u", NULL,
		  "VM 1: socket u_9 is where VM 1's guest reaches host ports" },
		{ "guest-cid=3,socket=s,uds-path=u",
		  "guest-cid=4,socket=u_1,uds-path=v",
		  "VM 2: socket u_1 is where VM 1's guest" },
		{ "guest-cid=3,socket=s,uds-path=u_5",
		  "guest-cid=4,socket=t,uds-path=u",
		  "VM 1: uds-path u_5 is where VM 2's guest" },
	};
	struct vsock_vm_list none = { 0 };

	assert_int_equal(vsock_vms_check(&none, err, sizeof(err)), -1);
	assert_err("no VM");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct vsock_vm_list l = { 0 };

		assert_int_equal(vsock_vms_parse_arg(&l, bad[i].a, err,
						     sizeof(err)), 0);
		if (bad[i].b)
			assert_int_equal(vsock_vms_parse_arg(&l, bad[i].b, err,
							     sizeof(err)), 0);
		assert_int_equal(vsock_vms_check(&l, err, sizeof(err)), -1);
		assert_err(bad[i].says);
		vsock_vms_release(&l);
	}
}

static void test_yaml_good(void **state)
{
	struct vsock_vm_list l = { 0 };

	assert_int_equal(yaml(&l, "# two VMs\n"
				  "vms:\n"
				  "  - guest_cid: 4\n"
				  "    socket: /tmp/vhost4.socket\n"
				  "    uds_path: /tmp/vm4.vsock\n"
				  "    tx_buffer_size: 65536\n"
				  "    queue_size: 512\n"
				  "    groups: group1+group2\n"
				  "  - guest-cid: 5\n"
				  "    socket: \"/tmp/vhost5.socket\"\n"
				  "    uds-path: '/tmp/vm5.vsock'\n"),
			 0);
	assert_int_equal(l.n, 2);
	assert_int_equal(l.vms[0].guest_cid, 4);
	assert_int_equal(l.vms[0].tx_buffer_size, 65536);
	assert_int_equal(l.vms[0].queue_size, 512);
	assert_int_equal(l.vms[0].ngroups, 2);
	assert_string_equal(l.vms[1].socket, "/tmp/vhost5.socket");
	assert_string_equal(l.vms[1].uds_path, "/tmp/vm5.vsock");
	assert_int_equal(vsock_vms_check(&l, err, sizeof(err)), 0);
	assert_string_equal(l.vms[1].groups[0], "default");
	vsock_vms_release(&l);

	/* Checks across VMs name the line a VM starts on. */
	assert_int_equal(yaml(&l, "vms:\n"
				  "  - {guest_cid: 4, socket: a, uds_path: b}\n"
				  "  - {guest_cid: 4, socket: c, uds_path: d}\n"),
			 0);
	assert_int_equal(vsock_vms_check(&l, err, sizeof(err)), -1);
	assert_err("VM 2 (line 3): guest-cid 4 is VM 1's too");
	vsock_vms_release(&l);

	/* Flow style is YAML too. */
	assert_int_equal(yaml(&l, "{vms: [{guest_cid: 7, socket: a, "
				  "uds_path: b}]}"), 0);
	assert_int_equal(l.n, 1);
	assert_int_equal(l.vms[0].guest_cid, 7);
	vsock_vms_release(&l);
}

/* Top-level keys beside vms: are kept, named as long options, for the
 * command to apply. */
static void test_yaml_options(void **state)
{
	struct vsock_vm_list l = { 0 };

	assert_int_equal(yaml(&l, "max_connections: 4096\n"
				  "vms:\n  - guest_cid: 3\n    socket: a\n"
				  "    uds_path: b\n"
				  "control: /run/vmio/vsock/vm1/control.sock\n"
				  "tx-splice: true\n"), 0);
	assert_int_equal(l.n, 1);
	assert_int_equal(l.nopts, 3);
	assert_string_equal(l.opts[0].name, "max-connections");
	assert_string_equal(l.opts[0].value, "4096");
	assert_int_equal(l.opts[0].line, 1);
	assert_string_equal(l.opts[1].name, "control");
	assert_string_equal(l.opts[1].value,
			    "/run/vmio/vsock/vm1/control.sock");
	assert_string_equal(l.opts[2].name, "tx-splice");
	assert_string_equal(l.opts[2].value, "true");
	assert_int_equal(l.opts[2].line, 7);
	vsock_vms_release(&l);
	assert_int_equal(l.nopts, 0);
}

static void test_yaml_bad(void **state)
{
	static const struct {
		const char *text, *says;
	} bad[] = {
		{ "", "expected a document with a vms: list" },
		{ "- 1\n", "vms.yaml:1: expected a mapping" },
		{ "vms: 3\n", "vms.yaml:1: expected vms: a list" },
		{ "vm:\n  - guest_cid: 3\n", "vms.yaml:1: vm: expected 'vms' "
					      "(a list of VMs) or an option" },
		{ "vms: []\ncontrol: a\ncontrol: b\n",
		  "vms.yaml:3: control: given twice (line 2)" },
		{ "max_connections: 3\nmax-connections: 4\nvms: []\n",
		  "vms.yaml:2: max-connections: given twice (line 1)" },
		{ "{}\n", "no 'vms' list" },
		{ "vms:\n  - 3\n", "vms.yaml:2: vms[0]: expected a mapping" },
		{ "vms:\n  - guest_cid: 3\n    colour: red\n",
		  "vms.yaml:3: vms[0]: unknown key 'colour'" },
		{ "vms:\n  - guest_cid: 3\n  - guest_cid: two\n",
		  "vms.yaml:3: vms[1]: guest-cid: 'two'" },
		{ "vms:\n  - queue_size: 3\n", "vms.yaml:2: vms[0]: queue-size" },
		{ "vms:\n  - groups: [a, b]\n",
		  "vms.yaml:2: vms[0]: groups: expected a single value" },
		{ "vms:\n  - guest_cid: 3\n   bad: [\n", "vms.yaml:" },
		{ "vms: []\n---\nvms: []\n", "one document only" },
		{ "vms: &a [ ]\nx: *a\n", "vms.yaml:2: x: expected 'vms'" },
		{ "vms: []\nvms: []\n", "vms.yaml:2: 'vms' given twice" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct vsock_vm_list l = { 0 };

		err[0] = '\0';
		if (!yaml(&l, bad[i].text))
			fail_msg("'%s' was accepted", bad[i].text);
		assert_err(bad[i].says);
		vsock_vms_release(&l);
	}
}

static void test_config_file(void **state)
{
	struct vsock_vm_list l = { 0 };
	char path[] = "/tmp/vmio-vms-XXXXXX";
	static const char text[] = "vms:\n  - guest_cid: 9\n    socket: s\n"
				   "    uds_path: u\n";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, sizeof(text) - 1),
			 (ssize_t)sizeof(text) - 1);
	close(fd);
	assert_int_equal(vsock_vms_load_config(&l, path, err, sizeof(err)), 0);
	assert_int_equal(l.n, 1);
	assert_int_equal(l.vms[0].guest_cid, 9);
	vsock_vms_release(&l);
	unlink(path);
	assert_int_equal(vsock_vms_load_config(&l, path, err, sizeof(err)), -1);
	assert_err("No such file");
	assert_err(path);
	vsock_vms_release(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vm_arg_full),
		cmocka_unit_test(test_vm_arg_defaults_and_groups),
		cmocka_unit_test(test_vm_arg_bad),
		cmocka_unit_test(test_check_rejects),
		cmocka_unit_test(test_yaml_good),
		cmocka_unit_test(test_yaml_options),
		cmocka_unit_test(test_yaml_bad),
		cmocka_unit_test(test_config_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
