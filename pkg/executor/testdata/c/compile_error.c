#include <stdio.h>

int main(void) {
    printf("%d\n", undefined_name);
    return 0;
}
