#import <objc/Object.h>
#include <stdio.h>
#include <stdlib.h>

@interface Checker : Object
+ (int)divide:(int)a by:(int)b;
@end

@implementation Checker
+ (int)divide:(int)a by:(int)b {
    if (b == 0) {
        fprintf(stderr, "Checker: division by zero\n");
        abort();
    }
    return a / b;
}
@end

int main(void) {
    printf("%d\n", [Checker divide:1 by:0]);
    return 0;
}
