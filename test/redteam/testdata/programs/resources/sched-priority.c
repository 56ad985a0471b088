/* Grab the CPU from everyone else: real-time scheduling, negative nice,
   real-time I/O priority, locked memory. Each must be refused. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *e(int r) {
	return r == 0 ? "GRANTED" : errno == EPERM ? "EPERM" : errno == EACCES ? "EACCES" : strerror(errno);
}

int main(void) {
	struct sched_param sp = {.sched_priority = 99};
	printf("SCHED_FIFO: %s\n", e(sched_setscheduler(0, SCHED_FIFO, &sp)));
	printf("SCHED_RR: %s\n", e(sched_setscheduler(0, SCHED_RR, &sp)));
	errno = 0;
	printf("setpriority -20: %s\n", e(setpriority(PRIO_PROCESS, 0, -20)));
	errno = 0;
	int n = nice(-5);
	printf("nice -5: %s\n", n == -1 && errno ? e(-1) : n < 0 ? "GRANTED" : "unchanged");
	/* IOPRIO_CLASS_RT = 1, shifted by 13; IOPRIO_WHO_PROCESS = 1. */
	printf("ioprio RT: %s\n", e(syscall(SYS_ioprio_set, 1, 0, (1 << 13) | 0) < 0 ? -1 : 0));
	static char page[4096];
	int r = mlock(page, sizeof page);
	printf("mlock: %s\n", r == 0 ? "GRANTED" : (errno == EPERM || errno == ENOMEM) ? "refused" : strerror(errno));
	r = mlockall(MCL_CURRENT);
	printf("mlockall: %s\n", r == 0 ? "GRANTED" : (errno == EPERM || errno == ENOMEM) ? "refused" : strerror(errno));
	return 0;
}
