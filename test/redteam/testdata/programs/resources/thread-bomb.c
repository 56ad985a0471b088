/* pthread_create until the kernel refuses: threads count against the
   processes limit too. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void *park(void *arg) { (void)arg; pause(); return NULL; }

int main(void) {
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 << 10);
	int n = 0;
	for (int i = 0; i < 100000; i++) {
		pthread_t t;
		int err = pthread_create(&t, &a, park, NULL);
		if (err) {
			printf("%s after %d threads\n", err == EAGAIN ? "EAGAIN" : strerror(err), n);
			return 0;
		}
		n++;
	}
	printf("never refused: %d threads\n", n);
	return 0;
}
