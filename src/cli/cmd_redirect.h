/* `vmio redirect`: argv[0] is the subcommand's name. Returns the process exit
 * status. */
#ifndef VMIO_CLI_CMD_REDIRECT_H
#define VMIO_CLI_CMD_REDIRECT_H

int vmio_cmd_redirect(int argc, char **argv);

#endif
