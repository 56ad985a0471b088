/* open() until EMFILE; then try to raise RLIMIT_NOFILE back up. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

int main(void) {
	int n = 0, last = -1;
	for (;;) {
		int fd = open("/dev/null", O_RDONLY);
		if (fd < 0) {
			printf("%s %d\n", errno == EMFILE ? "EMFILE" : strerror(errno), n);
			break;
		}
		n++;
		last = fd;
	}
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	printf("OPENED %d HIGHEST %d LIMIT %llu/%llu\n", n, last, (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
	return 0;
}
