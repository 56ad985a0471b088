#include <fstream>
#include <iostream>
#include <sstream>

int main() {
    std::ifstream in("data/input.txt");
    if (!in) {
        std::cerr << "cannot open data/input.txt" << std::endl;
        return 1;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    std::cout << ss.str() << std::endl;
    return 0;
}
