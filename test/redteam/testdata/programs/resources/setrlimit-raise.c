/* Try to raise every hard limit the sandbox set: each must fail with EPERM.
   Lowering must still work. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

static void raise_hard(const char *name, int res) {
	struct rlimit rl, up;
	getrlimit(res, &rl);
	up.rlim_cur = up.rlim_max = RLIM_INFINITY;
	int r = setrlimit(res, &up);
	printf("%s hard=%llu infinity: %s\n", name, (unsigned long long)rl.rlim_max, r ? (errno == EPERM ? "EPERM" : strerror(errno)) : "RAISED");
	if (rl.rlim_max != RLIM_INFINITY) {
		up.rlim_cur = up.rlim_max = rl.rlim_max + 1;
		r = setrlimit(res, &up);
		printf("%s +1: %s\n", name, r ? (errno == EPERM ? "EPERM" : strerror(errno)) : "RAISED");
	}
	r = prlimit(1, res, &up, NULL);
	printf("%s pid1: %s\n", name, r ? (errno == EPERM ? "EPERM" : strerror(errno)) : "RAISED");
}

int main(void) {
	raise_hard("NOFILE", RLIMIT_NOFILE);
	raise_hard("FSIZE", RLIMIT_FSIZE);
	raise_hard("CPU", RLIMIT_CPU);
	raise_hard("STACK", RLIMIT_STACK);
	raise_hard("MEMLOCK", RLIMIT_MEMLOCK);
	raise_hard("CORE", RLIMIT_CORE);
	struct rlimit low = {64, 64};
	printf("lower NOFILE: %s\n", setrlimit(RLIMIT_NOFILE, &low) ? strerror(errno) : "ok");
	return 0;
}
