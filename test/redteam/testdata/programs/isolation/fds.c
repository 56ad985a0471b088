// No descriptor above 2 exists at start: nothing of the engine (config or
// status pipes, the /work mount fd, the engine binary) leaks in.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <termios.h>
#include <unistd.h>

int main(void) {
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	int leaked = 0;
	for (int fd = 3; fd < 65536; fd++) {
		if (fcntl(fd, F_GETFD) == -1 && errno == EBADF)
			continue;
		char path[64], target[256] = {0};
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
		readlink(path, target, sizeof target - 1);
		printf("LEAKED fd %d -> %s\n", fd, target);
		leaked++;
	}
	for (int fd = 0; fd < 3; fd++)
		printf("std fd %d %s\n", fd, fcntl(fd, F_GETFD) == -1 ? "CLOSED" : "OPEN");
	// No terminal to push input into (TIOCSTI) or to take over.
	for (int fd = 0; fd < 3; fd++) {
		char c = 'x';
		int r = ioctl(fd, TIOCSTI, &c);
		printf("tiocsti fd %d %s\n", fd, r == 0 ? "INJECTED" : errno == ENOTTY ? "ENOTTY" : "FAILED");
	}
	printf("controlling tty %s\n", open("/dev/tty", O_RDWR) >= 0 ? "OPENED" : "NONE");
	printf("nofile %llu\n", (unsigned long long)rl.rlim_cur);
	printf(leaked ? "FDS LEAKED %d\n" : "FDS CLEAN\n", leaked);
	return 0;
}
