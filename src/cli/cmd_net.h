/* `vmio net`: argv[0] is the subcommand's name. Returns the process exit
 * status. */
#ifndef VMIO_CLI_CMD_NET_H
#define VMIO_CLI_CMD_NET_H

int vmio_cmd_net(int argc, char **argv);

#endif
