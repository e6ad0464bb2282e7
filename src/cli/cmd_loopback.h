/* `vmio loopback`: argv[0] is the subcommand's name. Returns the process exit
 * status. */
#ifndef VMIO_CLI_CMD_LOOPBACK_H
#define VMIO_CLI_CMD_LOOPBACK_H

int vmio_cmd_loopback(int argc, char **argv);

#endif
