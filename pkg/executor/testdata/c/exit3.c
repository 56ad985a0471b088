#include <stdio.h>

int main(void) {
    puts("exiting with 3");
    return 3;
}
