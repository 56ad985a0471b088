/* Write to stdout forever, ignoring EPIPE and SIGPIPE. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

int main(void) {
	static char buf[1 << 16];
	memset(buf, 'A', sizeof buf);
	signal(SIGPIPE, SIG_IGN);
	for (;;)
		write(1, buf, sizeof buf);
}
