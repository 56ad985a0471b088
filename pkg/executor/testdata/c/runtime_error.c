#include <stdio.h>

int main(void) {
    volatile int *p = NULL;
    *p = 42; /* SIGSEGV */
    printf("%d\n", *p);
    return 0;
}
