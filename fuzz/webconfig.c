// SPDX-License-Identifier: GPL-2.0
/* libFuzzer target: the --web-config parser (export/webconfig.c) on any bytes. */
#include <stddef.h>
#include <stdint.h>

#include "export/webconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct web_config c;
	char err[256];

	web_config_parse((const char *)data, size, "/etc/plumb", &c, err, sizeof(err));
	return 0;
}
