/* Write one file past RLIMIT_FSIZE, default SIGXFSZ disposition. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
	static char buf[1 << 16];
	memset(buf, 'f', sizeof buf);
	int fd = open("/work/big", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	printf("writing\n");
	fflush(stdout);
	for (;;)
		if (write(fd, buf, sizeof buf) < 0) {
			perror("write");
			return 1;
		}
}
