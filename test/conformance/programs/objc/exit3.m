#import <objc/Object.h>

@interface Code : Object
+ (int)value;
@end

@implementation Code
+ (int)value { return 3; }
@end

int main(void) {
    return [Code value];
}
