/* `vmio vsock`: argv[0] is the subcommand's name. Returns the process exit
 * status. */
#ifndef VMIO_CLI_CMD_VSOCK_H
#define VMIO_CLI_CMD_VSOCK_H

int vmio_cmd_vsock(int argc, char **argv);

#endif
