#include <filesystem>
#include <fstream>
#include <iostream>

int main() {
    std::filesystem::create_directories("out");
    std::ofstream out("out/result.txt");
    out << "result: ok";
    out.close();
    std::cout << "written" << std::endl;
    return 0;
}
