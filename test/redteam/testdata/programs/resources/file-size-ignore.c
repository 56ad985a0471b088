/* Ignore SIGXFSZ and write past RLIMIT_FSIZE: EFBIG, then retry with
   pwrite far past the end and ftruncate. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
	static char buf[1 << 16];
	memset(buf, 'f', sizeof buf);
	signal(SIGXFSZ, SIG_IGN);
	int fd = open("/work/big", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	long long total = 0;
	for (;;) {
		ssize_t n = write(fd, buf, sizeof buf);
		if (n < 0) {
			printf("write: %s at %lld\n", errno == EFBIG ? "EFBIG" : strerror(errno), total);
			break;
		}
		total += n;
	}
	printf("pwrite far: %s\n", pwrite(fd, buf, 1, 1LL << 40) < 0 && errno == EFBIG ? "EFBIG" : "WROTE");
	printf("ftruncate: %s\n", ftruncate(fd, 1LL << 40) < 0 && errno == EFBIG ? "EFBIG" : "GREW");
	return 1;
}
