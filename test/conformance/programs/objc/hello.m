#import <objc/Object.h>
#include <stdio.h>

@interface Greeter : Object
+ (void)greet:(const char *)who;
@end

@implementation Greeter
+ (void)greet:(const char *)who { printf("Hello, %s!\n", who); }
@end

int main(void) {
    [Greeter greet:"World"];
    return 0;
}
