// SPDX-License-Identifier: GPL-2.0
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plumb.h"

struct plumb_module *plumb_modules[] = {
	&io_module,
	&flow_module,
};

const size_t plumb_module_count = sizeof(plumb_modules) / sizeof(plumb_modules[0]);

void module_attach_settle(struct plumb_module *m, bool attached)
{
	for (size_t i = 0; i < m->nattach; i++)
		if (!strcmp(m->attach[i].status, "chosen"))
			snprintf(m->attach[i].status, sizeof(m->attach[i].status), "%s",
				 attached ? "attached" : "not attached: module failed");
}

void module_attach_note(struct plumb_module *m, const char *point, const char *program,
			const char *fmt, ...)
{
	struct attach_choice *c;
	va_list ap;

	if (m->nattach >= MODULE_MAX_ATTACH)
		return;
	c = &m->attach[m->nattach++];
	snprintf(c->point, sizeof(c->point), "%s", point);
	snprintf(c->program, sizeof(c->program), "%s", program ? program : "");
	va_start(ap, fmt);
	vsnprintf(c->status, sizeof(c->status), fmt, ap);
	va_end(ap);
}
