/* Eight processes flood the same stdout at once. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

int main(void) {
	static char buf[4096];
	memset(buf, 'M', sizeof buf);
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < 7; i++)
		if (fork() == 0)
			break;
	for (;;)
		write(1, buf, sizeof buf);
}
