// Nested namespaces: unshare, clone with CLONE_NEW*, setns are refused
// with EPERM, clone3 reports ENOSYS; threads and plain fork still work.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/sched.h>

static const char *en(long r) {
	if (r >= 0)
		return "SUCCEEDED";
	switch (errno) {
	case EPERM: return "EPERM";
	case ENOSYS: return "ENOSYS";
	case EINVAL: return "EINVAL";
	case EACCES: return "EACCES";
	}
	return strerror(errno);
}

static void *thread(void *arg) { return arg; }

int main(void) {
	setvbuf(stdout, NULL, _IONBF, 0);
	struct { const char *name; int flag; } ns[] = {
		{"NEWUSER", CLONE_NEWUSER}, {"NEWNS", CLONE_NEWNS}, {"NEWNET", CLONE_NEWNET},
		{"NEWPID", CLONE_NEWPID}, {"NEWIPC", CLONE_NEWIPC}, {"NEWUTS", CLONE_NEWUTS},
		{"NEWCGROUP", CLONE_NEWCGROUP}, {"NEWTIME", CLONE_NEWTIME},
		{"NEWUSER|NEWNS", CLONE_NEWUSER | CLONE_NEWNS},
	};
	for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
		long r = syscall(SYS_unshare, ns[i].flag);
		printf("unshare %s %s\n", ns[i].name, en(r));
		if (r == 0)
			_exit(3); // never go on inside a namespace we made
	}
	// Raw clone with namespace flags: the child would exit at once.
	for (size_t i = 0; i < 7; i++) {
		long r = syscall(SYS_clone, (unsigned long)ns[i].flag | SIGCHLD, 0, 0, 0, 0);
		if (r == 0)
			_exit(0);
		if (r > 0)
			waitpid(r, NULL, 0);
		printf("clone %s %s\n", ns[i].name, en(r));
	}
	// The high word of clone's flags is ignored by the kernel; so must the
	// filter be unable to be fooled by it.
	long r = syscall(SYS_clone, 0xffffffff00000000UL | CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
	if (r == 0)
		_exit(0);
	if (r > 0)
		waitpid(r, NULL, 0);
	printf("clone highbits NEWUSER %s\n", en(r));

	struct clone_args ca = {.flags = CLONE_NEWUSER, .exit_signal = SIGCHLD};
	r = syscall(SYS_clone3, &ca, sizeof ca);
	if (r == 0)
		_exit(0);
	printf("clone3 NEWUSER %s\n", en(r));
	struct clone_args plain = {.exit_signal = SIGCHLD};
	r = syscall(SYS_clone3, &plain, sizeof plain);
	if (r == 0)
		_exit(0);
	printf("clone3 plain %s\n", en(r));

	int fd = open("/proc/self/ns/user", O_RDONLY);
	printf("setns user %s\n", en(syscall(SYS_setns, fd, CLONE_NEWUSER)));
	fd = open("/proc/self/ns/net", O_RDONLY);
	printf("setns net %s\n", en(syscall(SYS_setns, fd, 0)));
	printf("setns badfd %s\n", en(syscall(SYS_setns, -1, 0)));

	// What still works: fork and threads (glibc falls back from clone3).
	pid_t p = fork();
	if (p == 0)
		_exit(7);
	int st;
	waitpid(p, &st, 0);
	printf("fork %s\n", WIFEXITED(st) && WEXITSTATUS(st) == 7 ? "OK" : "BROKEN");
	pthread_t t;
	printf("pthread %s\n", pthread_create(&t, NULL, thread, NULL) == 0 && pthread_join(t, NULL) == 0 ? "OK" : "BROKEN");
	return 0;
}
