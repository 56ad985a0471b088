#include <stdio.h>
#include <stdlib.h>

int main(void) {
    fprintf(stderr, "boom\n");
    abort();
}
