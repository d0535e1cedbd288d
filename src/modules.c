// SPDX-License-Identifier: GPL-2.0
#include "plumb.h"

struct plumb_module *plumb_modules[] = {
	&io_module,
};

const size_t plumb_module_count = sizeof(plumb_modules) / sizeof(plumb_modules[0]);
