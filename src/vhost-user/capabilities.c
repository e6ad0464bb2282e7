/* --print-capabilities (QEMU docs/interop/vhost-user.json, "Backend program
 * conventions"). The optional features the schema names for our device
 * types (vsock: none; net: none that we implement) are left out: a VMM
 * trusts what is listed here. */
#include <stdio.h>

#include "vhost-user/capabilities.h"

/* The type is ours to choose ("vsock", "net", "loopback"); it must still
 * be valid inside a JSON string. */
static void print_json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

void vmio_backend_print_capabilities(const char *type)
{
	printf("{\n  \"type\": ");
	print_json_string(type ? type : "");
	printf(",\n  \"features\": []\n}\n");
	fflush(stdout);
}
