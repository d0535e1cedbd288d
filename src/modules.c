// SPDX-License-Identifier: GPL-2.0
#include <string.h>

#include "plumb.h"

struct plumb_module *plumb_modules[] = {
	&io_module,
};

const size_t plumb_module_count = sizeof(plumb_modules) / sizeof(plumb_modules[0]);

struct plumb_module *plumb_module_find(const char *name)
{
	for (size_t i = 0; i < plumb_module_count; i++)
		if (!strcmp(plumb_modules[i]->name, name))
			return plumb_modules[i];
	return NULL;
}
