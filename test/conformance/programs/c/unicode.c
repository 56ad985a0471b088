#include <stdio.h>

int main(void) {
    puts("héllo wörld ✓ 日本");
    return 0;
}
