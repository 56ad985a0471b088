#import <objc/Object.h>
#include <stdio.h>

@interface Printer : Object
+ (void)line:(const char *)s;
@end

@implementation Printer
+ (void)line:(const char *)s { printf("%s\n", s); }
@end

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) [Printer line:argv[i]];
    return 0;
}
