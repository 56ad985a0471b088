/* 16 threads spinning: the CPU-time limit counts all of them together. */
#include <pthread.h>
#include <stdio.h>

static void *spin(void *arg) {
	volatile unsigned long x = (unsigned long)arg;
	for (;;)
		x = x * 6364136223846793005UL + 1;
	return NULL;
}

int main(void) {
	pthread_t t[16];
	for (long i = 0; i < 16; i++)
		pthread_create(&t[i], NULL, spin, (void *)i);
	printf("burning\n");
	fflush(stdout);
	spin(NULL);
}
