// SPDX-License-Identifier: GPL-2.0
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plumb.h"

struct plumb_module *plumb_modules[] = {
	&io_module, &flow_module, &sched_module, &wait_module, &blk_module,
};

const size_t plumb_module_count = sizeof(plumb_modules) / sizeof(plumb_modules[0]);

void module_attach_settle(struct plumb_module *m, bool attached)
{
	char why[sizeof(m->attach[0].status)];

	/* "chosen" or "chosen: why" */
	for (size_t i = 0; i < m->nattach; i++) {
		if (strncmp(m->attach[i].status, "chosen", 6) ||
		    (m->attach[i].status[6] && m->attach[i].status[6] != ':'))
			continue;
		snprintf(why, sizeof(why), "%s", m->attach[i].status + 6);
		if (!attached)
			snprintf(m->attach[i].status, sizeof(m->attach[i].status), "%s",
				 "not attached: module failed");
		else
			snprintf(m->attach[i].status, sizeof(m->attach[i].status), "attached%.*s",
				 (int)sizeof(m->attach[i].status) - 9, why);
	}
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
